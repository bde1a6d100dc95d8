import os

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.tasks.bootstrap import bootstrap_run
from apps.tasks.services import ApplicationError
from apps.tasks.workspaces.workspaces import workspace_reset_demo


class Command(BaseCommand):
    help = (
        "Create the admin user (DJANGO_SUPERUSER_USERNAME, default 'admin'; password from "
        "DJANGO_SUPERUSER_PASSWORD or generated and printed once) and the demo workspace. Idempotent."
        " --reset-demo also copies the shipped demo project over the demo workspace again."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--reset-demo",
            action="store_true",
            help="restore the demo workspace to the shipped demo project (its changes are lost)",
        )

    def handle(self, *args, **options):
        username = os.environ.get("DJANGO_SUPERUSER_USERNAME", "admin").strip() or "admin"
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD") or None
        try:
            result = bootstrap_run(
                username=username,
                password=password,
                demo_source=settings.AGENTKIT_DEMO_SOURCE,
                workspaces_dir=settings.AGENTKIT_WORKSPACES_DIR,
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if result.user_created and result.generated_password:
            self.stdout.write(
                self.style.WARNING(
                    f"Created admin user '{result.username}' with password: "
                    f"{result.generated_password}\n"
                    "  (shown once; set DJANGO_SUPERUSER_PASSWORD to choose one, or run "
                    f"'python manage.py changepassword {result.username}')"
                )
            )
        elif result.user_created:
            self.stdout.write(
                f"Created admin user '{result.username}' (password from environment)."
            )
        elif result.password_updated:
            self.stdout.write(f"Admin user '{result.username}': password set from environment.")
        else:
            self.stdout.write(f"Admin user '{result.username}' exists.")
        verb = "Created" if result.workspace_created else "Found"
        self.stdout.write(f"{verb} workspace '{result.workspace_name}' at {result.workspace_dir}")
        if options["reset_demo"] and not result.workspace_created:
            try:
                workspace_reset_demo(
                    user=None,
                    demo_source=settings.AGENTKIT_DEMO_SOURCE,
                    workspaces_dir=settings.AGENTKIT_WORKSPACES_DIR,
                )
            except ApplicationError as exc:
                raise CommandError(exc.message) from exc
            self.stdout.write(f"Reset workspace 'demo' to {settings.AGENTKIT_DEMO_SOURCE}")
