"""Shared by the test_editor*.py modules: `edit`, which calls str_replace_editor through the
conftest's `call` fixture."""

from __future__ import annotations

EDIT = "str_replace_editor"


async def edit(call, **arguments):
    return await call(EDIT, **arguments)
