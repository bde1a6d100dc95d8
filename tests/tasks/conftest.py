"""Fixtures shared by the runner-level tests of apps.tasks."""

from __future__ import annotations

import shutil
import textwrap

import pytest

from apps.tasks.conf import reload_agent_config
from apps.tasks.models import TaskEvent
from tests.support import ROOT
from tests.tasks.factories import make_user, make_workspace


@pytest.fixture
def demo(tmp_path):
    """A copy of the shipped demo workspace, with a member: (user, workspace, root)."""
    root = tmp_path / "demo"
    shutil.copytree(ROOT / "demo" / "workspace", root)
    user = make_user("alice")
    return user, make_workspace("demo", root, user), root


@pytest.fixture
def config_file(settings, tmp_path):
    """Point the app at a temporary agentkit.yaml; restore the shipped one afterwards."""

    def use(text: str):
        path = tmp_path / "agentkit.yaml"
        path.write_text(textwrap.dedent(text))
        settings.AGENTKIT_CONFIG = str(path)
        reload_agent_config()
        return path

    yield use
    settings.AGENTKIT_CONFIG = str(ROOT / "agentkit.yaml")
    reload_agent_config()


def events_of(task) -> list[TaskEvent]:
    return list(TaskEvent.objects.filter(task=task).order_by("seq"))
