from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.tasks.services import api_token_create


class Command(BaseCommand):
    help = "Create a bearer token for the JSON API. The token is printed alone on the last line."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="A label to recognise the token in admin.")

    def handle(self, *args, **options):
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(
                f"no user named {options['username']!r} (create one in admin or with createsuperuser)"
            )
        token, key = api_token_create(user=user, name=options["name"])
        self.stdout.write(
            f"Created token {token.prefix}… for {user.username}; it is shown once, store it now:"
        )
        self.stdout.write(key)
