"""safe_lanes in a gateway built on the official Python MCP SDK (`mcp`, 2.x).

The SDK's `MCPServer` shows the client only `Error executing tool <name>` for an exception it
does not know, and withholds the text: a `safe_lanes.Refused` raised in a tool would reach the
agent without its code or its message, so the agent cannot tell `outside_allowlist` from a
crash. Wrap each tool with `tool_errors`:

    from mcp.server.mcpserver import MCPServer
    from safe_lanes.mcp import tool_errors

    server = MCPServer("gateway")

    @server.tool()
    @tool_errors
    def gmail_attachment_get(filename: str, content_base64: str) -> dict:
        return desk.save(filename, base64.b64decode(content_base64)).to_dict()

A `safe_lanes.Error` raised by the tool then becomes the tool's error result, as the library's
own MCP server answers it: `is_error` true, the text `"<code>: <message>"`, and the code alone
in `_meta["safe-lanes/code"]`. Anything else is left to the SDK. The SDK is imported only when
a wrapped tool refuses, so `safe_lanes` does not depend on it.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar

from ._errors import Error

__all__ = ["CODE_META_KEY", "tool_error_result", "tool_errors"]

#: Where the error result carries the stable code (as `safe-lanes-mcp` does).
CODE_META_KEY = "safe-lanes/code"

F = TypeVar("F", bound=Callable[..., Any])


def tool_error_result(error: Error) -> Any:
    """The `mcp_types.CallToolResult` a tool returns for `error`: `is_error` true, the text
    `"<code>: <message>"` (what an agent should be shown), and `_meta` naming the code."""
    from mcp_types import CallToolResult, TextContent

    return CallToolResult(
        content=[TextContent(type="text", text=str(error))],
        is_error=True,
        _meta={CODE_META_KEY: error.code},
    )


def tool_errors(fn: F) -> F:
    """Wrap the tool `fn` (a function or a coroutine function) so that a `safe_lanes.Error` it
    raises is returned as `tool_error_result(error)`; its signature, annotations and so the
    SDK's input and output schemas are kept."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except Error as error:
                return tool_error_result(error)

        return wrapped_async  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Error as error:
            return tool_error_result(error)

    return wrapped  # type: ignore[return-value]
