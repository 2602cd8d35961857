"""``memidex mcp``: the knowledge store as an MCP server over stdio (docs/mcp.md).

:mod:`memidex.mcpserver.tools` describes each tool (input and output schemas,
annotations) and runs it on one long-lived :class:`memidex.app.Memidex` facade, turning
every error into a tool error; it does not import the MCP SDK. :mod:`memidex.mcpserver.server`
wires those tools, and the records and policies as resources, into the SDK's low-level
server — the only module of memidex that imports ``mcp``, and only the ``mcp`` command
imports it, so no other command pays for the SDK.
"""

from __future__ import annotations

__all__: list[str] = []
