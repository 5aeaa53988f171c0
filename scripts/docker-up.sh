#!/usr/bin/env bash
# Make sure a Docker engine answers on /var/run/docker.sock.
#
# Idempotent: when `docker info` already works it exits 0 at once. Otherwise it
# installs docker.io (only if dockerd is missing), starts dockerd in the
# background (log: /tmp/dockerd.log) and waits up to 60 s for it. If the engine
# does not come up (typically because iptables is unusable inside a container),
# it retries once with --iptables=false --ip-masq=false.
#
# Meant for root on Debian bookworm (developer machines and CI).
set -euo pipefail

LOG=${DOCKERD_LOG:-/tmp/dockerd.log}
SOCK=/var/run/docker.sock
WAIT=${DOCKERD_WAIT_SECONDS:-60}

say() { printf '[docker-up] %s\n' "$*"; }
die() { printf '[docker-up] ERROR: %s\n' "$*" >&2; exit 1; }

engine_ok() { docker info >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1 && engine_ok; then
  say "Docker engine already running"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  die "no Docker engine answers and starting one needs root"
fi

if ! command -v dockerd >/dev/null 2>&1; then
  say "dockerd not found: installing docker.io with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends docker.io
fi
command -v docker >/dev/null 2>&1 || die "docker CLI missing after install"

# A dockerd we started earlier may still be booting: give it a chance first.
if [ -f /var/run/docker.pid ] && kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
  say "dockerd (pid $(cat /var/run/docker.pid)) is running, waiting for it"
  for _ in $(seq 1 "$WAIT"); do
    if engine_ok; then say "Docker engine ready"; exit 0; fi
    sleep 1
  done
  die "dockerd pid $(cat /var/run/docker.pid) does not answer; see $LOG"
fi

# Returns 0 when the engine answers within $WAIT seconds, 1 otherwise
# (and stops the dockerd it started in that case).
start_dockerd() {
  say "starting dockerd${*:+ $*} (log: $LOG)"
  rm -f /var/run/docker.pid
  # setsid: the engine must outlive the shell (and process group) that started it.
  setsid nohup dockerd --host "unix://$SOCK" "$@" >>"$LOG" 2>&1 </dev/null &
  local pid=$!
  for i in $(seq 1 "$WAIT"); do
    if engine_ok; then
      say "Docker engine ready after ${i}s (dockerd pid $pid)"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      say "dockerd exited early; last log lines:"
      tail -n 15 "$LOG" | sed 's/^/    /' >&2
      return 1
    fi
    sleep 1
  done
  say "dockerd did not answer within ${WAIT}s; stopping it"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 15); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -9 "$pid" 2>/dev/null || true
  return 1
}

if start_dockerd; then exit 0; fi
say "retrying without iptables management"
if start_dockerd --iptables=false --ip-masq=false; then exit 0; fi
die "could not start the Docker engine; see $LOG"
