#!/usr/bin/env bash
# make bench: every bench/*.py benchmark; each prints a table and writes bench/results/<name>.json.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_venv
REDIS_PID=""
cleanup() { trap - INT TERM EXIT; [ -n "$REDIS_PID" ] && stop_pids "$REDIS_PID"; }
trap 'cleanup; exit 130' INT
trap cleanup EXIT
REDIS_PORT="$(free_port)"
start_redis "$REDIS_PORT" "$VAR/bench-redis-$REDIS_PORT"
export AGENTKIT_TEST_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
"$PY" -m bench "$@"
