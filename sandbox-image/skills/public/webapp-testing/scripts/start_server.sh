#!/bin/bash
# Start a local web app as a background job and wait until it answers over HTTP.
#
#   start_server.sh PORT -- COMMAND [ARGS...]      e.g. start_server.sh 8000 -- python3 -m http.server 8000
#   start_server.sh --stop PORT                     stop the app started for PORT
#
# The app runs as the job webapp-PORT (the `job` command, /mnt/skills/public/job/SKILL.md), so it
# survives the end of this command; `job logs webapp-PORT` shows its output, `job list` its state.
# Waits up to $WAIT_SECONDS (default 30) for http://127.0.0.1:PORT/ to answer with any HTTP
# status. Prints "ready: http://127.0.0.1:PORT/ (job webapp-PORT, pid N)" and exits 0, or prints
# the end of the log and exits 1 when the app exits or never answers (and stops it).
set -u
WAIT_SECONDS=${WAIT_SECONDS:-30}

die() { printf 'start_server: %s\n' "$1" >&2; exit "${2:-2}"; }
valid_port() { case $1 in '' | *[!0-9]*) return 1 ;; esac; [ "$1" -ge 1 ] && [ "$1" -le 65535 ]; }
command -v job >/dev/null 2>&1 || die "the job command is missing from this sandbox image" 1

if [ "${1:-}" = --stop ]; then
  valid_port "${2:-}" || die "not a port: ${2:-}"
  job stop "webapp-$2"
  exit $?
fi
PORT=${1:-}
valid_port "$PORT" || die "usage: start_server.sh PORT -- COMMAND [ARGS...]"
[ "${2:-}" = -- ] || die "usage: start_server.sh PORT -- COMMAND [ARGS...]"
shift 2
[ $# -gt 0 ] || die "no command given"
case $WAIT_SECONDS in '' | *[!0-9]*) die "WAIT_SECONDS must be a whole number" ;; esac
NAME=webapp-$PORT

if curl -s -o /dev/null -m 2 "http://127.0.0.1:$PORT/"; then
  die "something already answers on port $PORT (stop it first: start_server.sh --stop $PORT, or see job list)" 1
fi

# job start prints the end of the log itself when the command fails at once.
job start --name "$NAME" -- "$@" >/dev/null || exit 1

state() { job list --json "$NAME" | jq -r '.[0].state + " " + ((.[0].pid // "-") | tostring)'; }
deadline=$((SECONDS + WAIT_SECONDS))
while [ $SECONDS -lt $deadline ]; do
  read -r st pid < <(state)
  if [ "$st" != running ]; then
    echo "start_server: the app exited before answering ($st); the end of its log:" >&2
    job logs "$NAME" --tail 20 >&2 2>/dev/null
    exit 1
  fi
  if curl -s -o /dev/null -m 2 "http://127.0.0.1:$PORT/"; then
    echo "ready: http://127.0.0.1:$PORT/ (job $NAME, pid $pid; output: job logs $NAME)"
    exit 0
  fi
  sleep 0.3
done
echo "start_server: nothing answered on port $PORT within ${WAIT_SECONDS}s; the end of its log:" >&2
job logs "$NAME" --tail 20 >&2 2>/dev/null
job stop "$NAME" >/dev/null
exit 1
