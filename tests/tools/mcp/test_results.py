"""An MCP CallToolResult as the model sees it: images, audio and resources as a short
description with their reference (never their bytes), structured content as JSON."""

from __future__ import annotations

import base64

from mcp import types as t

from apps.tools.mcp.results import to_tool_result

PNG = base64.b64encode(b"\x89PNG" + b"\x00" * 2000).decode()


def test_images_audio_and_resources_become_descriptions_with_their_reference():
    result = t.CallToolResult(
        content=[
            t.TextContent(text="Here is the chart."),
            t.ImageContent(data=PNG, mime_type="image/png"),
            t.AudioContent(data=PNG, mime_type="audio/wav"),
            t.ResourceLink(
                uri="file:///srv/report.pdf", name="report", mime_type="application/pdf"
            ),
            t.EmbeddedResource(
                resource=t.TextResourceContents(uri="file:///srv/notes.txt", text="first line")
            ),
            t.EmbeddedResource(
                resource=t.BlobResourceContents(uri="file:///srv/a.bin", blob=PNG, mime_type="x/y")
            ),
        ]
    )
    converted = to_tool_result("charts", result)
    assert converted.ok and converted.data["mcp_server"] == "charts"
    out = converted.output
    assert out.startswith("Here is the chart.")
    assert "[image image/png, 2004 bytes: not shown to the model]" in out
    assert "[audio audio/wav" in out
    assert "[resource link application/pdf: file:///srv/report.pdf (report)]" in out
    assert "[resource file:///srv/notes.txt]\nfirst line" in out
    assert "[resource file:///srv/a.bin x/y" in out
    assert PNG[:40] not in out


def test_structured_content_is_json_when_there_is_no_text_and_is_kept_in_data():
    result = t.CallToolResult(content=[], structured_content={"b": 2, "a": [1]})
    converted = to_tool_result("s", result)
    assert converted.output == '{"a": [1], "b": 2}'
    assert converted.data["structured"] == {"b": 2, "a": [1]}


def test_is_error_becomes_the_typed_error_the_model_sees():
    result = t.CallToolResult(content=[t.TextContent(text="quota exceeded")], is_error=True)
    converted = to_tool_result("s", result)
    assert not converted.ok and converted.error_code == "mcp_tool_error"
    assert converted.for_model() == "ERROR [mcp_tool_error]: quota exceeded"
