//! `latch engine new`: scaffold a context-engine project in Rust, Python,
//! JavaScript or C that builds as-is and passes `latch engine check`.
//!
//! The templates are files under `host/templates/engine-new/`, compiled in.
//! The Rust, JavaScript and C projects start from the repository's examples
//! (`engines/examples/window`, `js-window`, `c-window`), so a scaffold is
//! what the conformance suite already passes; the Python one is a sliding
//! window small enough to read in one sitting. Every project carries the
//! contract (`wit/context.wit`) and a README that goes from "edit this
//! function" to "configure it with `[engine] component`".

use std::path::{Path, PathBuf};

/// The language of a scaffolded engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust on `latch-engine-sdk`, built with `cargo build --target wasm32-wasip2`.
    Rust,
    /// Python, built with componentize-py.
    Python,
    /// JavaScript, built with componentize-js.
    Js,
    /// C, built with clang, wasi-libc and `wit-bindgen c`.
    C,
}

/// Why `latch engine new` wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    /// The name cannot name a package in every language.
    #[error(
        "`{0}` is not a usable engine name: use lowercase ASCII letters, digits, `-` and `_`, starting with a letter (e.g. `my-engine`)"
    )]
    BadName(String),
    /// The target folder exists and holds files.
    #[error(
        "`{}` already exists and is not empty: choose another name or pass `--dir` to write elsewhere",
        .0.display()
    )]
    Exists(PathBuf),
    /// A Rust engine depends on the SDK by path, and it is not there.
    #[error(
        "the Latch SDK is not at `{}`: pass `--sdk PATH` pointing at the `sdk/` folder of a Latch checkout",
        .0.display()
    )]
    NoSdk(PathBuf),
    /// Writing a file failed.
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// One file of a template: its path in the project, its text (with
/// `{{name}}`, `{{crate}}` and `{{sdk}}` placeholders) and whether it is a
/// script to run.
struct File {
    path: &'static str,
    text: &'static str,
    executable: bool,
}

const fn file(path: &'static str, text: &'static str) -> File {
    File {
        path,
        text,
        executable: false,
    }
}

const fn script(path: &'static str, text: &'static str) -> File {
    File {
        path,
        text,
        executable: true,
    }
}

const CONTRACT: &str = include_str!("../../../wit/context.wit");
const README: &str = include_str!("../../templates/engine-new/README.md");

fn template(lang: Lang) -> Vec<File> {
    let mut files = match lang {
        Lang::Rust => vec![
            file(
                "Cargo.toml",
                include_str!("../../templates/engine-new/rust/Cargo.toml"),
            ),
            file(
                "src/lib.rs",
                include_str!("../../../engines/examples/window/src/lib.rs"),
            ),
        ],
        Lang::Python => vec![
            file(
                "engine.py",
                include_str!("../../templates/engine-new/python/engine.py"),
            ),
            script(
                "build.sh",
                include_str!("../../templates/engine-new/python/build.sh"),
            ),
        ],
        Lang::Js => vec![
            file(
                "engine.js",
                include_str!("../../../engines/examples/js-window/engine.js"),
            ),
            file(
                "package.json",
                include_str!("../../templates/engine-new/js/package.json"),
            ),
            script(
                "build.sh",
                include_str!("../../templates/engine-new/js/build.sh"),
            ),
        ],
        Lang::C => vec![
            file(
                "engine.c",
                include_str!("../../../engines/examples/c-window/engine.c"),
            ),
            file(
                "json.h",
                include_str!("../../../engines/examples/c-window/json.h"),
            ),
            script(
                "build.sh",
                include_str!("../../templates/engine-new/c/build.sh"),
            ),
        ],
    };
    files.push(file("wit/context.wit", CONTRACT));
    files.push(file("README.md", README));
    files.push(file(
        ".gitignore",
        "/target/\n/build/\n/.tools/\n/node_modules/\n__pycache__/\n*.wasm\n",
    ));
    files
}

/// How to build a scaffold of `lang` named `name` (run in its folder), and
/// the component the build leaves.
pub fn build_instructions(lang: Lang, name: &str) -> (&'static str, String) {
    match lang {
        Lang::Rust => (
            "cargo build --target wasm32-wasip2 --release",
            format!("target/wasm32-wasip2/release/{}.wasm", crate_name(name)),
        ),
        Lang::Python | Lang::Js | Lang::C => ("./build.sh", format!("{name}.wasm")),
    }
}

fn crate_name(name: &str) -> String {
    name.replace('-', "_")
}

fn language_notes(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => {
            "`src/lib.rs` implements `latch_engine_sdk::Engine`; edit `materialize`. \
Price with `latch_engine_sdk::estimate`, render with `latch_engine_sdk::validate::canon`, and \
test natively against `latch_engine_sdk::MemorySession` (`cargo test`). Once: `rustup target \
add wasm32-wasip2`."
        }
        Lang::Python => {
            "`engine.py` holds the `ContextEngine` class; edit `materialize`. Records are \
dataclasses, variants are classes such as `EventBody_ToolResult`, errors are raised as \
`Err(...)`. `build.sh` installs componentize-py (pinned) into a virtual environment under \
`.tools/` (set `LATCH_TOOLS` to share one) and builds with `--stub-wasi`, so the component \
imports nothing but the contract."
        }
        Lang::Js => {
            "`engine.js` holds the `ContextEngine` class; edit `view`. Records are objects with \
camelCase fields, enums are strings, variants are `{ tag, val }`, `u64` values are BigInts, \
errors are thrown as `{ tag, val }`. `build.sh` installs componentize-js (pinned in \
`package.json`) into `node_modules` and disables every WASI feature, so the component imports \
nothing but the contract. Imported functions are synchronous."
        }
        Lang::C => {
            "`engine.c` implements the exports `wit-bindgen c` declares in \
`build/gen/context_engine.h`; edit `window_view`. Ownership: free every list and string an \
import returns (the `*_free` functions), drop the `borrow<session-view>` you are given before \
you return (`exports_latch_context_engine_session_view_drop_borrow`), and allocate what you \
return with `malloc`: the bindings free it after the host has copied it. Debian: `apt-get \
install clang lld wasi-libc libclang-rt-dev-wasm32`; `build.sh` installs `wit-bindgen-cli` \
and `wasm-tools` (pinned) under `.tools/` (set `LATCH_TOOLS` to share them)."
        }
    }
}

/// Write a new engine project named `name` in `lang` into `dir`, which must
/// not exist or be empty. `sdk` is the SDK folder a Rust project depends on
/// (default: the one this `latch` was built from). Returns the files written.
pub fn scaffold(
    dir: &Path,
    name: &str,
    lang: Lang,
    sdk: Option<&Path>,
) -> Result<Vec<PathBuf>, NewError> {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && name.len() <= 64;
    if !valid {
        return Err(NewError::BadName(name.to_string()));
    }
    if dir.exists()
        && std::fs::read_dir(dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(NewError::Exists(dir.to_path_buf()));
    }
    let sdk = match sdk {
        Some(p) => p.to_path_buf(),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk"),
    };
    let sdk_text = if lang == Lang::Rust {
        let canonical = sdk
            .canonicalize()
            .ok()
            .filter(|p| p.join("Cargo.toml").is_file())
            .ok_or_else(|| NewError::NoSdk(sdk.clone()))?;
        canonical.display().to_string()
    } else {
        String::new()
    };
    let (build, artifact) = build_instructions(lang, name);
    let fill = |text: &str| {
        text.replace("{{name}}", name)
            .replace("{{crate}}", &crate_name(name))
            .replace("{{sdk}}", &sdk_text)
            .replace("{{build}}", build)
            .replace("{{artifact}}", &artifact)
            .replace("{{notes}}", language_notes(lang))
    };
    let mut written = Vec::new();
    for f in template(lang) {
        let path = dir.join(f.path);
        let write = |path: &Path| -> std::io::Result<()> {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, fill(f.text))?;
            #[cfg(unix)]
            if f.executable {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
            }
            Ok(())
        };
        write(&path).map_err(|source| NewError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// `latch engine new`: scaffold, then print the files and the next steps.
pub fn run(name: &str, lang: Lang, dir: Option<&Path>, sdk: Option<&Path>) -> anyhow::Result<i32> {
    let dir = dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(name));
    let files = scaffold(&dir, name, lang, sdk)?;
    println!("created {} ({:?}):", dir.display(), lang);
    for f in &files {
        println!("  {}", f.strip_prefix(&dir).unwrap_or(f).display());
    }
    let (build, artifact) = build_instructions(lang, name);
    println!("next:");
    println!("  cd {}", dir.display());
    println!("  {build}");
    println!("  latch engine check {artifact}");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_and_occupied_folders_are_refused_before_anything_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        for bad in ["", "My-Engine", "9lives", "a b", "x/../y", "é"] {
            let dir = tmp.path().join("out");
            let err = scaffold(&dir, bad, Lang::Python, None).unwrap_err();
            assert!(matches!(err, NewError::BadName(_)), "{bad:?}: {err}");
            assert!(!dir.exists(), "{bad:?} wrote something");
        }
        let dir = tmp.path().join("taken");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("keep.txt"), "mine").unwrap();
        let err = scaffold(&dir, "taken", Lang::C, None).unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.join("keep.txt")).unwrap(),
            "mine"
        );
        let err = scaffold(
            &tmp.path().join("r"),
            "r",
            Lang::Rust,
            Some(&tmp.path().join("nowhere")),
        )
        .unwrap_err();
        assert!(err.to_string().contains("--sdk PATH"), "{err}");
    }

    #[test]
    fn every_language_gets_the_contract_a_readme_and_its_build_with_placeholders_filled() {
        let tmp = tempfile::tempdir().unwrap();
        for lang in [Lang::Rust, Lang::Python, Lang::Js, Lang::C] {
            let dir = tmp.path().join(format!("{lang:?}"));
            let files = scaffold(&dir, "my-engine", lang, None).unwrap();
            let wit = std::fs::read_to_string(dir.join("wit/context.wit")).unwrap();
            assert_eq!(wit, CONTRACT);
            let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
            let (build, artifact) = build_instructions(lang, "my-engine");
            assert!(readme.contains(build), "{lang:?}: {readme}");
            assert!(readme.contains(&artifact), "{lang:?}");
            assert!(readme.contains("[engine]"), "{lang:?}");
            for f in &files {
                let text = std::fs::read_to_string(f).unwrap();
                assert!(
                    !text.contains("{{"),
                    "{}: unfilled placeholder",
                    f.display()
                );
            }
            if lang != Lang::Rust {
                let mode = std::fs::metadata(dir.join("build.sh")).unwrap();
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    assert_eq!(mode.permissions().mode() & 0o111, 0o111, "{lang:?}");
                }
                let _ = mode;
            }
        }
    }
}
