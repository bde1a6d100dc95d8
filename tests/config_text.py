"""agentkit.yaml text (the shipped one) with one setting changed for a test: the spec review
gate off, or the automatic take-over of dead runs pushed out of reach."""

from __future__ import annotations

SPEC_REVIEW_ON = "spec_review:\n  enabled: true"


def without_spec_review(text: str) -> str:
    """agentkit.yaml text (the shipped one) with the spec review gate off: for tests of what a
    plan_exec run does once its spec is confirmed (tests/specs covers the gate itself)."""
    assert SPEC_REVIEW_ON in text, "the config has no 'spec_review: enabled: true' to turn off"
    return text.replace(SPEC_REVIEW_ON, "spec_review:\n  enabled: false")


ORPHAN_AFTER = "  orphan_after_seconds: 20"


def without_takeover(text: str) -> str:
    """agentkit.yaml text with the automatic take-over of dead runs out of a test's reach (an
    hour): for tests of what a person's Resume does with a task whose process died. With the
    shipped 20 s, the server's reaper takes such a task over by itself while a slow machine is
    still logging the browser in (tests/test_cluster_integration.py covers the take-over)."""
    assert ORPHAN_AFTER in text, "the config has no 'orphan_after_seconds: 20' to raise"
    return text.replace(ORPHAN_AFTER, "  orphan_after_seconds: 3600")
