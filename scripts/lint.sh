#!/usr/bin/env bash
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_venv
rc=0
"$VENV/bin/ruff" check . || rc=1
"$VENV/bin/ruff" format --check . || rc=1
"$VENV/bin/lint-imports" || rc=1
exit $rc
