#!/usr/bin/env bash
# Build the sandbox image each chat runs in.
#
#   sandbox-image/build.sh [--target slim|full] [--tag NAME]
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
case "$TARGET" in slim|full) ;; *) die "--target must be slim or full, got '$TARGET'" ;; esac
[ -n "$TAG" ] || die "empty tag"

command -v docker >/dev/null 2>&1 || die "docker CLI not found (run scripts/docker-up.sh)"
docker info >/dev/null 2>&1 || die "no Docker engine answers (run scripts/docker-up.sh)"

# --- content hash: every build input (not this script or the README) + target
build_hash() {
  (
    cd "$HERE"
    find . -name node_modules -prune -o -type f ! -name README.md ! -name build.sh -print | LC_ALL=C sort | while IFS= read -r f; do
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

# --- the browser CLI: npm ci on this host from the lockfile (derived, so not part of the hash)
install_browser_cli() {
  command -v npm >/dev/null 2>&1 || die "npm not found: the browser CLI is installed with npm ci before the image build"
  local dir=$HERE/browser stamp
  stamp=$(sha256sum <"$dir/package-lock.json" | cut -c1-16)
  if [ -f "$dir/node_modules/.cubicle-lock" ] && [ "$(cat "$dir/node_modules/.cubicle-lock")" = "$stamp" ]; then
    say "browser CLI up to date (browser/node_modules)"
    return 0
  fi
  say "npm ci for the browser CLI (browser/package-lock.json)"
  rm -rf "$dir/node_modules"
  (cd "$dir" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error) || die "npm ci failed in $dir"
  echo "$stamp" >"$dir/node_modules/.cubicle-lock"
}
[ "$BASE_ONLY" = 1 ] || install_browser_cli

# >>> sub-agent CLIs (issue #12) >>>
# claude, codex and opencode from sub-agent/package-lock.json, installed on this host (whose npm has
# the registry's TLS setup) into sub-agent/node_modules, which the Dockerfile copies. Derived from the
# lockfile, so not part of the build hash. `npm install --no-save` instead of `npm ci`: the lockfile
# holds only the platform packages the registry publishes for the pinned versions, and npm ci refuses
# a lockfile that lacks any optional dependency; --no-save keeps the lockfile as it is.
install_sub_agent_clis() {
  command -v npm >/dev/null 2>&1 || die "npm not found: the sub-agent CLIs are installed with npm before the image build"
  local dir=$HERE/sub-agent stamp
  stamp=$(cat "$dir/package.json" "$dir/package-lock.json" | sha256sum | cut -c1-16)
  if [ -f "$dir/node_modules/.cubicle-lock" ] && [ "$(cat "$dir/node_modules/.cubicle-lock")" = "$stamp" ]; then
    say "sub-agent CLIs up to date (sub-agent/node_modules)"
    return 0
  fi
  say "npm install for the sub-agent CLIs (sub-agent/package-lock.json, about 1 GB)"
  rm -rf "$dir/node_modules"
  (cd "$dir" && npm install --no-save --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error) || die "npm install failed in $dir"
  echo "$stamp" >"$dir/node_modules/.cubicle-lock"
}
install_sub_agent_clis
# <<< sub-agent CLIs <<<
# --- office libraries for Node.js (issue #16): pptxgenjs, npm ci on this host like the browser CLI
install_office_node() {
  local dir=$HERE/office stamp
  stamp=$(sha256sum <"$dir/package-lock.json" | cut -c1-16)
  if [ -f "$dir/node_modules/.cubicle-lock" ] && [ "$(cat "$dir/node_modules/.cubicle-lock")" = "$stamp" ]; then
    say "office node modules up to date (office/node_modules)"
    return 0
  fi
  say "npm ci for the office libraries (office/package-lock.json)"
  rm -rf "$dir/node_modules"
  (cd "$dir" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error) || die "npm ci failed in $dir"
  echo "$stamp" >"$dir/node_modules/.cubicle-lock"
}
install_office_node
# --- end office libraries

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
