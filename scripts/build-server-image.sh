#!/usr/bin/env bash
# Build the server's image from the Dockerfile at the top of the repository.
#
#   scripts/build-server-image.sh [--tag NAME]      (default tag: cubicle-server:latest)
#
# Node.js base of both stages: $NODE_IMAGE if set; else node:24-bookworm-slim when
# present locally or pullable within 20 s; else a local cubicle-node:<version> made
# without any image registry: the debootstrap Debian base of the sandbox image
# (sandbox-image/build.sh --base-only) plus Node.js and npm from the npm registry
# (scripts/node-from-npm.sh: packages node-linux-<arch> and npm, cached in ~/.cache/cubicle).
# $DOCKER_GID: gid of the group that owns the Docker socket (default: the local one).
# $EXTRA_CA_FILE: PEM file of CAs npm must trust in the build stage (a TLS-intercepting
# proxy); default: the certificates in /usr/local/share/ca-certificates, if any.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TAG=cubicle-server:latest
NODE_BASE=node:24-bookworm-slim

say() { printf '[server-image] %s\n' "$*"; }
die() { printf '[server-image] ERROR: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --tag) [ $# -ge 2 ] || die "--tag needs a value"; TAG=$2; shift 2 ;;
    --tag=*) TAG=${1#*=}; shift ;;
    -h|--help) sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
docker info >/dev/null 2>&1 || die "no Docker engine answers (run scripts/docker-up.sh)"

# --- a Node.js image made from the debootstrap base, for hosts without an image registry
make_local_node() {
  local version image ctx prefix
  version=$(bash "$ROOT/scripts/node-from-npm.sh" --version)
  image=cubicle-node:$version
  if docker image inspect "$image" >/dev/null 2>&1; then say "reusing $image"; NODE_IMAGE=$image; return 0; fi
  bash "$ROOT/sandbox-image/build.sh" --base-only
  prefix=$(bash "$ROOT/scripts/node-from-npm.sh") || die "getting Node.js from the npm registry failed"
  ctx=$(mktemp -d /tmp/cubicle-node.XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$ctx'" EXIT
  cp -a "$prefix" "$ctx/node"
  rm -f "$ctx/node/.done"
  say "building $image from cubicle-base:bookworm"
  # Same user as the official node images: node, uid/gid 1000.
  docker build -q -t "$image" --label "cubicle.node-version=$version" -f - "$ctx" >/dev/null <<'DOCKERFILE' || die "building the Node.js base failed"
FROM cubicle-base:bookworm
COPY node/ /usr/local/
RUN groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \
 && node --version && npm --version
DOCKERFILE
  rm -rf "$ctx"
  trap - EXIT
  NODE_IMAGE=$image
}

if [ -n "${NODE_IMAGE:-}" ]; then
  :
elif docker image inspect "$NODE_BASE" >/dev/null 2>&1; then
  NODE_IMAGE=$NODE_BASE
elif say "trying docker pull $NODE_BASE (20 s limit)" &&
     timeout 20 docker pull -q "$NODE_BASE" >/dev/null 2>&1; then
  NODE_IMAGE=$NODE_BASE
else
  say "$NODE_BASE unavailable; using Node.js $(bash "$ROOT/scripts/node-from-npm.sh" --version) from the npm registry on a debootstrap base"
  make_local_node
fi

DOCKER_GID=${DOCKER_GID:-$(stat -c %g /var/run/docker.sock 2>/dev/null || echo 999)}
args=(--build-arg "NODE_IMAGE=$NODE_IMAGE" --build-arg "DOCKER_GID=$DOCKER_GID" -t "$TAG")
if [ -n "${EXTRA_CA_FILE:-}" ]; then
  [ -r "$EXTRA_CA_FILE" ] || die "EXTRA_CA_FILE=$EXTRA_CA_FILE is not readable"
  args+=(--build-arg "EXTRA_CA_PEM=$(cat "$EXTRA_CA_FILE")")
elif compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  say "npm in the build stage also trusts /usr/local/share/ca-certificates/*.crt"
  args+=(--build-arg "EXTRA_CA_PEM=$(cat /usr/local/share/ca-certificates/*.crt)")
fi
say "building $TAG (NODE_IMAGE=$NODE_IMAGE, DOCKER_GID=$DOCKER_GID)"
t0=$(date +%s)
docker build "${args[@]}" "$ROOT" ||
  die "docker build failed (see the output above)"
size=$(docker image inspect -f '{{ .Size }}' "$TAG")
say "built $TAG in $(( $(date +%s) - t0 ))s; image size: $(( size / 1000000 )) MB ($size bytes)"
