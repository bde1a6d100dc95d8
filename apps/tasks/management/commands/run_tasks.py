import asyncio
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.engine.config import ConfigError
from apps.tasks.batch import report
from apps.tasks.batch.progress import ConsoleProgress
from apps.tasks.batch.review import REVIEW_POLICIES
from apps.tasks.batch.running import (
    EXECUTORS,
    BatchOptions,
    check_executor,
    run_batch,
    warm_up,
)
from apps.tasks.batch.services import batch_user
from apps.tasks.batch.spec import SuiteError, load_suite
from apps.tasks.conf import agent_config
from apps.tasks.services import KNOWN_MODES, ApplicationError, max_message_chars

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
        parser.add_argument("file", help="tasks: a .yaml/.yml or .jsonl file")
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
            "--user",
            metavar="NAME",
            help="the tasks' owner; default the bootstrap admin or the only superuser",
        )

    def handle(self, *args, **options):
        try:
            config = agent_config()
        except ConfigError as exc:
            raise CommandError(str(exc), returncode=2) from None
        from apps.tasks.services import RUNNABLE_MODES

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
