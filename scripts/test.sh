#!/usr/bin/env bash
# make test: install, lint, then the test suite: the unit and integration tests in parallel
# processes (pytest-xdist) and, at the same time, the browser tests in a pytest process of their
# own (they mostly wait on pages and servers, so they fill the CPU time the others leave; run
# one after the other, the two took 15 minutes on 2 cores, side by side about 9). Each tier has
# a private Redis on a free port; each pytest run ends with its ten slowest tests. Stops what it
# started, also on failure or Ctrl-C.
# AGENTKIT_TEST_WORKERS=N: N worker processes for the unit and integration tests (default: twice
# the CPU cores, at least 2, at most 16: most of them wait on subprocesses, sockets and timers,
# not on a CPU); AGENTKIT_TEST_E2E_WORKERS=N for the browser tests (default: 1);
# AGENTKIT_TEST_SERIAL=1 runs the browser tests after the others instead (their output live).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

ensure_venv
ensure_chromium
ensure_bubblewrap required
ensure_postgresql

REDIS_PID=""
UNIT_REDIS_PID=""
E2E_REDIS_PID=""
E2E_PID=""
cleanup() {
  trap - INT TERM EXIT
  [ -n "$E2E_PID" ] && kill -TERM -- "-$E2E_PID" 2>/dev/null && wait "$E2E_PID" 2>/dev/null
  stop_pids $UNIT_REDIS_PID $E2E_REDIS_PID
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap cleanup EXIT

REDIS_PORT="$(free_port)"
start_redis "$REDIS_PORT" "$VAR/test-redis-$REDIS_PORT"
UNIT_REDIS_PID="$REDIS_PID"
export AGENTKIT_TEST_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
say "private redis for tests on 127.0.0.1:$REDIS_PORT"

CORES="$(nproc 2>/dev/null || echo 2)"
WORKERS="${AGENTKIT_TEST_WORKERS:-$(( CORES * 2 ))}"
[ "$WORKERS" -ge 2 ] 2>/dev/null || WORKERS=2
[ "$WORKERS" -le 16 ] || WORKERS=16
# The browser tests: one at a time by default (each starts Chromium and a Daphne of its own).
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

E2E=("$PY" -m pytest -q tests/e2e -n "$E2E_WORKERS" "${PARALLEL[@]}")
if [ "${AGENTKIT_TEST_SERIAL:-0}" = 1 ]; then
  step "pytest (unit + integration)" "$PY" -m pytest -q --ignore=tests/e2e -p no:playwright \
    -n "$WORKERS" "${PARALLEL[@]}"
  step "pytest (browser, tests/e2e)" "${E2E[@]}"
else
  # The browser tier in the background, in a process group of its own (Ctrl-C and failures stop
  # it whole), with its own Redis: the channel layer's Pub/Sub channels are server-wide, and
  # both tiers number their tasks from 1.
  E2E_REDIS_PORT="$(free_port)"
  start_redis "$E2E_REDIS_PORT" "$VAR/test-redis-$E2E_REDIS_PORT"
  E2E_REDIS_PID="$REDIS_PID"
  E2E_LOG="$VAR/test-e2e.log"
  say "── pytest (browser, tests/e2e) in the background; its output follows the others' ($E2E_LOG)"
  AGENTKIT_TEST_REDIS_URL="redis://127.0.0.1:$E2E_REDIS_PORT/0" setsid "${E2E[@]}" \
    >"$E2E_LOG" 2>&1 &
  E2E_PID=$!
  step "pytest (unit + integration)" "$PY" -m pytest -q --ignore=tests/e2e -p no:playwright \
    -n "$WORKERS" "${PARALLEL[@]}"
  say "── pytest (browser, tests/e2e): waiting for it to finish"
  wait "$E2E_PID"
  E2E_RC=$?
  E2E_PID=""
  cat "$E2E_LOG"
  [ "$E2E_RC" -eq 5 ] && say "pytest (browser, tests/e2e): collected no tests (exit 5) — counted as a failure"
  [ "$E2E_RC" -eq 0 ] || FAILED+=("pytest (browser, tests/e2e) (exit $E2E_RC)")
fi

if [ "${#FAILED[@]}" -gt 0 ]; then
  printf '\n' >&2
  for f in "${FAILED[@]}"; do say "FAILED: $f"; done
  exit 1
fi
say "all checks passed"
