//! Loading components: world and version checks with clear refusals, the
//! embedded default, and the precompiled cache.

use latch::engine::runtime::{EngineSource, LoadError};
use latch::engine::{ComponentEngine, ContextEngine, EngineRuntime, SandboxLimits};
use latch_engine_sdk::MemorySession;
use latch_engine_sdk::types::*;
use std::path::PathBuf;

fn load_err(rt: &EngineRuntime, bytes: &[u8]) -> LoadError {
    match rt.load_bytes("candidate.wasm", bytes) {
        Ok(_) => panic!("expected a refusal"),
        Err(e) => e,
    }
}

#[test]
fn builtin_and_window_report_contract_0_1_0() {
    let rt = EngineRuntime::new(None).unwrap();
    let builtin = rt
        .load(&EngineSource::Builtin("continuity".into()))
        .unwrap();
    assert_eq!(builtin.info.contract_version, "0.1.0");
    assert_eq!(builtin.info.world, "context-engine");
    let window = rt
        .load(&EngineSource::Path(PathBuf::from(latch_tests::WINDOW_WASM)))
        .unwrap();
    assert_eq!(window.info.contract_version, "0.1.0");
    assert!(
        window
            .info
            .exports
            .iter()
            .any(|e| e == "latch:context/engine@0.1.0")
    );
}

#[test]
fn refusals_say_what_was_found_and_expected() {
    let rt = EngineRuntime::new(None).unwrap();
    assert!(matches!(
        load_err(&rt, b"hello world"),
        LoadError::NotWasm { .. }
    ));
    assert!(matches!(
        load_err(&rt, b"\0asm\x01\0\0\0"),
        LoadError::CoreModule { .. }
    ));
    let other_world =
        wat::parse_str(r#"(component (core module $m) (core instance (instantiate $m)))"#).unwrap();
    let err = load_err(&rt, &other_world);
    assert!(matches!(err, LoadError::WrongWorld { .. }), "{err}");
    assert!(
        err.to_string().contains("latch:context/engine@0.1.x"),
        "{err}"
    );
    let future = wat::parse_str(
        r#"(component (instance $i) (export "latch:context/engine@0.2.0" (instance $i)))"#,
    )
    .unwrap();
    let err = load_err(&rt, &future);
    match &err {
        LoadError::Incompatible { found, .. } => assert_eq!(found, "0.2.0"),
        other => panic!("expected Incompatible, got {other:?}"),
    }
    assert!(err.to_string().contains("0.1.0"), "{err}");
    let err = rt
        .load(&EngineSource::Builtin("nope".into()))
        .err()
        .expect("unknown builtin");
    assert!(err.to_string().contains("builtin:continuity"), "{err}");
    let err = rt
        .load(&EngineSource::Path("/no/such/engine.wasm".into()))
        .err()
        .expect("missing file");
    assert!(matches!(err, LoadError::Read { .. }), "{err}");
}

#[test]
fn precompiled_cache_is_used_and_a_corrupt_entry_is_recompiled() {
    let dir = tempfile::tempdir().unwrap();
    let rt = EngineRuntime::new(Some(dir.path().to_path_buf())).unwrap();
    let source = EngineSource::Path(PathBuf::from(latch_tests::WINDOW_WASM));
    assert!(!rt.load(&source).unwrap().from_cache, "first load compiles");
    assert!(
        rt.load(&source).unwrap().from_cache,
        "second load uses the cache"
    );
    let bytes = std::fs::read(latch_tests::WINDOW_WASM).unwrap();
    let path = dir.path().join(format!("{}.cwasm", rt.cache_key(&bytes)));
    let mut cached = std::fs::read(&path).unwrap();
    let mid = cached.len() / 2;
    cached[mid] ^= 0xff;
    std::fs::write(&path, &cached).unwrap();
    let reloaded = rt.load(&source).unwrap();
    assert!(!reloaded.from_cache, "a corrupt cache entry is not trusted");
    assert!(rt.load(&source).unwrap().from_cache, "and it was rewritten");
    // The recompiled engine works.
    let model = ModelProfile::with_defaults("openai", "m");
    let mut engine = ComponentEngine::new(reloaded, SandboxLimits::default(), "s", model.clone());
    let mut session = MemorySession::new("s", model.clone());
    session.user("hello");
    let request = ContextRequest {
        system_prompt: "sys".into(),
        session_context: SessionContext {
            workspace: "/w".into(),
            repository_instructions: String::new(),
            mode: "run".into(),
        },
        budget: ContextBudget::for_model(&model),
        query: String::new(),
        extensions: vec![],
    };
    let view = engine.materialize(&session, &request).unwrap();
    assert_eq!(view.messages.last().unwrap().source_seqs, vec![1]);
}
