"""How long the browser tests wait for what never comes: bounds, not figures under test.

Generous on purpose: `make test` runs this tier beside the unit tier's workers on a 2-core
machine, where a page's scripts, a server's answer or a scripted task can take many times what
they take on an idle one. A test that passes waits only as long as the thing it waits for."""

EXPECT_MS = 20_000  # something the page shows by itself (expect's default, set in conftest.py)
ACTION_MS = 60_000  # a click, a fill, a navigation (Playwright's default, set in conftest.py)
TASK_MS = 180_000  # a task reaches its end (or a state it stops in: parked, awaiting review)
