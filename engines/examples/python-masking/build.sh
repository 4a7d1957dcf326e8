#!/bin/sh
# Builds python-masking.wasm, a latch:context@0.1.x component, with
# componentize-py from PyPI, installed (pinned) into a virtual environment
# under $LATCH_TOOLS (default: the checkout's .ci/cache/tools); nothing is
# installed globally. `--stub-wasi` leaves out every WASI import: the engine
# reads nothing but the session the host lends it.
set -eu
VERSION=0.25.1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
tools="${LATCH_TOOLS:-$root/.ci/cache/tools}"
if ! "$tools/py/bin/componentize-py" --version 2>/dev/null | grep -q " $VERSION\$"; then
    python3 -m venv "$tools/py"
    "$tools/py/bin/pip" install --quiet "componentize-py==$VERSION"
fi
cd "$here"
"$tools/py/bin/componentize-py" --quiet -d "$root/wit" -w context-engine \
    componentize --stub-wasi engine -p . -o python-masking.wasm
echo "built $here/python-masking.wasm"
