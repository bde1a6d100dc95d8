#!/usr/bin/env bash
# make test: install, start a private Redis on a free port, lint, then the test suite; the browser
# tests run in their own pytest process. Stops what it started, also on failure.
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
step "pytest (unit + integration)" "$PY" -m pytest -q --ignore=tests/e2e -p no:playwright
step "pytest (browser, tests/e2e)" "$PY" -m pytest -q tests/e2e

if [ "${#FAILED[@]}" -gt 0 ]; then
  printf '\n' >&2
  for f in "${FAILED[@]}"; do say "FAILED: $f"; done
  exit 1
fi
say "all checks passed"
