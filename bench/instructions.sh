#!/usr/bin/env bash
# Instructions per dispatch of the core loop at two git revisions, counted by callgrind: unlike
# timings on a shared, noisy machine, instruction counts repeat exactly (V8 runs single-threaded
# and predictable here). Usage: bench/instructions.sh [base-ref] (default: HEAD~1). Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
base="${1:-HEAD~1}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
ln -s "$PWD/node_modules" "$work/node_modules"

build() { # $1: ref or "worktree", $2: out dir
  if [ "$1" = worktree ]; then
    npx tsc -p tsconfig.build.json --outDir "$2" >/dev/null
  else
    mkdir -p "$work/src-$3"
    git archive "$1" src tsconfig.json tsconfig.build.json package.json | tar -x -C "$work/src-$3"
    ln -s "$PWD/node_modules" "$work/src-$3/node_modules"
    (cd "$work/src-$3" && npx tsc -p tsconfig.build.json --outDir "$2" >/dev/null)
  fi
  echo '{ "type": "module" }' >"$2/package.json"
}
build "$base" "$work/base" base
build worktree "$work/head" head

count() { # $1: build dir, $2: conversations -> total instructions
  N="$2" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    node --single-threaded --predictable bench/instructions-workload.mjs "$1/index.js" 2>&1 |
    awk '/Collected/ { print $4 }'
}
per_dispatch() { # the difference between 60 and 20 conversations cancels start-up costs
  local a b
  a=$(count "$1" 20)
  b=$(count "$1" 60)
  echo $(((b - a) / 400000))
}

echo "| responders | $base | working tree | ratio |"
echo "|---|---:|---:|---:|"
# MODES="async async+telemetry" counts only those.
for mode in ${MODES:-async sync async+observer async+onDispatch async+telemetry}; do
  unset SYNC OBSERVER
  case "$mode" in
    sync) export SYNC=1 ;;
    async+observer) export OBSERVER=1 ;;
    async+onDispatch) export OBSERVER=dispatch ;;
    async+telemetry) export OBSERVER=telemetry ;;
  esac
  old=$(per_dispatch "$work/base")
  new=$(per_dispatch "$work/head")
  echo "| $mode | $old | $new | $(awk -v a="$old" -v b="$new" 'BEGIN { printf "%.2f", b / a }') |"
done
