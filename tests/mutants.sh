#!/usr/bin/env bash
# Mutation testing of the code whose tests are Latch's contract: the kernel
# reducers (task state, evidence, failures, files, turns), the kernel ops and
# checkpoints, the SDK's view checks, and the continuity engine's budget,
# epoch loader, recall, episodes and state rendering. cargo-mutants changes
# one expression at a time (a `>` becomes `>=`, a function returns a
# default, ...) and runs the area's tests against each change; a change no
# test notices ("missed") is a pin that cannot fail.
#
# Local tier: hours on two cores, never in CI. One area at a time:
#
#   tests/mutants.sh AREA [extra cargo-mutants options]
#
# AREA is one of: kernel-state, kernel-ops, checkpoint, validate,
# continuity (or `list` to count the mutants of each). Each run writes
# target/mutants/AREA/mutants.out/{caught,missed,timeout,unviable}.txt and
# prints the share of viable mutants caught. Each mutant runs only the tests
# of its own crate (`--test-package`), restricted to the test binaries that
# exercise the area, so a run takes hours, not days. The mutated copy of the
# sources and its target directory stay under target/mutants between runs.
#
# Needs `cargo install --locked cargo-mutants` (27.x builds with Rust 1.95).
# The survivors judged harmless, and why, are in tests/mutants-survivors.md.

set -euo pipefail
# The file globs are cargo-mutants', not the shell's.
set -f
cd "$(dirname "$0")/.."

area=${1:-}
shift || true

# Files and tests of each area.
args_for() {
    case "$1" in
    kernel-state)
        echo "-p latch-kernel -f host/kernel/src/state/*.rs --test-package latch-kernel --cargo-test-arg=--lib --cargo-test-arg=--test=store"
        ;;
    kernel-ops)
        echo "-p latch-kernel -f host/kernel/src/ops.rs --test-package latch-kernel --cargo-test-arg=--lib --cargo-test-arg=--test=store"
        ;;
    checkpoint)
        echo "-p latch-kernel -f host/kernel/src/checkpoint.rs --test-package latch-kernel --cargo-test-arg=--lib --cargo-test-arg=--test=store"
        ;;
    validate)
        echo "-p latch-engine-sdk -f sdk/src/validate/*.rs -f sdk/src/validate/**/*.rs --test-package latch-engine-sdk --cargo-test-arg=--lib"
        ;;
    continuity)
        echo "-p latch-continuity -f engines/continuity/src/budget.rs -f engines/continuity/src/epoch.rs -f engines/continuity/src/recall.rs -f engines/continuity/src/episodes.rs -f engines/continuity/src/state.rs --test-package latch-continuity --cargo-test-arg=--lib"
        ;;
    *)
        return 1
        ;;
    esac
}

areas="kernel-state kernel-ops checkpoint validate continuity"

if [ "$area" = list ]; then
    for a in $areas; do
        # shellcheck disable=SC2046
        echo "$a: $(cargo mutants --list $(args_for "$a") | wc -l) mutants"
    done
    exit 0
fi

if ! spec=$(args_for "$area"); then
    echo "usage: tests/mutants.sh AREA|list [cargo-mutants options]; AREA is one of: $areas" >&2
    exit 2
fi
if ! cargo mutants --version >/dev/null 2>&1; then
    echo "cargo-mutants is missing: cargo install --locked cargo-mutants" >&2
    exit 2
fi

root=$(pwd)
out="$root/target/mutants/$area"
mkdir -p "$out"
# cargo-mutants edits a copy of the sources. It lives at a fixed path with a
# target directory of its own, both kept between runs, so only the first run
# compiles the dependencies (copying a target directory per run would not
# keep its timestamps, and cargo would rebuild everything). tar keeps each
# file's time, so unchanged sources stay fresh.
tree="$root/target/mutants/tree"
mkdir -p "$tree"
tar -C "$root" --exclude=./target --exclude=./.git --exclude=./.ci/cache -cf - . | tar -C "$tree" -xf -
export CARGO_TARGET_DIR="$root/target/mutants/target"
# Low priority, and one mutant at a time (--in-place): the machine is
# shared. A missed mutant makes cargo-mutants exit non-zero; the figure
# below is the result.
# shellcheck disable=SC2086
(cd "$tree" && nice -n 15 cargo mutants --in-place --output "$out" $spec "$@") || true

count() { [ -f "$out/mutants.out/$1.txt" ] && wc -l <"$out/mutants.out/$1.txt" || echo 0; }
caught=$(count caught)
missed=$(count missed)
timeout=$(count timeout)
unviable=$(count unviable)
# With --iterate, mutants caught (or unviable) in earlier runs are skipped
# and listed here.
earlier=$(count previously_caught)
viable=$((caught + missed + timeout))
if [ "$viable" -eq 0 ]; then
    echo "$area: no viable mutant was tested (see $out/mutants.out)" >&2
    exit 1
fi
echo "$area: $((caught + timeout)) of $viable viable mutants caught ($(((caught + timeout) * 1000 / viable / 10)).$(((caught + timeout) * 1000 / viable % 10))%): $caught failed a test, $timeout timed out, $missed missed; $unviable unviable"
if [ "$earlier" -gt 0 ]; then
    echo "(an --iterate run: $earlier mutants caught or unviable in earlier runs were skipped and are not in these figures)"
fi
if [ "$missed" -gt 0 ]; then
    echo "missed:"
    cat "$out/mutants.out/missed.txt"
fi
