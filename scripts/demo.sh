#!/usr/bin/env bash
# make demo: venv + install, migrate, bootstrap, then the offline example suite as a batch run:
# progress, a summary table, and the JSON report in var/demo-report.json. Offline (scripted model).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
ensure_venv
"$PY" manage.py migrate --noinput -v 0 || die "database migration failed"
"$PY" manage.py bootstrap >/dev/null || die "bootstrap failed (run 'python manage.py bootstrap' to see why)"
exec "$PY" manage.py run_tasks examples/suite.yaml --concurrency 4 --report "$VAR/demo-report.json" "$@"
