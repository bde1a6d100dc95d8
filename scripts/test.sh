#!/usr/bin/env bash
# make test: install, start a private Redis on a free port, lint, then the test suite in parallel
# processes (pytest-xdist); the browser tests run in their own pytest process. Each pytest run
# ends with its ten slowest tests. Stops what it started, also on failure.
# AGENTKIT_TEST_WORKERS=N: N worker processes for the unit and integration tests (default: twice
# the CPU cores, at least 2, at most 16: most of them wait on subprocesses, sockets and timers,
# not on a CPU); AGENTKIT_TEST_E2E_WORKERS=N for the browser tests (default: 1).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

ensure_venv
ensure_chromium
ensure_bubblewrap required
ensure_postgresql

REDIS_PID=""
cleanup() { trap - INT TERM EXIT; [ -n "$REDIS_PID" ] && stop_pids "$REDIS_PID"; }
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap cleanup EXIT

REDIS_PORT="$(free_port)"
start_redis "$REDIS_PORT" "$VAR/test-redis-$REDIS_PORT"
export AGENTKIT_TEST_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
say "private redis for tests on 127.0.0.1:$REDIS_PORT"

CORES="$(nproc 2>/dev/null || echo 2)"
WORKERS="${AGENTKIT_TEST_WORKERS:-$(( CORES * 2 ))}"
[ "$WORKERS" -ge 2 ] 2>/dev/null || WORKERS=2
[ "$WORKERS" -le 16 ] || WORKERS=16
# The browser tests keep the CPUs busy themselves (Chromium, Daphne): one at a time. Two at once
# on 2 cores saved about 3 minutes but made timing-bound page checks flaky (four of 48 failed
# once), so that stays opt-in until those checks are made robust (issue 42).
E2E_WORKERS="${AGENTKIT_TEST_E2E_WORKERS:-1}"
[ "$E2E_WORKERS" -ge 1 ] 2>/dev/null || E2E_WORKERS=1
# --dist loadfile: a module's tests stay on one worker, in order (module-scoped servers and
# databases are made once); tests/conftest.py puts modules with `slow` tests first.
PARALLEL=(--dist loadfile --durations=10)
say "pytest: $WORKERS worker processes, $E2E_WORKERS for the browser tests ($CORES CPU cores)"

FAILED=()
step() {
  local name="$1"; shift
  say "── $name"
  "$@"
  local rc=$?
  if [ "$rc" -eq 5 ]; then
    say "$name: pytest collected no tests (exit 5) — counted as a failure"
  fi
  [ "$rc" -eq 0 ] || FAILED+=("$name (exit $rc)")
}

step "ruff check" "$VENV/bin/ruff" check .
step "ruff format --check" "$VENV/bin/ruff" format --check .
step "lint-imports" "$VENV/bin/lint-imports"
step "pytest (unit + integration)" "$PY" -m pytest -q --ignore=tests/e2e -p no:playwright \
  -n "$WORKERS" "${PARALLEL[@]}"
step "pytest (browser, tests/e2e)" "$PY" -m pytest -q tests/e2e -n "$E2E_WORKERS" "${PARALLEL[@]}"

if [ "${#FAILED[@]}" -gt 0 ]; then
  printf '\n' >&2
  for f in "${FAILED[@]}"; do say "FAILED: $f"; done
  exit 1
fi
say "all checks passed"
