import re
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from apps.tasks.ops.retention import KEPT_WHEN_PRUNED, prune

UNITS = {"d": "days", "h": "hours", "w": "weeks"}


def age(text: str) -> timedelta:
    match = re.fullmatch(r"\s*(\d+)\s*([dhw])\s*", text or "")
    if match is None or int(match.group(1)) == 0:
        raise CommandError(f"--older-than {text!r}: give an age like 90d, 12w or 48h")
    return timedelta(**{UNITS[match.group(2)]: int(match.group(1))})


class Command(BaseCommand):
    help = (
        "Delete the stored events of tasks that finished longer ago than --older-than, except "
        f"their {', '.join(KEPT_WHEN_PRUNED)} events (the task rows stay). --dry-run only counts."
    )

    def add_arguments(self, parser):
        parser.add_argument("--older-than", required=True, help="e.g. 90d (days), 12w, 48h")
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")

    def handle(self, *args, **options):
        older = age(options["older_than"])
        tasks, rows = prune(older, dry_run=options["dry_run"])
        verb = "would delete" if options["dry_run"] else "deleted"
        self.stdout.write(
            f"{verb} {rows} event rows of {tasks} task(s) finished more than "
            f"{options['older_than']} ago"
        )
