"""The fast argument check (schema_check.py) never accepts what the full validator refuses, and
accepts the valid arguments of the built-in tools, so their calls skip the validator."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from apps.engine.loop.schema_check import compile_check
from apps.engine.tools import Tool, ToolResult, ToolSet
from apps.tools.builtin.advance_phase import AdvancePhaseTool
from apps.tools.builtin.editor.tool import StrReplaceEditorTool
from apps.tools.builtin.read_file import ReadFileTool
from apps.tools.builtin.run_tests import RunTestsTool
from apps.tools.builtin.search import SearchTool
from apps.tools.builtin.shell import ShellTool
from apps.tools.builtin.think import ThinkTool

# Each schema with one valid argument object: mutations of it are near misses of every kind.
EXTRA = {
    "type": "object",
    "properties": {
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
        "size": {"type": ["integer", "null"]},
        "ratio": {"type": "number", "exclusiveMaximum": 1, "minimum": 0},
        "nested": {
            "type": "object",
            "properties": {"flag": {"type": "boolean"}},
            "required": ["flag"],
        },
        "mode": {"type": "string", "enum": ["a", "b"]},
        "anything": {},
    },
    "required": ["mode"],
    "additionalProperties": False,
}
VALID = [
    (AdvancePhaseTool, {"summary": "done"}),
    (StrReplaceEditorTool, {"command": "view", "path": "a.py", "view_range": [1, 5]}),
    (StrReplaceEditorTool, {"command": "insert_at_line", "path": "a", "insert_line": 0}),
    (StrReplaceEditorTool, {"command": "str_replace", "path": "a", "old_str": "x", "new_str": ""}),
    (ReadFileTool, {"path": "a.py", "start_line": 1, "end_line": 9}),
    (ReadFileTool, {"path": "a.py", "symbol": "f"}),
    (RunTestsTool, {"command": "pytest"}),
    (SearchTool, {"pattern": "def ", "glob": "**/*.py", "path": "src", "max_results": 5}),
    (ShellTool, {"command": "ls", "timeout": 2.5}),
    (ThinkTool, {"thought": "plan"}),
    (EXTRA, {"mode": "a", "tags": ["ab"], "size": None, "ratio": 0.5, "nested": {"flag": True}}),
    ({"type": "object", "properties": {}}, {}),
]
SEEDS = [
    (schema if isinstance(schema, dict) else schema.input_schema, valid) for schema, valid in VALID
]
CHECKED = [
    ({**schema, "additionalProperties": schema.get("additionalProperties", False)}, valid)
    for schema, valid in SEEDS
]
DELETE = object()
CANDIDATES = [
    DELETE, None, True, False, 0, 1, 2, -1, 10**6, 0.5, 1.0, math.nan, math.inf, "", "a", "b",
    "view", "x.py", "abcd", [], [1, 2], [1, 2, 3], ["a"], ["abcd"], [True, 1], {},
    {"flag": True}, {"flag": 1}, {"x": 1},
]  # fmt: skip


@st.composite
def near_misses(draw):
    """A schema and a valid object with up to three fields changed, deleted or added."""
    schema, valid = draw(st.sampled_from(CHECKED))
    instance = dict(valid)
    names = [*schema.get("properties", {}), "x"]
    for _ in range(draw(st.integers(0, 3))):
        name, value = draw(st.sampled_from(names)), draw(st.sampled_from(CANDIDATES))
        if value is DELETE:
            instance.pop(name, None)
        else:
            instance[name] = value
    if draw(st.integers(0, 9)) == 0:  # now and then not an object at all
        return schema, draw(st.sampled_from(CANDIDATES[1:]))
    return schema, instance


@settings(max_examples=1500, deadline=None)
@given(case=near_misses())
def test_fast_check_accepts_only_what_the_full_validator_accepts(case):
    schema, instance = case
    check = compile_check(schema)
    assert check is not None
    if check(instance):
        assert Draft202012Validator(schema).is_valid(instance), (schema, instance)


def test_fast_check_accepts_the_valid_calls_of_the_builtin_tools():
    for schema, valid in CHECKED:
        assert Draft202012Validator(schema).is_valid(valid)
        assert compile_check(schema)(valid), (schema, valid)


def test_every_builtin_tool_skips_the_full_validator_for_valid_arguments():
    for tool, valid in VALID:
        if isinstance(tool, type):
            assert tool._valid is not None, tool.name
            assert tool._valid(valid), (tool.name, valid)


def test_schemas_outside_the_understood_keywords_have_no_fast_check():
    for schema in (
        {"type": "object", "properties": {"p": {"type": "string", "pattern": "^a"}}},
        {"type": "object", "properties": {"p": {"$ref": "#/$defs/x"}}},
        {"type": "object", "properties": {"p": {"anyOf": [{"type": "string"}]}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "properties": {"p": {"minLength": 2}}},  # a constraint without type
        {"type": "object", "properties": {"p": {"enum": [1, True]}}},
        {"type": "object", "properties": {"p": {"type": "string", "format": "email"}}},
    ):
        assert compile_check(schema) is None, schema


def test_integral_floats_and_nan_bounds_go_to_the_full_validator():
    check = compile_check({"type": "object", "properties": {"n": {"type": "integer"}}})
    assert not check({"n": 1.0})  # not proven here; jsonschema accepts it
    bounded = compile_check({"type": "number", "minimum": 0})
    assert not bounded(math.nan) and bounded(0) and not bounded(-1) and not bounded(True)


class _Pattern(Tool):
    name = "pattern_tool"
    description = "A tool whose schema the fast check does not understand."
    input_schema = {
        "type": "object",
        "properties": {"word": {"type": "string", "pattern": "^[a-z]+$"}},
    }

    async def execute(self, word: str = "") -> ToolResult:
        return ToolResult.success(word)


async def test_a_tool_without_fast_check_is_still_validated_in_full():
    assert _Pattern._valid is None
    tools = ToolSet([_Pattern()])
    refused = await tools.safe_execute("pattern_tool", {"word": "Nope1"})
    assert not refused.ok and refused.error_code == "tool_call_invalid"
    assert "does not match" in refused.error
    assert (await tools.safe_execute("pattern_tool", {"word": "yes"})).output == "yes"


class _Note(Tool):
    name = "note"
    description = "Takes one required string."
    input_schema = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    async def execute(self, text: str) -> ToolResult:
        return ToolResult.success(text)


async def test_invalid_arguments_get_the_full_validators_message():
    tools = ToolSet([_Note()])
    assert _Note._valid is not None
    missing = await tools.safe_execute("note", {})
    assert missing.error_code == "schema_mismatch"
    assert "'text' is a required property" in missing.error
    extra = await tools.safe_execute("note", {"text": "a", "more": 1})
    assert extra.error_code == "schema_mismatch" and "'more' was unexpected" in extra.error
    wrong = await tools.safe_execute("note", {"text": 3})
    assert wrong.error_code == "tool_call_invalid" and "is not of type 'string'" in wrong.error
    assert (await tools.safe_execute("note", {"text": "ok"})).output == "ok"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=1500, deadline=None)
@given(schema_and_valid=st.sampled_from(CHECKED), value=JSON)
def test_an_object_schemas_one_function_check_refuses_what_the_validator_refuses(
    schema_and_valid, value
):
    """A schema of type "object" with only object keywords compiles to one function, its type
    test inside (schema_check._object_check, strict): on any JSON value (not an object, or an
    object of any keys and values) it says yes only where the full validator does."""
    schema, _ = schema_and_valid
    if compile_check(schema)(value):
        assert Draft202012Validator(schema).is_valid(value), (schema, value)
