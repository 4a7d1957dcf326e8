//! The engine runtime: one wasmtime engine for the process, the linker with the
//! contract's imports and the sandboxed WASI, the precompiled-component cache,
//! and the epoch ticker that enforces call deadlines.

use super::bindings::context::ContextEnginePre;
use super::builtin;
use super::sandbox::EngineState;
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use wasmtime::component::{Component, HasSelf, Linker};

/// How often the epoch advances; deadlines are counted in these ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The contract version this host implements.
pub const CONTRACT_VERSION: &str = latch_engine_sdk::CONTRACT_VERSION;
/// The export a context-engine component must provide (any `0.1.x`).
pub const ENGINE_EXPORT: &str = "latch:context/engine";
/// The export a child-policy component provides.
pub const CHILD_POLICY_EXPORT: &str = "latch:context/child-policy";

/// Why an engine could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// `builtin:NAME` names no builtin.
    #[error("there is no builtin engine `{name}`; builtins are: {available}")]
    UnknownBuiltin { name: String, available: String },
    /// The component file does not exist or cannot be read.
    #[error("cannot read engine component `{path}`: {message}")]
    Read { path: PathBuf, message: String },
    /// The bytes are not WebAssembly at all.
    #[error("`{name}` is not a WebAssembly component (it does not start with the `\\0asm` header)")]
    NotWasm { name: String },
    /// A core module, not a component.
    #[error(
        "`{name}` is a core WebAssembly module, not a component; build the engine with `cargo build --target wasm32-wasip2` (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule { name: String },
    /// wasmtime refused to compile it.
    #[error("`{name}` failed to compile: {message}")]
    Compile { name: String, message: String },
    /// It does not implement the context-engine world.
    #[error(
        "`{name}` does not implement the latch:context context-engine world: expected an export `{ENGINE_EXPORT}@0.1.x`, found {found}"
    )]
    WrongWorld { name: String, found: String },
    /// It implements another version of the contract.
    #[error(
        "`{name}` implements latch:context@{found}, but this host implements latch:context@{CONTRACT_VERSION} (compatible: 0.1.x); rebuild the engine against the current latch-engine-sdk"
    )]
    Incompatible { name: String, found: String },
    /// Its imports cannot be satisfied by the sandbox.
    #[error("`{name}` needs imports the Latch sandbox does not provide: {message}")]
    Link { name: String, message: String },
    /// The runtime itself could not start.
    #[error("the engine runtime could not start: {0}")]
    Runtime(String),
}

/// Where an engine comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineSource {
    /// `builtin:NAME`, embedded in the binary.
    Builtin(String),
    /// A component file.
    Path(PathBuf),
}

impl EngineSource {
    /// Parse `builtin:NAME` or a path (relative paths resolve against `base`).
    pub fn parse(spec: &str, base: &Path) -> EngineSource {
        match spec.strip_prefix("builtin:") {
            Some(name) => EngineSource::Builtin(name.to_string()),
            None => {
                let path = PathBuf::from(spec);
                EngineSource::Path(if path.is_absolute() {
                    path
                } else {
                    base.join(path)
                })
            }
        }
    }
}

impl std::fmt::Display for EngineSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineSource::Builtin(n) => write!(f, "builtin:{n}"),
            EngineSource::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// What a component declares: its world's exports and imports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ComponentInfo {
    /// The world it implements (`context-engine`).
    pub world: String,
    /// The contract version of its engine export, e.g. `0.1.0`.
    pub contract_version: String,
    /// Every export name.
    pub exports: Vec<String>,
    /// Every import name.
    pub imports: Vec<String>,
    /// Size of the component in bytes.
    pub size_bytes: usize,
    /// Lower-case hex SHA-256 of the component.
    pub sha256: String,
}

/// A compiled, checked and pre-linked engine component, ready to instantiate.
pub struct LoadedComponent {
    /// The name it was loaded under (`builtin:continuity` or the path).
    pub name: String,
    /// Its declared world.
    pub info: ComponentInfo,
    /// True when it came from the precompiled cache.
    pub from_cache: bool,
    pub(crate) pre: ContextEnginePre<EngineState>,
}

/// The process's engine runtime.
pub struct EngineRuntime {
    engine: wasmtime::Engine,
    linker: Linker<EngineState>,
    cache_dir: Option<PathBuf>,
    stop_ticker: Arc<AtomicBool>,
}

impl Drop for EngineRuntime {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

impl EngineRuntime {
    /// A runtime caching precompiled components in `cache_dir` (none: no
    /// cache).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Self, LoadError> {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        config.concurrency_support(false);
        let engine =
            wasmtime::Engine::new(&config).map_err(|e| LoadError::Runtime(e.to_string()))?;
        let mut linker = Linker::<EngineState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| LoadError::Runtime(e.to_string()))?;
        super::bindings::context::ContextEngine::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
            .map_err(|e| LoadError::Runtime(e.to_string()))?;
        let stop_ticker = Arc::new(AtomicBool::new(false));
        let ticking = engine.clone();
        let stop = stop_ticker.clone();
        std::thread::Builder::new()
            .name("latch-engine-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    ticking.increment_epoch();
                }
            })
            .map_err(|e| LoadError::Runtime(e.to_string()))?;
        Ok(EngineRuntime {
            engine,
            linker,
            cache_dir,
            stop_ticker,
        })
    }

    /// The process-wide runtime, caching in [`default_cache_dir`].
    pub fn global() -> Result<&'static EngineRuntime, LoadError> {
        static RUNTIME: OnceLock<Result<EngineRuntime, String>> = OnceLock::new();
        RUNTIME
            .get_or_init(|| EngineRuntime::new(default_cache_dir()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| LoadError::Runtime(e.clone()))
    }

    /// The wasmtime engine.
    pub fn wasmtime(&self) -> &wasmtime::Engine {
        &self.engine
    }

    /// Load an engine from a builtin name or a component file.
    pub fn load(&self, source: &EngineSource) -> Result<Arc<LoadedComponent>, LoadError> {
        match source {
            EngineSource::Builtin(name) => {
                let bytes =
                    builtin::builtin_bytes(name).ok_or_else(|| LoadError::UnknownBuiltin {
                        name: name.clone(),
                        available: builtin::BUILTIN_NAMES
                            .iter()
                            .map(|n| format!("builtin:{n}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                    })?;
                self.load_bytes(&source.to_string(), bytes)
            }
            EngineSource::Path(path) => {
                let bytes = std::fs::read(path).map_err(|e| LoadError::Read {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
                self.load_bytes(&source.to_string(), &bytes)
            }
        }
    }

    /// Load an engine from component bytes, naming it `name` in messages.
    pub fn load_bytes(&self, name: &str, bytes: &[u8]) -> Result<Arc<LoadedComponent>, LoadError> {
        let (component, from_cache) = self.compile(name, bytes)?;
        let info = inspect(&self.engine, name, &component, bytes)?;
        let instance_pre =
            self.linker
                .instantiate_pre(&component)
                .map_err(|e| LoadError::Link {
                    name: name.to_string(),
                    message: format!("{e:#}"),
                })?;
        let pre = ContextEnginePre::new(instance_pre).map_err(|e| LoadError::Link {
            name: name.to_string(),
            message: format!("{e:#}"),
        })?;
        Ok(Arc::new(LoadedComponent {
            name: name.to_string(),
            info,
            from_cache,
            pre,
        }))
    }

    /// Inspect a component's world without requiring it to be an engine.
    pub fn inspect_bytes(&self, name: &str, bytes: &[u8]) -> Result<ComponentInfo, LoadError> {
        let (component, _) = self.compile(name, bytes)?;
        inspect(&self.engine, name, &component, bytes)
    }

    /// Compile `bytes`, or load their precompiled form from the cache. A cache
    /// file that fails its checksum or does not deserialize is recompiled and
    /// replaced, never trusted.
    pub fn compile(&self, name: &str, bytes: &[u8]) -> Result<(Component, bool), LoadError> {
        check_header(name, bytes)?;
        let Some(cache_dir) = &self.cache_dir else {
            return Ok((self.compile_fresh(name, bytes)?, false));
        };
        let path = cache_dir.join(format!("{}.cwasm", self.cache_key(bytes)));
        if let Some(component) = self.read_cached(&path) {
            return Ok((component, true));
        }
        let precompiled =
            self.engine
                .precompile_component(bytes)
                .map_err(|e| LoadError::Compile {
                    name: name.to_string(),
                    message: format!("{e:#}"),
                })?;
        // A cache write failure only costs a recompile next time.
        if let Err(e) = write_cache_file(&path, &precompiled) {
            tracing::warn!(
                "could not write the component cache {}: {e}",
                path.display()
            );
        }
        // SAFETY: the bytes were produced by this engine a moment ago.
        let component =
            unsafe { Component::deserialize(&self.engine, &precompiled) }.map_err(|e| {
                LoadError::Compile {
                    name: name.to_string(),
                    message: format!("{e:#}"),
                }
            })?;
        Ok((component, false))
    }

    /// Compile without touching the cache.
    pub fn compile_fresh(&self, name: &str, bytes: &[u8]) -> Result<Component, LoadError> {
        check_header(name, bytes)?;
        Component::new(&self.engine, bytes).map_err(|e| LoadError::Compile {
            name: name.to_string(),
            message: format!("{e:#}"),
        })
    }

    /// The cache file name of a component: its content hash and wasmtime's
    /// compatibility hash (version and settings).
    pub fn cache_key(&self, bytes: &[u8]) -> String {
        let content = hex::encode(Sha256::digest(bytes));
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.engine
            .precompile_compatibility_hash()
            .hash(&mut hasher);
        format!("{}-{:016x}", &content[..32], hasher.finish())
    }

    /// The cache directory in use, if any.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    fn read_cached(&self, path: &Path) -> Option<Component> {
        let file = std::fs::read(path).ok()?;
        if file.len() < 32 || Sha256::digest(&file[32..]).as_slice() != &file[..32] {
            tracing::warn!("ignoring corrupt component cache file {}", path.display());
            return None;
        }
        // SAFETY: the checksum proves these are the bytes this host wrote after
        // precompiling; wasmtime additionally checks version and settings.
        match unsafe { Component::deserialize(&self.engine, &file[32..]) } {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(
                    "ignoring unusable component cache file {}: {e}",
                    path.display()
                );
                None
            }
        }
    }
}

/// Where precompiled components are cached: `$LATCH_CACHE_DIR`, else the user
/// cache directory's `latch/components`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("LATCH_CACHE_DIR") {
        return Some(PathBuf::from(dir).join("components"));
    }
    dirs::cache_dir().map(|d| d.join("latch").join("components"))
}

/// Write `[sha256 of body][body]` atomically (temp file, then rename).
fn write_cache_file(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("component"),
        std::process::id()
    ));
    let mut data = Vec::with_capacity(32 + body.len());
    data.extend_from_slice(&Sha256::digest(body));
    data.extend_from_slice(body);
    std::fs::write(&tmp, &data)?;
    std::fs::rename(&tmp, path)
}

fn check_header(name: &str, bytes: &[u8]) -> Result<(), LoadError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(LoadError::NotWasm {
            name: name.to_string(),
        });
    }
    if bytes[4..8] == [1, 0, 0, 0] {
        return Err(LoadError::CoreModule {
            name: name.to_string(),
        });
    }
    Ok(())
}

/// Read a component's world and check that it is a compatible context engine
/// or child policy.
fn inspect(
    engine: &wasmtime::Engine,
    name: &str,
    component: &Component,
    bytes: &[u8],
) -> Result<ComponentInfo, LoadError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    let (world, version) = if let Some(v) = find_version(&exports, ENGINE_EXPORT) {
        ("context-engine", v)
    } else if let Some(v) = find_version(&exports, CHILD_POLICY_EXPORT) {
        ("child-policy-engine", v)
    } else {
        let found = if exports.is_empty() {
            "no exports".to_string()
        } else {
            format!("exports {}", exports.join(", "))
        };
        return Err(LoadError::WrongWorld {
            name: name.to_string(),
            found,
        });
    };
    if !version.starts_with("0.1.") {
        return Err(LoadError::Incompatible {
            name: name.to_string(),
            found: version,
        });
    }
    Ok(ComponentInfo {
        world: world.to_string(),
        contract_version: version,
        exports,
        imports,
        size_bytes: bytes.len(),
        sha256: hex::encode(Sha256::digest(bytes)),
    })
}

fn find_version(names: &[String], interface: &str) -> Option<String> {
    names.iter().find_map(|n| {
        let rest = n.strip_prefix(interface)?;
        Some(rest.strip_prefix('@').unwrap_or("unversioned").to_string())
    })
}
