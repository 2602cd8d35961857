"""``memidex mcp``: the typer command that serves the knowledge store to an MCP client
over stdio (:mod:`memidex.mcpserver.server`, docs/mcp.md). Registered on
:data:`memidex.cli.base.app` when :mod:`memidex.cli.commands` loads; the MCP SDK is
imported only when the command runs."""

from __future__ import annotations

from memidex.cli.base import WaitOpt, app, memidex

__all__: list[str] = []


@app.command("mcp")
def mcp_server(wait: WaitOpt = 10.0) -> None:
    """Serve the knowledge store to an MCP client over stdin/stdout (official MCP SDK).

    Tools: brief, search, show, list, runs_ingest, diff, confirm, quarantine, proposals,
    proposals_accept, proposals_reject — each answers the object the matching command
    prints with --json, with input and output schemas and read-only / destructive
    annotations; an error is a tool error, never a stopped server. Records and policies
    are also resources (memidex://record/{id}, memidex://policy/{id}). Writes go through
    the writer lease, or through a running daemon's inbox. Stops when the client closes
    stdin. The protocol is its output: it takes no --json (docs/mcp.md).
    """
    from memidex.mcpserver.server import serve

    with memidex(wait=wait) as m:
        serve(m)
