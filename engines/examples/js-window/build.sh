#!/bin/sh
# Builds js-window.wasm, a latch:context@0.1.x component, with componentize-js
# from npm in this directory's node_modules (versions pinned in
# package-lock.json; nothing is installed globally). Every WASI feature is
# disabled (`-d`), so the component imports only the contract.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$here"
if [ ! -x node_modules/.bin/componentize-js ]; then
    npm ci --no-audit --no-fund --silent
fi
node_modules/.bin/componentize-js engine.js --wit "$root/wit" -n context-engine \
    -d stdio random clocks http fetch-event -o js-window.wasm
echo "built $here/js-window.wasm"
