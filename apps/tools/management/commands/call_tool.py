"""`python manage.py call_tool NAME --workspace DIR|NAME --args JSON`: run one builtin tool, print its
ToolResult as JSON ({"ok", "output", "error", "error_code", "data"}). The exit status is 0 even
when the tool reports an error: the error is the result. Bad input (JSON, tool name, directory)
is a CommandError. --workspace names a workspace (its root directory is used) before a
directory: a name that matches no workspace is read as a directory."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.engine.tools import ToolSet
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.registry import available_tool_names, build_tools


class Command(BaseCommand):
    help = "Run one builtin tool in a workspace directory and print its result as JSON."
    requires_system_checks: list[str] = []  # a tool call needs no database or app checks

    def add_arguments(self, parser):
        parser.add_argument("name", help="tool name, e.g. read_file")
        parser.add_argument(
            "--workspace", required=True, help="workspace name, or a workspace directory"
        )
        parser.add_argument(
            "--args",
            dest="tool_arguments",
            default="{}",
            help='tool arguments as a JSON object, e.g. \'{"path": "a.py"}\'',
        )

    def handle(self, *args, **options):
        name = options["name"]
        known = available_tool_names()
        if name not in known:
            raise CommandError(f"unknown tool {name!r}; available: {', '.join(known)}")
        workspace = _workspace_dir(options["workspace"])
        if not workspace.is_dir():
            raise CommandError(
                f"--workspace {workspace} is not a directory, nor the name of a workspace; give "
                "an existing directory or a workspace name (admin lists them)"
            )
        try:
            arguments = json.loads(options["tool_arguments"])
        except json.JSONDecodeError as exc:
            raise CommandError(
                f"--args is not valid JSON ({exc.msg} at position {exc.pos}); pass one JSON "
                f'object, e.g. \'{{"path": "README.md"}}\''
            ) from None
        if not isinstance(arguments, dict):
            raise CommandError(f"--args must be a JSON object, got {type(arguments).__name__}")
        tools = ToolSet(build_tools(ToolContext(root=workspace), [name]))
        result = asyncio.run(tools.safe_execute(name, arguments))
        self.stdout.write(json.dumps(result.as_dict(), sort_keys=True))


def _workspace_dir(value: str) -> Path:
    """A workspace by name first (when the database is reachable), else the path as given."""
    from django.db import DatabaseError

    from apps.tasks.models import Workspace

    try:
        workspace = Workspace.objects.filter(name=value).first()
    except DatabaseError:  # no database yet (not migrated): the value can only be a directory
        workspace = None
    return Path(workspace.root_dir) if workspace is not None else Path(value)
