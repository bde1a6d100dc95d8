"""An MCP `CallToolResult` as the ToolResult the model sees: text blocks become the output;
structured content becomes JSON (the output when there is no text, and `data.structured`);
images, audio and resources become a short description with their reference (their bytes never
reach the prompt); `isError` becomes the typed error `mcp_tool_error`. The ToolSet caps the
output like a builtin tool's."""

from __future__ import annotations

import json
from typing import Any

from mcp import types as mcp_types

from apps.engine.tools import ToolResult

STRUCTURED_MAX_CHARS = 20_000  # `data.structured` beyond this is dropped (the output keeps it)


def _size(b64: str) -> str:
    return f"{len(b64) * 3 // 4} bytes"


def describe_block(block: Any) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent):
        return f"[image {block.mime_type}, {_size(block.data)}: not shown to the model]"
    if isinstance(block, mcp_types.AudioContent):
        return f"[audio {block.mime_type}, {_size(block.data)}: not shown to the model]"
    if isinstance(block, mcp_types.ResourceLink):
        kind = f" {block.mime_type}" if block.mime_type else ""
        return f"[resource link{kind}: {block.uri} ({block.name})]"
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        kind = f" {resource.mime_type}" if resource.mime_type else ""
        return f"[resource {resource.uri}{kind}, {_size(resource.blob)}: not shown to the model]"
    return f"[{getattr(block, 'type', type(block).__name__)} content: not shown to the model]"


def to_tool_result(server: str, result: mcp_types.CallToolResult) -> ToolResult:
    parts = [describe_block(block) for block in result.content]
    output = "\n".join(part for part in parts if part)
    data: dict[str, Any] = {"mcp_server": server}
    structured = result.structured_content
    if structured is not None:
        text = json.dumps(structured, sort_keys=True, ensure_ascii=False, default=str)
        if not output.strip():
            output = text
        if len(text) <= STRUCTURED_MAX_CHARS:
            data["structured"] = structured
    if result.is_error:
        message = output.strip() or "the tool reported an error without a message"
        return ToolResult.failure("mcp_tool_error", message, **data)
    return ToolResult.success(output, **data)
