//! The helper against the links and swaps a hostile command plants.

use super::*;
use std::os::unix::fs::symlink;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

struct Fixture {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    ws: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn fixture() -> Fixture {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let (w, o) = (
        std::fs::canonicalize(ws.path()).unwrap(),
        std::fs::canonicalize(outside.path()).unwrap(),
    );
    std::fs::write(o.join("secret"), "SECRET").unwrap();
    Fixture {
        _dirs: (ws, outside),
        ws: w,
        outside: o,
    }
}

#[test]
fn reads_refuse_links_on_the_way_and_special_files_without_blocking() {
    let f = fixture();
    let root = open_dir(&f.ws).unwrap();
    std::fs::create_dir(f.ws.join("dir")).unwrap();
    std::fs::write(f.ws.join("dir/a.txt"), "a").unwrap();
    symlink(f.outside.join("secret"), f.ws.join("key")).unwrap();
    symlink(&f.outside, f.ws.join("out")).unwrap();
    symlink(f.ws.join("dir"), f.ws.join("inside")).unwrap();
    assert_eq!(
        read(&root, Path::new("dir/a.txt")).unwrap(),
        Some(b"a".to_vec())
    );
    assert_eq!(read(&root, Path::new("missing")).unwrap(), None);
    assert_eq!(read(&root, Path::new("key")), Err(BeneathError::Symlink));
    assert_eq!(
        read(&root, Path::new("out/secret")),
        Err(BeneathError::Symlink)
    );
    // Even a link that stays inside is not followed.
    assert_eq!(
        read(&root, Path::new("inside/a.txt")),
        Err(BeneathError::Symlink)
    );
    assert_eq!(read(&root, Path::new("../x")), Err(BeneathError::Outside));
    assert_eq!(
        read(&root, Path::new("/etc/passwd")),
        Err(BeneathError::Outside)
    );
    assert_eq!(read(&root, Path::new("dir")), Err(BeneathError::NotAFile));
    // A FIFO nobody writes to would block a plain open forever.
    rustix::fs::mknodat(&root, "fifo", FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    assert_eq!(read(&root, Path::new("fifo")), Err(BeneathError::NotAFile));
}

#[test]
fn writes_replace_a_file_through_its_descriptor_and_never_through_a_link() {
    let f = fixture();
    let root = open_dir(&f.ws).unwrap();
    std::fs::write(f.ws.join("a.txt"), "old").unwrap();
    let mut t = open_target(&root, Path::new("a.txt")).unwrap();
    assert_eq!(t.bytes().unwrap(), Some(b"old".to_vec()));
    write(&root, Path::new("a.txt"), t, b"new", false).unwrap();
    assert_eq!(std::fs::read(f.ws.join("a.txt")).unwrap(), b"new");

    // New files, with their directories.
    let t = open_target(&root, Path::new("d/e/new.txt")).unwrap();
    assert!(matches!(t, Target::Missing));
    write(&root, Path::new("d/e/new.txt"), t, b"n", true).unwrap();
    assert_eq!(std::fs::read(f.ws.join("d/e/new.txt")).unwrap(), b"n");

    // A link to a file outside, and a link to a directory outside on the way.
    symlink(f.outside.join("secret"), f.ws.join("key")).unwrap();
    symlink(&f.outside, f.ws.join("out")).unwrap();
    assert!(matches!(
        open_target(&root, Path::new("key")),
        Err(BeneathError::Symlink)
    ));
    assert!(matches!(
        open_target(&root, Path::new("out/secret")),
        Err(BeneathError::Symlink)
    ));
    // Missing behind a link: creating it refuses the link too.
    let t = open_target(&root, Path::new("out/planted")).unwrap_or(Target::Missing);
    assert_eq!(
        write(&root, Path::new("out/planted"), t, b"x", true),
        Err(BeneathError::Symlink)
    );
    // A link planted after the check, where a new file was to be created.
    let t = open_target(&root, Path::new("late")).unwrap();
    symlink(f.outside.join("late"), f.ws.join("late")).unwrap();
    assert_eq!(
        write(&root, Path::new("late"), t, b"x", false),
        Err(BeneathError::Appeared)
    );
    assert!(!f.outside.join("late").exists());
    assert!(!f.outside.join("planted").exists());
    assert_eq!(std::fs::read(f.outside.join("secret")).unwrap(), b"SECRET");
}

#[test]
fn only_regular_files_are_removed() {
    let f = fixture();
    let root = open_dir(&f.ws).unwrap();
    std::fs::write(f.ws.join("a.txt"), "a").unwrap();
    symlink(f.outside.join("secret"), f.ws.join("key")).unwrap();
    std::fs::create_dir(f.ws.join("dir")).unwrap();
    remove_file(&root, Path::new("a.txt")).unwrap();
    assert!(!f.ws.join("a.txt").exists());
    assert_eq!(
        remove_file(&root, Path::new("key")),
        Err(BeneathError::Symlink)
    );
    assert_eq!(
        remove_file(&root, Path::new("dir")),
        Err(BeneathError::NotAFile)
    );
    assert_eq!(
        remove_file(&root, Path::new("missing")),
        Err(BeneathError::NotFound)
    );
    assert!(f.ws.join("key").is_symlink() && f.outside.join("secret").exists());
}

/// A command exchanges a directory of the workspace with a link to a
/// directory outside (`renameat2(RENAME_EXCHANGE)`) as fast as it can while
/// Latch writes into that directory: nothing is ever written outside.
#[test]
fn a_directory_swapped_with_a_link_in_a_loop_never_lets_a_write_out() {
    let f = fixture();
    let root = open_dir(&f.ws).unwrap();
    std::fs::create_dir(f.ws.join("sub")).unwrap();
    symlink(&f.outside, f.ws.join("swap")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, ws) = (Arc::clone(&stop), f.ws.clone());
        std::thread::spawn(move || {
            let dir = open_dir(&ws).unwrap();
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    &dir,
                    "sub",
                    &dir,
                    "swap",
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let (mut written, mut refused) = (0, 0);
    for i in 0..3000 {
        let rel = format!("sub/f{}", i % 7);
        let rel = Path::new(&rel);
        let outcome = open_target(&root, rel).and_then(|t| write(&root, rel, t, b"payload", true));
        match outcome {
            Ok(()) => written += 1,
            Err(_) => refused += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    let outside: Vec<_> = std::fs::read_dir(&f.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(outside, ["secret"], "nothing written outside");
    assert!(swaps > 100, "the swap raced ({swaps} swaps)");
    assert!(
        written > 0 && refused > 0,
        "{written} written, {refused} refused"
    );
}

#[test]
fn read_within_follows_links_that_stay_inside_and_refuses_links_out() {
    let f = fixture();
    std::fs::create_dir(f.ws.join("docs")).unwrap();
    std::fs::write(f.ws.join("docs/AGENTS.md"), "Use tabs.").unwrap();
    symlink("docs/AGENTS.md", f.ws.join("AGENTS.md")).unwrap();
    symlink(f.outside.join("secret"), f.ws.join("CLAUDE.md")).unwrap();
    symlink(&f.outside, f.ws.join("out")).unwrap();
    symlink(f.ws.join("missing"), f.ws.join("dangling")).unwrap();
    let read = |rel: &str| read_within(&f.ws, Path::new(rel), 1 << 20);
    assert_eq!(read("AGENTS.md"), Ok(Some(b"Use tabs.".to_vec())));
    assert_eq!(read("CLAUDE.md"), Err(BeneathError::Symlink));
    assert_eq!(read("out/secret"), Err(BeneathError::Symlink));
    assert_eq!(read("dangling"), Ok(None));
    assert_eq!(read("missing"), Ok(None));
    assert_eq!(read("../x"), Err(BeneathError::Outside));
    assert_eq!(
        read_within(&f.ws, Path::new("AGENTS.md"), 3),
        Ok(Some(b"Use".to_vec()))
    );
}
