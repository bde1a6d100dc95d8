"""Shared by the test_read_file*.py modules: `read`, which calls read_file through the
conftest's `call` fixture, and PYTHON, the source of the conftest's `python_file`."""

from __future__ import annotations

import textwrap

PYTHON = textwrap.dedent(
    '''\
    """Module docstring."""

    import functools


    # Shopping cart.
    # Keeps items in memory.
    class Cart:
        """A cart."""

        def __init__(self):
            self.items = []

        # Adds one item.
        @functools.cache
        def add(self, item):
            """Add an item."""
            self.items.append(item)

        class Line:
            def total(self):
                return 0


    def my_func(a, b):
        return a + b


    def add(x):
        return x
    '''
)


async def read(call, **arguments):
    return await call("read_file", **arguments)
