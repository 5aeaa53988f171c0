#!/bin/bash
# Start a local web app in the background and wait until it answers over HTTP.
#
#   start_server.sh PORT -- COMMAND [ARGS...]      e.g. start_server.sh 8000 -- python3 -m http.server 8000
#   start_server.sh --stop PORT                     stop the app started for PORT
#
# The app runs detached (nohup, own session), so it survives the end of this command;
# its output goes to ~/.cache/webapp/PORT.log and its pid to ~/.cache/webapp/PORT.pid.
# Waits up to $WAIT_SECONDS (default 30) for http://127.0.0.1:PORT/ to answer with any
# HTTP status. Prints "ready: http://127.0.0.1:PORT/ (pid N)" and exits 0, or prints the
# end of the log and exits 1 when the app exits or never answers.
set -u
STATE=$HOME/.cache/webapp
WAIT_SECONDS=${WAIT_SECONDS:-30}

die() { printf 'start_server: %s\n' "$1" >&2; exit "${2:-2}"; }
valid_port() { case $1 in '' | *[!0-9]*) return 1 ;; esac; [ "$1" -ge 1 ] && [ "$1" -le 65535 ]; }

stop() {
  local port=$1 pid
  valid_port "$port" || die "not a port: $port"
  pid=$(cat "$STATE/$port.pid" 2>/dev/null) || { echo "no app recorded for port $port"; return 0; }
  case $pid in '' | *[!0-9]*) rm -f "$STATE/$port.pid"; return 0 ;; esac
  # The app was started in its own session: stop the whole process group.
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$pid" 2>/dev/null
  rm -f "$STATE/$port.pid"
  echo "stopped the app on port $port (pid $pid)"
}

if [ "${1:-}" = --stop ]; then stop "${2:-}"; exit $?; fi
PORT=${1:-}
valid_port "$PORT" || die "usage: start_server.sh PORT -- COMMAND [ARGS...]"
[ "${2:-}" = -- ] || die "usage: start_server.sh PORT -- COMMAND [ARGS...]"
shift 2
[ $# -gt 0 ] || die "no command given"
mkdir -p "$STATE" || die "cannot create $STATE"

if curl -s -o /dev/null -m 2 "http://127.0.0.1:$PORT/"; then
  die "something already answers on port $PORT (stop it first: start_server.sh --stop $PORT)" 1
fi

LOG=$STATE/$PORT.log
setsid nohup "$@" >"$LOG" 2>&1 </dev/null &
PID=$!
echo "$PID" >"$STATE/$PORT.pid"

deadline=$((SECONDS + WAIT_SECONDS))
while [ $SECONDS -lt $deadline ]; do
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "start_server: the app exited before answering; last lines of $LOG:" >&2
    tail -n 20 "$LOG" >&2
    rm -f "$STATE/$PORT.pid"
    exit 1
  fi
  if curl -s -o /dev/null -m 2 "http://127.0.0.1:$PORT/"; then
    echo "ready: http://127.0.0.1:$PORT/ (pid $PID, log $LOG)"
    exit 0
  fi
  sleep 0.3
done
echo "start_server: nothing answered on port $PORT within ${WAIT_SECONDS}s; last lines of $LOG:" >&2
tail -n 20 "$LOG" >&2
stop "$PORT" >/dev/null
exit 1
