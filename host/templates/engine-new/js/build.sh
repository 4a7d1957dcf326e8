#!/bin/sh
# Builds {{name}}.wasm with componentize-js from npm, installed (pinned in
# package.json) into this folder's node_modules; nothing is installed
# globally. Every WASI feature is disabled, so the component imports only the
# contract.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
if [ ! -x node_modules/.bin/componentize-js ]; then
    npm install --no-audit --no-fund --silent
fi
node_modules/.bin/componentize-js engine.js --wit wit -n context-engine \
    -d stdio random clocks http fetch-event -o {{name}}.wasm
echo "built $here/{{name}}.wasm"
