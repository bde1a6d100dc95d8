#!/usr/bin/env bash
# make cluster [WEB=2] [WORKERS=3] [PORT=8000]: the multi-process topology on one machine.
# PostgreSQL (DATABASE_URL, or a private cluster under var/pg made with initdb; as root, run by
# `postgres`, under /var/tmp when a private parent directory keeps it from var/pg), Redis (REDIS_URL,
# or a private one), then the Procfile's processes under honcho: WEB Daphne processes on
# PORT … PORT+WEB-1, WORKERS `rqworker agent` and one `rqworker evolution`, executor rq.
# The shared environment is written to var/cluster.env first. Ctrl-C stops every process.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

PORT="${PORT:-8000}"
WEB="${WEB:-2}"
WORKERS="${WORKERS:-3}"
export AGENTKIT_RUN_ID="${AGENTKIT_RUN_ID:-cluster-$$-$(date +%s)}"
CHILDREN=()
REDIS_PID=""
HONCHO_PID=""
PG_DATA=""
PG_AS=()

cleanup() {
  trap - INT TERM EXIT HUP
  if [ -n "$HONCHO_PID" ] && kill -0 "$HONCHO_PID" 2>/dev/null; then
    # honcho stops its processes (SIGTERM to each one's group, SIGKILL after 5 s): give it time
    kill -TERM "$HONCHO_PID" 2>/dev/null
    for _ in $(seq 1 150); do kill -0 "$HONCHO_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$HONCHO_PID" 2>/dev/null
  fi
  local pids=("${CHILDREN[@]}")
  if [ -n "${REDIS_PID:-}" ] && [[ " ${CHILDREN[*]} " != *" $REDIS_PID "* ]]; then
    pids+=("$REDIS_PID")
  fi
  if [ "${#pids[@]}" -gt 0 ]; then
    say "stopping ${#pids[@]} process(es): ${pids[*]}"
    stop_pids "${pids[@]}"
  fi
  if [ -n "$PG_DATA" ] && [ -f "$PG_DATA/postmaster.pid" ]; then
    say "stopping PostgreSQL ($PG_DATA)"
    "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null 2>&1 ||
      "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate -w stop >/dev/null 2>&1
  fi
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap 'cleanup; exit 129' HUP
trap 'cleanup' EXIT

for pair in "PORT:$PORT" "WEB:$WEB" "WORKERS:$WORKERS"; do
  case "${pair#*:}" in ''|*[!0-9]*) die "${pair%%:*} must be a number, got '${pair#*:}'";; esac
done
[ "$WEB" -ge 1 ] || die "WEB must be at least 1"
[ "$WORKERS" -ge 1 ] || die "WORKERS must be at least 1"

ensure_venv
ensure_bubblewrap
[ -x "$VENV/bin/honcho" ] || die "honcho is missing from .venv: run 'make install' (pyproject.toml lists it)"

for offset in $(seq 0 $((WEB - 1))); do
  if port_in_use $((PORT + offset)); then
    die "port $((PORT + offset)) on 127.0.0.1 is already in use (another 'make run' or 'make cluster'?). Stop it, or use 'make cluster PORT=9000'."
  fi
done

RUNDIR="$VAR/cluster"
mkdir -p "$RUNDIR"

# PostgreSQL: DATABASE_URL from the environment, else a private cluster under var/pg.
if [ -n "${DATABASE_URL:-}" ]; then
  case "$DATABASE_URL" in
    postgres://*|postgresql://*|pgsql://*) say "using DATABASE_URL from the environment";;
    *) die "make cluster needs PostgreSQL (several processes write at once): DATABASE_URL must be postgres://…, got '${DATABASE_URL%%:*}://…'. Unset it to get a private cluster under var/pg.";;
  esac
else
  PG_BIN="$(postgres_bin_dir)" || die "no PostgreSQL server binaries (initdb, pg_ctl) found on PATH or in /usr/lib/postgresql/*/bin. Install them (Debian/Ubuntu: 'sudo apt-get install postgresql'), or set DATABASE_URL=postgres://user:password@host:5432/dbname to use a server you have."
  PG_DIR="${AGENTKIT_PG_DIR:-$VAR/pg}"
  mkdir -p "$PG_DIR/run"
  if [ "$(id -u)" = 0 ]; then  # PostgreSQL refuses to run as root: its files belong to `postgres`
    id postgres >/dev/null 2>&1 || die "running as root and there is no 'postgres' user for the private PostgreSQL; create one (useradd postgres) or set DATABASE_URL"
    chown postgres: "$PG_DIR" "$PG_DIR/run"
    if ! runuser -u postgres -- test -w "$PG_DIR/run" 2>/dev/null; then
      # A clone inside a private directory (/root is 0700): `postgres` cannot reach var/pg. Its
      # data goes where it can, one directory per checkout, kept between runs.
      [ -z "${AGENTKIT_PG_DIR:-}" ] ||
        die "AGENTKIT_PG_DIR=$PG_DIR is not reachable by the 'postgres' user (PostgreSQL refuses to run as root); choose a directory whose parents it may enter, or set DATABASE_URL"
      rmdir "$PG_DIR/run" "$PG_DIR" 2>/dev/null  # only what was just made, if empty
      PG_DIR="/var/tmp/agentkit-pg-$(printf %s "$VAR" | sha1sum | cut -c1-12)"
      say "the 'postgres' user cannot reach $VAR/pg (a parent directory is private): its data goes to $PG_DIR"
      mkdir -p "$PG_DIR/run" && chmod 700 "$PG_DIR" && chown postgres: "$PG_DIR" "$PG_DIR/run"
      runuser -u postgres -- test -w "$PG_DIR/run" 2>/dev/null ||
        die "the 'postgres' user cannot write $PG_DIR either; set AGENTKIT_PG_DIR to a directory it can reach (e.g. under /var/lib/postgresql), or set DATABASE_URL"
    fi
    PG_AS=(runuser -u postgres --)
  fi
  PG_DATA="$PG_DIR/data"
  [ "$(id -u)" = 0 ] && [ -d "$PG_DATA" ] && chown -R postgres: "$PG_DATA"
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    say "creating a private PostgreSQL cluster in $PG_DIR (initdb)"
    "${PG_AS[@]}" "$PG_BIN/initdb" -D "$PG_DATA" -U agentkit --auth=trust -E UTF8 >"$PG_DIR/initdb.log" 2>&1 ||
      die "initdb failed; see $PG_DIR/initdb.log"
  fi
  if [ -f "$PG_DATA/postmaster.pid" ] && "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; then
    PG_DATA=""  # not ours to stop
    die "the private PostgreSQL in $PG_DIR is already running (another 'make cluster' of this checkout?). Stop that one first."
  fi
  PG_PORT="$(free_port)"
  # Every process keeps a connection per thread that touches the database (request threads, the
  # event writer, heartbeats, reapers): 100, PostgreSQL's default, ran out with 2 web processes,
  # 4 workers and 100 sockets (bench/cluster.py).
  PG_MAX_CONNECTIONS="${PG_MAX_CONNECTIONS:-300}"
  "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DIR/postgres.log" -w -t 60 \
    -o "-p $PG_PORT -k $PG_DIR/run -c listen_addresses=127.0.0.1 -c max_connections=$PG_MAX_CONNECTIONS" \
    start >/dev/null ||
    die "PostgreSQL did not start; see $PG_DIR/postgres.log"
  "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U agentkit agentkit 2>/dev/null || true
  export DATABASE_URL="postgres://agentkit@127.0.0.1:$PG_PORT/agentkit"
  say "PostgreSQL on 127.0.0.1:$PG_PORT (data in $PG_DATA, log $PG_DIR/postgres.log)"
fi

if [ -z "${REDIS_URL:-}" ]; then
  REDIS_PORT="$(free_port)"
  REDIS_OWN_SESSION=1 start_redis "$REDIS_PORT" "$RUNDIR/redis"
  CHILDREN+=("$REDIS_PID")
  export REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
  say "redis on 127.0.0.1:$REDIS_PORT (pid $REDIS_PID)"
else
  say "using REDIS_URL from the environment"
fi

# Prometheus: every process writes its metrics' values under here and each web process's
# /metrics adds them up (apps/tasks/ops/metrics.py); emptied at every start.
PROM_DIR="$VAR/prometheus"
rm -rf "$PROM_DIR" && mkdir -p "$PROM_DIR" || die "cannot create $PROM_DIR"

# The environment every process of the cluster shares; `set -a; . var/cluster.env` gives it to a
# manage.py command beside them (run_tasks --executor rq, create_api_token, shell …).
ENV_FILE="$VAR/cluster.env"
{
  echo "# written by 'make cluster' at $(date -u +%Y-%m-%dT%H:%M:%SZ); rewritten at every start"
  echo "DATABASE_URL=$DATABASE_URL"
  echo "REDIS_URL=$REDIS_URL"
  echo "AGENTKIT_CONFIG=${AGENTKIT_CONFIG:-$ROOT/agentkit.yaml}"
  echo "AGENTKIT_EXECUTOR=rq"
  echo "AGENTKIT_WORKSPACES_DIR=${AGENTKIT_WORKSPACES_DIR:-$VAR/workspaces}"
  echo "PROMETHEUS_MULTIPROC_DIR=$PROM_DIR"
} >"$ENV_FILE.tmp" && mv "$ENV_FILE.tmp" "$ENV_FILE"
set -a
# shellcheck disable=SC1090
. "$ENV_FILE"
set +a
say "shared environment written to var/cluster.env"

"$PY" manage.py check --fail-level ERROR || die "configuration check failed (see the lines above)"
"$PY" manage.py migrate --noinput -v 0 || die "database migration failed"
"$PY" manage.py bootstrap || die "bootstrap failed"

LAST=$((PORT + WEB - 1))
say "starting $WEB web process(es) on ports $PORT…$LAST, $WORKERS agent worker(s), 1 evolution worker (Procfile, honcho)"
say "Ctrl-C stops everything"
"$VENV/bin/honcho" start -f "$ROOT/Procfile" -d "$ROOT" -e "$ENV_FILE" -p "$PORT" \
  -c "web=$WEB,agent=$WORKERS,evolution=1" &
HONCHO_PID=$!
wait "$HONCHO_PID"
rc=$?
say "honcho exited ($rc)"
exit "$rc"
