#!/usr/bin/env bash
# Prints the folder of an official Node.js binary of one release line (`scripts/node-line.sh 24`),
# fetching it once from the npm registry (the node-linux-<arch> packages ship the official
# builds, with include/node for native addons) into a cache shared by clones and CI runs:
# ${CO_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/conversation-orchestrator/node}/<line>.
# Its bin/ goes first on PATH; set npm_config_nodedir to the folder so that node-gyp builds
# native addons (better-sqlite3) against that Node's headers, not the machine's.
set -euo pipefail
line="${1:?usage: scripts/node-line.sh <major, e.g. 24>}"
[[ "$line" =~ ^[0-9]+$ ]] || { echo "Expected a Node.js major such as 24, got \`$line\`" >&2; exit 2; }
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "No official Node.js package for $(uname -m) on the npm registry" >&2; exit 2 ;;
esac
cache="${CO_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/conversation-orchestrator/node}/$line"
home="$cache/node_modules/node-linux-$arch"
if ! { [ -x "$home/bin/node" ] && [[ "$("$home/bin/node" -v 2>/dev/null)" == "v$line."* ]]; }; then
  mkdir -p "$cache"
  # A lock so that parallel callers (test workers, two CI runs) fetch it once.
  exec 9>"$cache/.lock"
  flock 9
  if ! [ -x "$home/bin/node" ]; then
    echo "fetching Node.js $line ($arch) from the npm registry into $cache" >&2
    [ -f "$cache/package.json" ] || echo '{"name":"node-line","private":true}' >"$cache/package.json"
    npm install --prefix "$cache" --no-audit --no-fund --no-save --loglevel=error \
      "node-linux-$arch@$line" >&2
  fi
  [[ "$("$home/bin/node" -v)" == "v$line."* ]] || { echo "node-linux-$arch@$line gave $("$home/bin/node" -v)" >&2; exit 1; }
fi
echo "$home"
