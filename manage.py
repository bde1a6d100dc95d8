#!/usr/bin/env python
"""Django's command-line utility for agentkit."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentkit_site.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except Exception as exc:
        # Run before `make run` migrated: say so instead of `no such table` (unmigrated.py).
        from agentkit_site.unmigrated import unmigrated_hint

        hint = unmigrated_hint(exc)
        if hint is None:
            raise
        sys.stderr.write(hint + "\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
