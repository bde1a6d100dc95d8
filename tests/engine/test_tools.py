"""apps/engine/tools.py: schema validation with typed error codes, truncation, tool sets."""

from __future__ import annotations

import pytest

from apps.engine.tools import Tool, ToolResult, ToolSet, truncate_output
from tests.engine.helpers import EchoTool, FailingTool


class CountingEcho(EchoTool):
    name = "counting_echo"

    def __init__(self) -> None:
        self.executed = 0

    async def execute(self, text: str, times: int = 1) -> ToolResult:
        self.executed += 1
        return await super().execute(text, times)


async def test_valid_arguments_run_the_tool():
    result = await ToolSet([EchoTool()]).safe_execute("echo", {"text": "hi", "times": 2})
    assert result.ok and result.output == "HI HI"


async def test_wrong_type_is_tool_call_invalid_and_the_tool_does_not_run():
    tool = CountingEcho()
    result = await ToolSet([tool]).safe_execute("counting_echo", {"text": 5})
    assert (result.ok, result.error_code) == (False, "tool_call_invalid")
    assert "text" in result.error and "string" in result.error
    assert tool.executed == 0


async def test_value_out_of_range_is_tool_call_invalid():
    result = await ToolSet([EchoTool()]).safe_execute("echo", {"text": "a", "times": 0})
    assert result.error_code == "tool_call_invalid"


async def test_missing_required_property_is_schema_mismatch_naming_it():
    tool = CountingEcho()
    result = await ToolSet([tool]).safe_execute("counting_echo", {"times": 2})
    assert result.error_code == "schema_mismatch"
    assert "'text' is a required property" in result.error
    assert "required: text" in result.error
    assert tool.executed == 0


async def test_unexpected_property_is_schema_mismatch_even_without_additional_properties_false():
    assert "additionalProperties" not in EchoTool.input_schema
    result = await ToolSet([EchoTool()]).safe_execute("echo", {"text": "a", "colour": "red"})
    assert result.error_code == "schema_mismatch"
    assert "colour" in result.error


async def test_schema_that_allows_extra_properties_is_respected():
    class Open(Tool):
        name = "open"
        description = "takes anything"
        input_schema = {"type": "object", "additionalProperties": True}

        async def execute(self, **kwargs) -> ToolResult:
            return ToolResult.success(",".join(sorted(kwargs)))

    result = await ToolSet([Open()]).safe_execute("open", {"b": 1, "a": 2})
    assert result.ok and result.output == "a,b"


async def test_unknown_tool_lists_the_available_ones():
    result = await ToolSet([EchoTool(), FailingTool()]).safe_execute("ecko", {})
    assert result.error_code == "unknown_tool"
    assert "echo, explode" in result.error


async def test_exception_inside_the_tool_is_tool_execution_error():
    result = await ToolSet([FailingTool()]).safe_execute("explode", {})
    assert result.error_code == "tool_execution_error"
    assert "OSError: disk on fire" in result.error


async def test_arguments_that_were_not_json_are_tool_call_invalid_with_the_reason():
    result = await ToolSet([EchoTool()]).safe_execute(
        "echo", {}, arguments_error="Expecting ',' delimiter at 12"
    )
    assert result.error_code == "tool_call_invalid"
    assert "Expecting ',' delimiter" in result.error


async def test_argument_string_is_parsed_and_bad_json_reported():
    tools = ToolSet([EchoTool()])
    assert (await tools.safe_execute("echo", '{"text": "x"}')).output == "X"
    assert (await tools.safe_execute("echo", '{"text": ')).error_code == "tool_call_invalid"
    assert (await tools.safe_execute("echo", ["x"])).error_code == "tool_call_invalid"


async def test_long_output_keeps_head_and_tail_with_a_note_on_narrowing():
    class Loud(Tool):
        name = "loud"
        description = "prints a lot"
        input_schema = {"type": "object", "properties": {}}

        async def execute(self) -> ToolResult:
            return ToolResult.success("HEAD" + "x" * 50_000 + "TAIL")

    result = await ToolSet([Loud()], max_output_chars=1000).safe_execute("loud", {})
    assert result.output.startswith("HEAD") and result.output.endswith("TAIL")
    assert "characters omitted" in result.output and "grep" in result.output
    assert len(result.output) < 1300
    assert result.data["truncated"] is True


def test_truncate_output_leaves_short_text_alone():
    assert truncate_output("short", 10) == "short"


def test_specs_are_sorted_by_name():
    tools = ToolSet([FailingTool(), EchoTool()])
    assert [spec.name for spec in tools.specs()] == ["echo", "explode"]


def test_subset_keeps_named_tools_and_refuses_unknown_names():
    tools = ToolSet([FailingTool(), EchoTool()], max_output_chars=500)
    small = tools.subset(["echo"], max_output_chars=200)
    assert small.names() == ["echo"] and small.max_output_chars == 200
    assert tools.subset(["echo"]).max_output_chars == 500
    with pytest.raises(ValueError, match="unknown tool name"):
        tools.subset(["echo", "nope"])


def test_invalid_schema_is_refused_when_the_class_is_created():
    with pytest.raises(TypeError, match="invalid input_schema"):

        class Broken(Tool):
            name = "broken"
            description = "bad schema"
            input_schema = {"type": "object", "properties": {"a": {"type": "no-such-type"}}}
