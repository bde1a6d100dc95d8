import asyncio
import json

from django.core.management.base import BaseCommand, CommandError

from apps.engine.config import ConfigError
from apps.engine.sandbox import (
    BACKENDS,
    PROPERTIES,
    IsolationReport,
    Sandbox,
    SandboxUnavailable,
    check_isolation,
    probe_backends,
)
from apps.tasks.conf import agent_config


class Command(BaseCommand):
    help = (
        "Show which sandbox backend runs commands (bubblewrap, unshare, Landlock) and prove, "
        "with real commands, each property it holds: no network, no write outside the "
        "workspace, hidden host files (installation secret key and database, other workspaces, "
        "/etc/shadow), no host Unix socket, an unprivileged user, limits (processes, memory — "
        "by a cgroup or RLIMIT_AS, shown —, file size, /tmp size, CPU time), a clean environment, the whole tree killed at the "
        "timeout. Prints a per-backend, per-property table; says precisely what a backend "
        "cannot hold. Exits non-zero when the configured sandbox does not hold sandbox.require "
        "or a backend fails a property it claims."
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
        require = tuple(config.require)
        probes = probe_backends()
        if not as_json:
            self.stdout.write(f"sandbox.mode: {config.mode}")
            self.stdout.write(f"sandbox.require: {', '.join(require) or '(nothing)'}")
            for probe in probes:
                mark = self.style.SUCCESS("works") if probe.available else self.style.WARNING("no")
                self.stdout.write(f"  {probe.name:<9} {mark}  {probe.detail}")
        configured = Sandbox.from_config(config)
        memory_mode, memory_how = configured.memory_limit_mode()
        if not as_json:
            self.stdout.write(
                f"sandbox.limits.memory_mb: {config.limits.memory_mb} MiB per command, "
                f"enforced by {memory_mode}: {memory_how}"
            )
        try:
            if options["all"] or options["backend"]:
                names = (
                    [p.name for p in probes if p.available]
                    if options["all"]
                    else [options["backend"]]
                )
                if not names:
                    configured.ensure_available()
                boxes = [
                    Sandbox.from_config(config, mode="auto", backend=name, require=())
                    for name in names
                ]
            else:
                configured.ensure_available()
                boxes = [configured]
            reports = [asyncio.run(check_isolation(box, require=require)) for box in boxes]
        except SandboxUnavailable as exc:
            raise CommandError(str(exc)) from None
        if options["all"]:
            # Passing means: what would run commands holds sandbox.require, and no backend
            # fails a property it claims.
            chosen = [r for r in reports if r.backend == configured.label]
            failed = [r.backend for r in chosen if not r.passed] if configured.confined else []
            failed += [
                r.backend
                for r in reports
                if any(r.status(n)[0] == "FAILS" for n in PROPERTIES) and r.backend not in failed
            ]
            if config.mode == "off":
                failed.append("none (sandbox.mode: off)")
        else:
            failed = [r.backend for r in reports if not r.passed]
        if as_json:
            payload = {
                "mode": config.mode,
                "require": list(require),
                "chosen": configured.label,
                "memory": {
                    "limit_mb": config.limits.memory_mb,
                    "enforced_by": memory_mode,
                    "detail": memory_how,
                },
                "passed": not failed,
                "probes": [p.__dict__ for p in probes],
                "reports": [r.as_dict() for r in reports],
            }
            self.stdout.write(json.dumps(payload, indent=2, sort_keys=True))
        else:
            self._table(reports)
            for report in reports:
                self._print(report)
        if failed:
            hint = (
                " sandbox.mode is off: commands run unconfined by configuration."
                if config.mode == "off" and not options["backend"]
                else ""
            )
            raise CommandError(f"isolation does NOT hold for: {', '.join(failed)}.{hint}")

    def _table(self, reports: list[IsolationReport]) -> None:
        self.stdout.write(
            "\n" + "property".ljust(20) + "".join(r.backend.ljust(16) for r in reports)
        )
        for name in PROPERTIES:
            cells = []
            for report in reports:
                status = report.status(name)[0]
                need = " *" if name in report.require and status != "holds" else ""
                cells.append((status + need).ljust(16))
            self.stdout.write(name.ljust(20) + "".join(cells))
        self.stdout.write("(* required by sandbox.require but not held)")

    def _print(self, report: IsolationReport) -> None:
        self.stdout.write(f"\nbackend: {report.description}")
        for name in PROPERTIES:
            status, detail = report.status(name)
            style = {"holds": self.style.SUCCESS, "FAILS": self.style.ERROR}.get(
                status, self.style.WARNING
            )
            self.stdout.write(f"  {name:<18} {style(status)}: {detail}")
        for check in report.checks:
            mark = self.style.SUCCESS("PASS") if check.passed else self.style.ERROR("FAIL")
            self.stdout.write(f"  {mark}  {check.name}  ({check.detail})")
        missing = [n for n in report.require if report.status(n)[0] != "holds"]
        if report.passed:
            self.stdout.write(self.style.SUCCESS(f"isolation holds with {report.backend}"))
        elif missing and report.confined:
            self.stdout.write(
                self.style.ERROR(
                    f"{report.backend} cannot hold what sandbox.require asks: {', '.join(missing)}"
                )
            )
