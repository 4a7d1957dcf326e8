//! Seeds of the randomized kill trials. A trial's seed is drawn from the
//! clock unless `LATCH_KILL_SEED` names one, and is printed either way, so a
//! failing trial (whose captured output cargo shows) can be replayed
//! exactly: `LATCH_KILL_SEED=<seed> cargo test -p latch-kernel --test <binary> <test>`.

/// The environment variable that replays one trial.
pub const SEED_VAR: &str = "LATCH_KILL_SEED";

/// The seeds of `n` trials of `test`, each printed with how to replay it:
/// the one `LATCH_KILL_SEED` names (one trial), else `n` drawn from the
/// clock. Panics, naming the variable, when its value is not a number.
pub fn trial_seeds(test: &str, n: usize) -> Vec<u64> {
    let named = std::env::var(SEED_VAR).ok();
    let seeds = match seeds_from(named.as_deref(), n, clock()) {
        Ok(seeds) => seeds,
        Err(e) => panic!("{e}"),
    };
    for seed in &seeds {
        eprintln!("{test}: seed {seed} (replay: {SEED_VAR}={seed})");
    }
    seeds
}

/// [`trial_seeds`] without the environment and the clock: `named` (decimal
/// or `0x` hex) alone, else `n` seeds spread from `clock`.
pub fn seeds_from(named: Option<&str>, n: usize, clock: u64) -> Result<Vec<u64>, String> {
    if let Some(text) = named {
        let text = text.trim();
        let parsed = match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => text.parse(),
        };
        return match parsed {
            Ok(0) => Err(format!("{SEED_VAR}=0 is not a seed: a seed is never 0")),
            Ok(seed) => Ok(vec![seed]),
            Err(e) => Err(format!(
                "{SEED_VAR}={text:?} is not a seed ({e}): give a decimal or 0x-hex u64"
            )),
        };
    }
    Ok((0..n as u64)
        .map(|i| (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ clock | 1)
        .collect())
}

/// Nanoseconds of the wall clock: differs from run to run.
fn clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// The next number of a seeded generator (xorshift64*); the state must not
/// be 0.
pub fn next(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

#[test]
fn a_named_seed_replays_and_a_bad_one_is_refused() {
    assert_eq!(seeds_from(Some("12345"), 3, 7), Ok(vec![12345]));
    assert_eq!(seeds_from(Some(" 0xff "), 3, 7), Ok(vec![255]));
    let err = seeds_from(Some("abc"), 3, 7).unwrap_err();
    assert!(err.contains(SEED_VAR) && err.contains("\"abc\""), "{err}");
    assert!(seeds_from(Some("0"), 3, 7).is_err());
    let drawn = seeds_from(None, 3, 7).unwrap();
    assert_eq!(drawn.len(), 3);
    assert_ne!(
        drawn,
        seeds_from(None, 3, 8).unwrap(),
        "the clock varies them"
    );
    assert!(
        drawn.iter().all(|s| *s != 0),
        "a generator state is never 0"
    );
    // The same seed, the same sequence.
    let (mut a, mut b) = (drawn[0], drawn[0]);
    assert_eq!(
        (0..4).map(|_| next(&mut a)).collect::<Vec<_>>(),
        (0..4).map(|_| next(&mut b)).collect::<Vec<_>>()
    );
}
