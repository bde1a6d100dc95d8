import asyncio
import sys
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from apps.engine.config import ConfigError
from apps.tasks.batch import evaluation, report
from apps.tasks.batch.progress import ConsoleProgress
from apps.tasks.batch.records import evaluation_run_record
from apps.tasks.batch.review import REVIEW_POLICIES
from apps.tasks.batch.running import (
    EXECUTORS,
    BatchOptions,
    check_executor,
    run_batch,
    warm_up,
)
from apps.tasks.batch.services import batch_user, batch_workspace
from apps.tasks.batch.spec import SuiteError, load_suite
from apps.tasks.batch.suites import SUITES, run_suite
from apps.tasks.conf import agent_config
from apps.tasks.routing import KNOWN_MODES, RUNNABLE_MODES, max_message_chars
from apps.tasks.services import ApplicationError

INTERRUPTED_EXIT = 130


class Command(BaseCommand):
    help = (
        "Run the tasks of a YAML or JSONL file concurrently, each in a fresh copy of its source, "
        "through the same runner as the chat; print progress and a summary table, optionally "
        "write a JSON report and JUnit XML. Exits 0 when every expected outcome held, 1 when one "
        "did not, 2 when the file or an option is invalid (nothing runs), 130 after Ctrl-C."
    )
    requires_system_checks = []  # configuration problems are reported in one line each

    def add_arguments(self, parser):
        parser.add_argument(
            "file", nargs="?", help="tasks: a .yaml/.yml or .jsonl file (not with --suite)"
        )
        parser.add_argument(
            "--suite",
            choices=SUITES,
            help="a built-in evaluation suite instead of FILE: humaneval (164 problems, scored "
            "by their hidden tests in the sandbox)",
        )
        parser.add_argument("--limit", type=int, help="--suite: the first N problems")
        parser.add_argument(
            "--ids", metavar="ID,...", help="--suite: these problems (HumanEval/0,HumanEval/5)"
        )
        parser.add_argument(
            "--compare",
            metavar="MODE,MODE",
            help="--suite: run every task in each mode (fresh workspaces), one report",
        )
        parser.add_argument(
            "--repeat", type=int, default=1, help="--suite: run everything K times (pass@K)"
        )
        parser.add_argument(
            "--baseline",
            metavar="OLD.json",
            help="--suite: an earlier --report; print the tasks newly solved and newly failed",
        )
        parser.add_argument("--concurrency", type=int, default=4, help="tasks at a time (4)")
        parser.add_argument("--mode", choices=KNOWN_MODES, help="run every task in this mode")
        parser.add_argument("--model", metavar="ALIAS", help="run every task on this model alias")
        parser.add_argument("--report", metavar="OUT.json", help="write the JSON report here")
        parser.add_argument("--junit", metavar="OUT.xml", help="write JUnit XML here")
        parser.add_argument(
            "--executor",
            choices=EXECUTORS,
            help="inline: in this process; rq: on RQ workers (needs REDIS_URL). Default: "
            "executor.kind of agentkit.yaml",
        )
        parser.add_argument(
            "--review",
            choices=REVIEW_POLICIES,
            default="auto",
            help="plan_exec's spec reviews: auto (the batch confirms each spec; default) or wait "
            "(a person confirms in the chat)",
        )
        parser.add_argument(
            "--workspace",
            metavar="NAME",
            help="run every task in this existing workspace (a repository workspace: each task "
            "on its own branch, in parallel) instead of a fresh copy of its source",
        )
        parser.add_argument(
            "--user",
            metavar="NAME",
            help="the tasks' owner; default the bootstrap admin or the only superuser",
        )

    def handle(self, *args, **options):
        try:
            config = agent_config()
        except ConfigError as exc:
            raise CommandError(str(exc), returncode=2) from None
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1", returncode=2)
        if options["mode"] and options["mode"] not in RUNNABLE_MODES:
            raise CommandError(
                f"--mode {options['mode']} is not available in this version; choose one of "
                f"{', '.join(RUNNABLE_MODES)}",
                returncode=2,
            )
        if options["model"] and options["model"] not in config.models:
            raise CommandError(
                f"unknown model alias {options['model']!r}; configured: "
                f"{', '.join(sorted(config.models))}",
                returncode=2,
            )
        executor = options["executor"] or config.executor.kind
        if options["suite"]:
            return self._suite(config, executor, options)
        if not options["file"]:
            raise CommandError(
                "give a tasks FILE, or a built-in suite with --suite humaneval", returncode=2
            )
        for flag in ("limit", "ids", "compare", "baseline"):
            if options[flag] is not None:
                raise CommandError(f"--{flag} goes with --suite", returncode=2)
        try:
            check_executor(executor)
            suite = load_suite(
                Path(options["file"]),
                config=config,
                mode_override=options["mode"],
                model_override=options["model"],
                max_goal_chars=max_message_chars(),
            )
            user = batch_user(username=options["user"])
            workspace = batch_workspace(name=options["workspace"], user=user)
        except SuiteError as exc:
            raise CommandError(exc.render(), returncode=2) from None
        except ApplicationError as exc:
            raise CommandError(exc.message, returncode=2) from None

        batch_options = BatchOptions(
            workspaces_dir=Path(settings.AGENTKIT_WORKSPACES_DIR),
            concurrency=options["concurrency"],
            executor=executor,
            queue=config.executor.queue,
            review=options["review"],
            workspace=workspace,
        )
        self.stdout.write(
            f"{len(suite.tasks)} tasks from {suite.path} · concurrency {batch_options.concurrency}"
            f" · executor {executor} · as {user.get_username()}"
        )
        if executor == "inline":
            warm_up(config)
        progress = ConsoleProgress(self.stdout, len(suite.tasks), live=sys.stdout.isatty())
        try:
            run = asyncio.run(
                run_batch(suite, user=user, config=config, options=batch_options, progress=progress)
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        finally:
            progress.close()
        self.stdout.write("")
        self.stdout.write(report.render_table(run))
        for flag, write in (("report", report.write_json), ("junit", report.write_junit)):
            if options[flag]:
                self.stdout.write(f"{flag}: {write(run, Path(options[flag]))}")
        if run.interrupted:
            self.stderr.write("interrupted: the report covers the tasks that ended")
            sys.exit(INTERRUPTED_EXIT)
        if not report.all_as_expected(run):
            raise CommandError("some tasks did not end as expected (see MISMATCH above)")

    def _suite(self, config, executor: str, options) -> None:
        modes = [m.strip() for m in (options["compare"] or "").split(",") if m.strip()]
        modes = modes or [options["mode"] or config.modes.default]
        unknown = [m for m in modes if m not in RUNNABLE_MODES]
        if unknown or len(set(modes)) != len(modes):
            raise CommandError(
                f"--compare {','.join(modes)}: give distinct modes among "
                f"{', '.join(RUNNABLE_MODES)}",
                returncode=2,
            )
        if options["file"]:
            raise CommandError("give either a tasks FILE or --suite, not both", returncode=2)
        if options["repeat"] < 1 or (options["limit"] is not None and options["limit"] < 1):
            raise CommandError("--repeat and --limit must be at least 1", returncode=2)
        old = None
        try:
            check_executor(executor)
            if options["baseline"]:
                old = evaluation.load_baseline(Path(options["baseline"]))
            user = batch_user(username=options["user"])
        except evaluation.BaselineError as exc:
            raise CommandError(str(exc), returncode=2) from None
        except ApplicationError as exc:
            raise CommandError(exc.message, returncode=2) from None
        ids = [i for i in (options["ids"] or "").split(",") if i.strip()] or None
        batch_options = BatchOptions(
            workspaces_dir=Path(settings.AGENTKIT_WORKSPACES_DIR),
            concurrency=options["concurrency"],
            executor=executor,
            queue=config.executor.queue,
            review=options["review"],
        )
        if executor == "inline":
            warm_up(config)

        def progress_for(suite, mode, number):
            self.stdout.write(
                f"{options['suite']}: {len(suite.tasks)} tasks · mode {mode} · run {number}/"
                f"{options['repeat']} · concurrency {batch_options.concurrency}"
            )
            return ConsoleProgress(self.stdout, len(suite.tasks), live=sys.stdout.isatty())

        with tempfile.TemporaryDirectory(prefix="agentkit-suite-") as sources:
            try:
                ev = asyncio.run(
                    run_suite(
                        options["suite"], modes=modes, repeat=options["repeat"],
                        limit=options["limit"], ids=ids, model=options["model"] or "",
                        user=user, config=config, options=batch_options,
                        progress_for=progress_for, sources=Path(sources),
                    )
                )  # fmt: skip
            except SuiteError as exc:
                raise CommandError(exc.render(), returncode=2) from None
            except ApplicationError as exc:
                raise CommandError(exc.message) from None
        self.stdout.write("")
        self.stdout.write(evaluation.render(ev))
        if old is not None:
            self.stdout.write("")
            self.stdout.write(f"compared with {options['baseline']}:")
            self.stdout.write(evaluation.render_changes(evaluation.baseline_changes(ev, old)))
        if options["report"]:
            self.stdout.write(f"report: {evaluation.write_json(ev, Path(options['report']))}")
        stored = evaluation_run_record(ev=ev, user=user, model=options["model"] or "")
        # A path on the agentkit server this database belongs to (make run: 127.0.0.1:8000).
        self.stdout.write(f"evaluation page: {reverse('evaluation', args=[stored.pk])}")
        if ev.interrupted:
            self.stderr.write("interrupted: the report covers the tasks that ended")
            sys.exit(INTERRUPTED_EXIT)
