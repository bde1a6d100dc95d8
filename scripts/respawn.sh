#!/usr/bin/env bash
# respawn.sh CMD ARGS...: run CMD; when it dies (killed, crashed, out of memory) start it again
# after RESPAWN_DELAY seconds (default 1), as systemd's Restart=always does. SIGTERM, SIGINT or
# SIGHUP stop CMD (SIGTERM, then SIGKILL after 10 s) and then this loop.
set -u
CHILD=""
STOPPING=0
stop() {
  STOPPING=1
  if [ -n "$CHILD" ] && kill -0 "$CHILD" 2>/dev/null; then
    kill -TERM "$CHILD" 2>/dev/null
    for _ in $(seq 1 100); do
      kill -0 "$CHILD" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$CHILD" 2>/dev/null
  fi
  exit 0
}
trap stop TERM INT HUP
while :; do
  "$@" &
  CHILD=$!
  wait "$CHILD"
  rc=$?
  [ "$STOPPING" = 1 ] && exit 0
  echo "[respawn] '$*' (pid $CHILD) exited with status $rc; starting it again" >&2
  sleep "${RESPAWN_DELAY:-1}" &
  wait $!
done
