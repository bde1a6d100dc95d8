"""Fixtures for the plan tests: `workspace`, a copy of the demo workspace."""

from __future__ import annotations

import shutil

import pytest

from tests.support import ROOT


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "demo"
    shutil.copytree(ROOT / "demo" / "workspace", root)
    return root
