import asyncio
import json

from django.core.management.base import BaseCommand, CommandError

from apps.engine.config import ConfigError
from apps.engine.sandbox import (
    BACKENDS,
    INSTALL_HINT,
    IsolationReport,
    Sandbox,
    SandboxUnavailable,
    check_isolation,
    probe_backends,
)
from apps.tasks.conf import agent_config


class Command(BaseCommand):
    help = (
        "Show which sandbox backend runs commands (bubblewrap, unshare, Landlock) and prove the "
        "isolation: a loopback connect to a listener outside is blocked, a write outside the "
        "workspace is refused, a write inside works, no secret is in the environment, a timeout "
        "kills the command's children. Exits non-zero when isolation does not hold."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument(
            "--backend", choices=BACKENDS, help="check this backend, not the configured one"
        )
        parser.add_argument(
            "--all", action="store_true", help="check every backend that works here"
        )
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args, **options):
        try:
            config = agent_config().sandbox
        except ConfigError as exc:
            raise CommandError(str(exc)) from None
        as_json = options["json"]
        probes = probe_backends()
        if not as_json:
            self.stdout.write(f"sandbox.mode: {config.mode}")
            for probe in probes:
                mark = self.style.SUCCESS("works") if probe.available else self.style.WARNING("no")
                self.stdout.write(f"  {probe.name:<9} {mark}  {probe.detail}")
        try:
            if options["all"]:
                boxes = [
                    Sandbox.from_config(config, mode="auto", backend=p.name)
                    for p in probes
                    if p.available
                ]
                if not boxes:
                    raise SandboxUnavailable(f"no sandbox backend works here. {INSTALL_HINT}")
            elif options["backend"]:
                boxes = [Sandbox.from_config(config, mode="auto", backend=options["backend"])]
            else:
                boxes = [Sandbox.from_config(config)]
            reports = [asyncio.run(check_isolation(box)) for box in boxes]
        except SandboxUnavailable as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            payload = {
                "mode": config.mode,
                "passed": all(r.passed for r in reports),
                "probes": [p.__dict__ for p in probes],
                "reports": [r.as_dict() for r in reports],
            }
            self.stdout.write(json.dumps(payload, indent=2, sort_keys=True))
        else:
            for report in reports:
                self._print(report)
        failed = [r.backend for r in reports if not r.passed]
        if failed:
            hint = (
                " sandbox.mode is off: commands run unconfined by configuration."
                if config.mode == "off" and not options["backend"] and not options["all"]
                else ""
            )
            raise CommandError(f"isolation does NOT hold for: {', '.join(failed)}.{hint}")

    def _print(self, report: IsolationReport) -> None:
        self.stdout.write(f"\nbackend: {report.description}")
        for check in report.checks:
            mark = self.style.SUCCESS("PASS") if check.passed else self.style.ERROR("FAIL")
            self.stdout.write(f"  {mark}  {check.name}  ({check.detail})")
        if report.passed:
            self.stdout.write(self.style.SUCCESS(f"isolation holds with {report.backend}"))
