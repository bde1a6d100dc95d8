from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models


class Workspace(models.Model):
    """A directory on disk the agent works in, and the people allowed to use it."""

    name = models.CharField(max_length=100, unique=True)
    root_dir = models.CharField(
        max_length=1024, help_text="Absolute path of the directory the agent reads and edits."
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, related_name="workspaces", blank=True
    )
    verification_commands = models.JSONField(
        default=list,
        blank=True,
        help_text="Commands run at the final answer for non-Python projects, e.g. "
        '["npm test"]. Python projects default to pytest + ruff.',
    )
    share_evolution = models.BooleanField(
        default=False,
        help_text="Opt in to sharing pitfalls and prompt improvements with other workspaces "
        "that also opted in.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if not Path(self.root_dir).is_absolute():
            raise ValidationError({"root_dir": "Give an absolute path, e.g. /srv/projects/app."})
        if not isinstance(self.verification_commands, list) or not all(
            isinstance(cmd, str) and cmd.strip() for cmd in self.verification_commands
        ):
            raise ValidationError(
                {"verification_commands": 'A JSON list of command strings, e.g. ["npm test"].'}
            )
