#!/usr/bin/env bash
# make run: venv + install, migrate, bootstrap, then Redis, an RQ worker and Daphne on 127.0.0.1.
# Every child is tracked by PID; Ctrl-C (or any exit, also during start-up) stops all of them.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

PORT="${PORT:-8000}"
CHILDREN=()
REDIS_PID=""
# Children inherit this marker, so tests (and you: grep it in /proc/*/environ) can find strays.
export AGENTKIT_RUN_ID="${AGENTKIT_RUN_ID:-run-$$-$(date +%s)}"

cleanup() {
  trap - INT TERM EXIT
  # REDIS_PID as well: start_redis sets it the moment Redis starts, before Redis is up and added
  # to CHILDREN (a Ctrl-C in between must not leave it running).
  # And the last child started ($!): a Ctrl-C right after `daphne &` runs this trap before the
  # next line adds it to CHILDREN (its SIGINT is ignored: a background job of a script).
  local pids=("${CHILDREN[@]}") extra
  for extra in "${REDIS_PID:-}" "${!:-}"; do
    if [ -n "$extra" ] && [[ " ${pids[*]} " != *" $extra "* ]]; then
      pids+=("$extra")
    fi
  done
  if [ "${#pids[@]}" -gt 0 ]; then
    say "stopping ${#pids[@]} process(es): ${pids[*]}"
    stop_pids "${pids[@]}"
  fi
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap 'cleanup; exit 129' HUP
trap 'cleanup' EXIT

case "$PORT" in ''|*[!0-9]*) die "PORT must be a number, got '$PORT'";; esac

ensure_venv
ensure_bubblewrap

if port_in_use "$PORT"; then
  die "port $PORT on 127.0.0.1 is already in use (another 'make run'?). Stop it, or use 'make run PORT=8001'."
fi

"$PY" manage.py check --fail-level ERROR || die "configuration check failed (see the lines above); fix agentkit.yaml or the environment and retry"
"$PY" manage.py migrate --noinput -v 0 || die "database migration failed"
"$PY" manage.py bootstrap || die "bootstrap failed"

RUNDIR="$VAR/run-$PORT"
mkdir -p "$RUNDIR"
if [ -z "${REDIS_URL:-}" ]; then
  REDIS_PORT="$(free_port)"
  start_redis "$REDIS_PORT" "$RUNDIR/redis"
  CHILDREN+=("$REDIS_PID")
  export REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
  say "redis on 127.0.0.1:$REDIS_PORT (pid $REDIS_PID)"
else
  say "using REDIS_URL from the environment"
fi

"$PY" manage.py rqworker agent evolution --worker-class rq.worker.SimpleWorker >"$RUNDIR/worker.log" 2>&1 &
CHILDREN+=("$!")
say "rq worker for queues agent, evolution (pid $!, log var/run-$PORT/worker.log)"

"$VENV/bin/daphne" -b 127.0.0.1 -p "$PORT" agentkit_site.asgi:application &
DAPHNE_PID=$!
CHILDREN+=("$DAPHNE_PID")

for _ in $(seq 1 200); do
  port_in_use "$PORT" && break
  kill -0 "$DAPHNE_PID" 2>/dev/null || die "daphne exited during start-up (see its output above)"
  sleep 0.1
done
say "agentkit is up: http://127.0.0.1:$PORT/  (log in as ${DJANGO_SUPERUSER_USERNAME:-admin}; the password was printed by bootstrap on first start, or set DJANGO_SUPERUSER_PASSWORD; 'python manage.py changepassword ${DJANGO_SUPERUSER_USERNAME:-admin}' resets it)"
say "Ctrl-C stops everything"

# Stay up until Ctrl-C or until any child dies; then stop the others.
while :; do
  wait -n "${CHILDREN[@]}"
  for pid in "${CHILDREN[@]}"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      say "process $pid exited; stopping the rest"
      exit 1
    fi
  done
done
