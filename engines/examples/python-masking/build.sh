#!/bin/sh
# Builds python-masking.wasm, a latch:context@0.1.x component, with
# componentize-py from PyPI in a virtual environment under the checkout's
# .ci/cache (nothing is installed globally). `--stub-wasi` leaves out every
# WASI import: the engine reads nothing but the session the host lends it.
set -eu
VERSION=0.25.1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
venv="${LATCH_PY_VENV:-$root/.ci/cache/py}"
if ! "$venv/bin/componentize-py" --version 2>/dev/null | grep -q " $VERSION\$"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "componentize-py==$VERSION"
fi
cd "$here"
"$venv/bin/componentize-py" --quiet -d "$root/wit" -w context-engine \
    componentize --stub-wasi engine -p . -o python-masking.wasm
echo "built $here/python-masking.wasm"
