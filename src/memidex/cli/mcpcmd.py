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

    Tools, named after what they touch: brief; knowledge_search, _show, _list, _diff,
    _check, _review, _add, _confirm, _quarantine, _release, _deprecate, _supersede,
    _rollback; runs_ingest, runs_list, runs_show; proposals_list, _show, _accept,
    _reject; doctor; note_add and notes (working memory) — each answers the object the
    matching command prints with --json, with input and output schemas and read-only /
    destructive annotations; an error is a tool error (text, no structured content),
    never a stopped server. Records and policies
    are also resources (memidex://record/{id}, memidex://policy/{id}). Writes go through
    the writer lease, or through a running daemon's inbox. Stops when the client closes
    stdin. The protocol is its output: it takes no --json. Give --root when the client
    starts it outside the repository (`memidex help mcp`: Claude Desktop, Claude Code,
    Cursor, VS Code).
    """
    from memidex.mcpserver.server import serve

    with memidex(wait=wait) as m:
        serve(m)
