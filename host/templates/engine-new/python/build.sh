#!/bin/sh
# Builds {{name}}.wasm with componentize-py, installed (pinned) into a virtual
# environment under $LATCH_TOOLS (default: .tools in this folder); nothing is
# installed globally. `--stub-wasi` leaves out every WASI import.
set -eu
VERSION=0.25.1
here=$(cd "$(dirname "$0")" && pwd)
tools="${LATCH_TOOLS:-$here/.tools}"
if ! "$tools/py/bin/componentize-py" --version 2>/dev/null | grep -q " $VERSION\$"; then
    python3 -m venv "$tools/py"
    "$tools/py/bin/pip" install --quiet "componentize-py==$VERSION"
fi
cd "$here"
"$tools/py/bin/componentize-py" --quiet -d wit -w context-engine \
    componentize --stub-wasi engine -p . -o {{name}}.wasm
echo "built $here/{{name}}.wasm"
