"""An MCP gateway for an agent, on the official Python MCP SDK and safe_lanes.

It has the tools of a mail-and-drive gateway: an attachment lands in the download lane, a file
goes to the drive only from an allowlisted folder or as content, the folders the human granted
are listed and more can be asked for, and a command runs confined to the grants. The agent's
arguments may have been written by an attacker; every tool hands them to the library as they
are, and a refusal reaches the agent as a tool error with its code (`safe_lanes.mcp`).

Run it as an MCP server on standard input and output:

    python gateway.py --root ~/.local/state/safe-lanes \\
        --uploader 'gws drive files create --json '"'"'{"name": "{name:json}"}'"'"' --upload {file}'

The human grants folders (`safe-lanes grant add …`, or approves what the agent asked for) and
allows upload folders (`safe-lanes upload roots add …`); nothing here can do either.
"""

from __future__ import annotations

import argparse
import base64
import binascii
from typing import Any, Optional

from mcp.server.mcpserver import MCPServer

import safe_lanes
from safe_lanes.mcp import tool_errors


#: The largest attachment or upload, in bytes, by default.
MAX_BYTES = 50 << 20


def build(root: str, uploader: Optional[str] = None, max_bytes: int = MAX_BYTES) -> MCPServer:
    """The gateway's server over the state root `root`; `uploader` is the drive uploader's
    command-line template (`{file}`, `{name}`, `{name:json}`), without which nothing is
    uploaded; `max_bytes` caps what is saved or uploaded."""
    desk = safe_lanes.AgentDesk(
        safe_lanes.StateRoot.open(root),
        uploader=safe_lanes.Uploader(uploader) if uploader else None,
        max_bytes=max_bytes,
        client="example-gateway",
    )
    server = MCPServer("example-gateway")

    @server.tool()
    @tool_errors
    def gmail_attachment_get(filename: str, content_base64: str) -> dict[str, Any]:
        """Save an e-mail attachment in the download folder; returns where it landed. The
        filename is a hint: the file gets a safe name and never replaces another."""
        # Refused before it is decoded: the desk caps what it saves, not what this decodes.
        if len(content_base64) > (max_bytes + 2) // 3 * 4:
            raise safe_lanes.Refused("too_large", f"content, in bytes, exceeds the cap of {max_bytes}; nothing was kept")
        try:
            data = base64.b64decode(content_base64, validate=True)
        except binascii.Error as e:
            raise safe_lanes.Refused("invalid_argument", f"content_base64: not base64 ({e})") from None
        return desk.save(filename, data).to_dict()

    @server.tool()
    @tool_errors
    def drive_upload(path: str) -> dict[str, Any]:
        """Upload a local file to the drive; only files in folders the user allowed can be
        uploaded."""
        return desk.upload_file(path).to_dict()

    @server.tool()
    @tool_errors
    def drive_upload_content(filename: str, text: str) -> dict[str, Any]:
        """Upload text to the drive as a new file named `filename`."""
        return desk.upload_content(filename, text.encode()).to_dict()

    @server.tool()
    @tool_errors
    def folder_grants_list() -> dict[str, Any]:
        """The folders the user granted, by alias, and the requests waiting for the user."""
        return desk.grants().to_dict()

    @server.tool()
    @tool_errors
    def folder_access_request(alias: str, access: str, reason: str, path: Optional[str] = None) -> dict[str, Any]:
        """Ask the user for a folder (`access`: read_only or read_write). Nothing is granted
        until the user approves it with the command in `approve_with`."""
        return desk.request_access(alias, access, reason, path=path).to_dict()

    @server.tool()
    @tool_errors
    def shell_exec(command: str, cwd: Optional[str] = None, timeout_s: float = 60.0) -> dict[str, Any]:
        """Run a shell command in a sandbox that sees only the granted folders (`cwd`: a
        grant's alias, or alias/sub/folder)."""
        return desk.run(command, cwd=cwd, timeout=timeout_s).to_dict()

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the state root")
    parser.add_argument("--uploader", help="the drive uploader's command-line template")
    parser.add_argument("--max-bytes", type=int, default=MAX_BYTES, help="the largest attachment or upload")
    args = parser.parse_args()
    safe_lanes.harden()
    build(args.root, args.uploader, args.max_bytes).run()


if __name__ == "__main__":
    main()
