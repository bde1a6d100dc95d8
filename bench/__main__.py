"""Run every benchmark module in bench/ (or the ones named on the command line)."""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentkit_site.settings")


def discover() -> list[str]:
    here = Path(__file__).resolve().parent
    return sorted(p.stem for p in here.glob("*.py") if not p.stem.startswith("_"))


def main(argv: list[str]) -> int:
    names = argv or discover()
    if not names:
        print("no benchmarks yet (add bench/<name>.py with a main())")
        return 0
    failed = []
    for name in names:
        started = time.monotonic()
        print(f"-- running bench/{name}.py", flush=True)
        try:
            importlib.import_module(f"bench.{name}").main()
        except Exception as exc:  # keep going: one broken benchmark must not hide the others
            failed.append(name)
            print(f"!! bench/{name}.py failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        print(f"-- bench/{name}.py took {time.monotonic() - started:.1f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
