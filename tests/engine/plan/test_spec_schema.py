"""The spec schema: what a planner's draft must satisfy before anyone reviews or runs it."""

import pytest
from pydantic import ValidationError

from apps.engine.plan.spec import SpecDraft, parse_spec_review_id, spec_review_id


def draft(*phases, **extra):
    return {"goal": "fix the bug", "phases": list(phases), **extra}


def test_layers_respect_dependencies_and_keep_spec_order():
    spec = SpecDraft.model_validate(
        draft(
            {"id": "a", "title": "A"},
            {"id": "b", "title": "B", "depends_on": ["a"]},
            {"id": "c", "title": "C"},
            {"id": "d", "title": "D", "depends_on": ["b", "c"]},
        )
    )
    assert [[p.id for p in layer] for layer in spec.topological_layers()] == [
        ["a", "c"],
        ["b"],
        ["d"],
    ]
    assert spec.dependents_of("a") == ["b", "d"]
    assert spec.dependents_of("d") == []


@pytest.mark.parametrize(
    ("phases", "message"),
    [
        ([{"id": "a", "title": "A"}, {"id": "a", "title": "B"}], "repeated: a"),
        ([{"id": "a", "title": "A", "depends_on": ["zz"]}], "unknown phase(s) zz"),
        ([{"id": "a", "title": "A", "depends_on": ["a"]}], "depends on itself"),
        (
            [
                {"id": "a", "title": "A", "depends_on": ["b"]},
                {"id": "b", "title": "B", "depends_on": ["a"]},
            ],
            "cycle among: a, b",
        ),
        ([{"id": "Bad Id", "title": "A"}], "string_pattern_mismatch"),
        ([], "at least 1"),
    ],
)
def test_invalid_drafts_are_rejected_with_a_reason(phases, message):
    with pytest.raises(ValidationError) as excinfo:
        SpecDraft.model_validate(draft(*phases))
    assert message in str(excinfo.value) or message in repr(excinfo.value.errors())


def test_unknown_fields_are_rejected():
    with pytest.raises(ValidationError):
        SpecDraft.model_validate(draft({"id": "a", "title": "A", "shell": "rm -rf /"}))


def test_review_ids_round_trip_and_reject_anything_else():
    assert spec_review_id(42) == "42:spec_review"
    assert parse_spec_review_id("42:spec_review") == 42
    for bad in (
        "42",
        "0:spec_review",
        "x:spec_review",
        "42:spec_review ",
        None,
        42,
        "-1:spec_review",
    ):
        assert parse_spec_review_id(bad) is None
