#!/usr/bin/env bash
# Build the sandbox image each chat runs in.
#
#   sandbox-image/build.sh [--target slim|agents|full] [--tag NAME]
#   sandbox-image/build.sh --base-only   (only make sure the local debootstrap
#                                         base exists; scripts/build-server-image.sh)
#
# Defaults: target slim, tag computer-use-sandbox:latest ($DOCKER_IMAGE overrides
# the default tag). The build is skipped when the tagged image already carries
# the label cubicle.build-hash matching the current sources and target.
#
# Base image: $BASE_IMAGE if set; else debian:bookworm-slim when present locally
# or pullable within 20 s; else a local cubicle-base:bookworm made with
# debootstrap from the Debian mirror (air-gapped path: no image registry needed;
# $DEBIAN_MIRROR and $DEBIAN_SECURITY_MIRROR choose the mirrors).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TARGET=slim
BASE_ONLY=0
TAG=${DOCKER_IMAGE:-computer-use-sandbox:latest}
LOCAL_BASE=cubicle-base:bookworm
LOCAL_BASE_VERSION=3   # bump when make_local_base changes what it produces
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

say() { printf '[build] %s\n' "$*"; }
die() { printf '[build] ERROR: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --target) [ $# -ge 2 ] || die "--target needs a value"; TARGET=$2; shift 2 ;;
    --target=*) TARGET=${1#*=}; shift ;;
    --tag) [ $# -ge 2 ] || die "--tag needs a value"; TAG=$2; shift 2 ;;
    --tag=*) TAG=${1#*=}; shift ;;
    --base-only) BASE_ONLY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
case "$TARGET" in slim|agents|full) ;; *) die "--target must be slim, agents or full, got '$TARGET'" ;; esac
[ -n "$TAG" ] || die "empty tag"

command -v docker >/dev/null 2>&1 || die "docker CLI not found (run scripts/docker-up.sh)"
docker info >/dev/null 2>&1 || die "no Docker engine answers (run scripts/docker-up.sh)"

# --- content hash: every file of this folder (not node_modules, which is derived, nor this script or the
# README at its top; a README inside skills/ is a build input) + target
build_hash() {
  (
    cd "$HERE"
    find . -name node_modules -prune -o -type f ! -path ./README.md ! -path ./build.sh -print | LC_ALL=C sort | while IFS= read -r f; do
      printf '%s %s %s\n' "$f" "$(stat -c %a "$f")" "$(sha256sum <"$f" | cut -d' ' -f1)"
    done
    printf 'target=%s\nbase=%s\n' "$TARGET" "${BASE_IMAGE:-}"
  ) | sha256sum | cut -c1-32
}
HASH=$(build_hash)

current=$(docker image inspect -f '{{ index .Config.Labels "cubicle.build-hash" }}' "$TAG" 2>/dev/null || true)
if [ "$BASE_ONLY" = 1 ]; then
  :
elif [ "$current" = "$HASH" ]; then
  say "image up to date: $TAG (target $TARGET, build hash $HASH)"
  exit 0
fi
[ "$BASE_ONLY" = 1 ] || say "building $TAG (target $TARGET, build hash $HASH)"

# --- npm packages of the image: the browser CLI, the sub-agent CLIs (slim's and codex for agents/full) and
# the office libraries for Node.js. Each DIR is installed on this host (whose npm has the registry's TLS
# setup) into DIR/node_modules, which the Dockerfile copies, so the image build needs neither npm nor the
# registry; no install scripts run. Then trim-node-modules.sh removes dead weight. node_modules is derived
# from DIR/package.json, DIR/package-lock.json and trim-node-modules.sh (all in the build hash) and reused
# while those three are unchanged (stamp DIR/node_modules/.cubicle-lock).
# MODE ci: `npm ci`. MODE install: `npm install --no-save`, for the sub-agent lockfiles, which hold only
# the platform packages the registry publishes for the pinned versions (npm ci refuses a lockfile that
# lacks any optional dependency); --no-save keeps the lockfile as it is.
install_npm_dir() {
  local rel=$1 what=$2 mode=$3 dir=$HERE/$1 stamp
  command -v npm >/dev/null 2>&1 || die "npm not found: $what is installed with npm before the image build"
  stamp=$(cat "$dir/package.json" "$dir/package-lock.json" "$HERE/trim-node-modules.sh" | sha256sum | cut -c1-16)
  stamp="$mode $stamp"
  if [ -f "$dir/node_modules/.cubicle-lock" ] && [ "$(cat "$dir/node_modules/.cubicle-lock")" = "$stamp" ]; then
    say "$what up to date ($rel/node_modules)"
    return 0
  fi
  say "npm $mode for $what ($rel/package-lock.json)"
  rm -rf "$dir/node_modules"
  case "$mode" in
    ci) (cd "$dir" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error) || die "npm ci failed in $dir" ;;
    install) (cd "$dir" && npm install --no-save --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error) || die "npm install failed in $dir" ;;
    *) die "install_npm_dir: unknown mode $mode" ;;
  esac
  bash "$HERE/trim-node-modules.sh" "$dir/node_modules" || die "trim-node-modules.sh failed in $dir"
  echo "$stamp" >"$dir/node_modules/.cubicle-lock"
}
if [ "$BASE_ONLY" = 0 ]; then
  install_npm_dir browser "the browser CLI" ci
  install_npm_dir office "the office libraries for Node.js" ci
  install_npm_dir sub-agent "the sub-agent CLIs claude and opencode" install
  [ "$TARGET" = slim ] || install_npm_dir sub-agent/codex "the sub-agent CLI codex" install
fi

# --- base image
make_local_base() {
  local have
  have=$(docker image inspect -f '{{ index .Config.Labels "cubicle.base-version" }}' "$LOCAL_BASE" 2>/dev/null || true)
  if [ "$have" = "$LOCAL_BASE_VERSION" ]; then
    say "reusing local base image $LOCAL_BASE"
    return 0
  fi
  [ "$(id -u)" = 0 ] || die "building $LOCAL_BASE with debootstrap needs root (or set BASE_IMAGE)"
  if ! command -v debootstrap >/dev/null 2>&1; then
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap
  fi
  local dir t0
  dir=$(mktemp -d /tmp/cubicle-rootfs.XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$dir'" EXIT
  t0=$(date +%s)
  say "debootstrap --variant=minbase bookworm from $DEBIAN_MIRROR (about a minute)"
  if ! debootstrap --variant=minbase bookworm "$dir" "$DEBIAN_MIRROR" >/tmp/cubicle-debootstrap.log 2>&1; then
    tail -n 20 /tmp/cubicle-debootstrap.log >&2
    die "debootstrap failed (full log: /tmp/cubicle-debootstrap.log)"
  fi
  # Same apt sources as the official image: main, updates and security.
  rm -f "$dir"/etc/apt/sources.list
  cat >"$dir"/etc/apt/sources.list.d/debian.sources <<SOURCES
Types: deb
URIs: $DEBIAN_MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $DEBIAN_SECURITY_MIRROR
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  # Trim what a container never needs, as Debian's slim images do: package
  # caches, apt lists, logs, docs (copyright files stay), man pages, translations.
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/cache/apt/*.bin "$dir"/var/lib/apt/lists/* \
         "$dir"/var/log/* "$dir"/debootstrap "$dir"/usr/share/man/* "$dir"/usr/share/info/*
  find "$dir"/usr/share/doc -mindepth 1 -not -type d -not -name copyright -delete
  find "$dir"/usr/share/doc -mindepth 1 -type d -empty -delete
  find "$dir"/usr/share/locale -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  say "importing rootfs as $LOCAL_BASE"
  tar -C "$dir" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --change "LABEL cubicle.base-version=$LOCAL_BASE_VERSION" \
    --message "debootstrap minbase bookworm ($DEBIAN_MIRROR)" - "$LOCAL_BASE" >/dev/null
  rm -rf "$dir"
  trap - EXIT
  say "base image $LOCAL_BASE ready in $(( $(date +%s) - t0 ))s"
}

if [ "$BASE_ONLY" = 1 ]; then
  make_local_base
  exit 0
fi

if [ -n "${BASE_IMAGE:-}" ]; then
  BASE=$BASE_IMAGE
  docker image inspect "$BASE" >/dev/null 2>&1 || say "BASE_IMAGE=$BASE is not local; docker build will try to pull it"
elif docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
  BASE=debian:bookworm-slim
elif say "trying docker pull debian:bookworm-slim (20 s limit)" &&
     timeout 20 docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
  BASE=debian:bookworm-slim
else
  say "debian:bookworm-slim unavailable; using a local debootstrap base"
  make_local_base
  BASE=$LOCAL_BASE
fi
say "base image: $BASE"

# --- build (BuildKit through buildx when present, else the legacy builder)
args=(build --target "$TARGET" --build-arg "BASE_IMAGE=$BASE" --label "cubicle.build-hash=$HASH" -t "$TAG")
if docker buildx version >/dev/null 2>&1; then
  export DOCKER_BUILDKIT=1
  args+=(--progress=plain)
  say "builder: BuildKit ($(docker buildx version | head -n1))"
else
  export DOCKER_BUILDKIT=0
  say "builder: legacy (docker buildx not installed)"
fi
t0=$(date +%s)
if ! docker "${args[@]}" "$HERE"; then
  die "docker build failed for target $TARGET (see the output above)"
fi
secs=$(( $(date +%s) - t0 ))

size=$(docker image inspect -f '{{ .Size }}' "$TAG")
say "built $TAG (target $TARGET) in ${secs}s"
say "image size: $(( size / 1000000 )) MB ($size bytes)"
