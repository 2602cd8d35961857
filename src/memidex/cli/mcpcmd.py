"""``memidex mcp``: the typer command that serves the knowledge store to MCP clients over
stdio, or over streamable HTTP to a team's agents (:mod:`memidex.mcpserver.server`,
docs/mcp.md). Registered on :data:`memidex.cli.base.app` when :mod:`memidex.cli.commands`
loads; the MCP SDK (and uvicorn) are imported only when the command runs."""


import sys
from typing import Annotated

import typer

from memidex.cli.base import WaitOpt, app, memidex
from memidex.cli.warmserve import serving
from memidex.errors import UsageError

__all__: list[str] = []

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8422


@app.command("mcp")
def mcp_server(
    wait: WaitOpt = 10.0,
    transport: Annotated[str, typer.Option(
        "--transport", metavar="stdio|http", help="stdio (one client that starts the "
        "server) or http (streamable HTTP at http://HOST:PORT/mcp, for many clients).")
    ] = "stdio",
    host: Annotated[str, typer.Option(
        "--host", help="http: the address to listen on. Anything but loopback needs "
        "--token.")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(
        "--port", min=0, max=65535, help="http: the TCP port (0 picks a free one and "
        "prints it).")] = DEFAULT_PORT,
    token: Annotated[list[str] | None, typer.Option(
        "--token", envvar="MEMIDEX_MCP_TOKEN", show_envvar=True,
        help="http: a bearer token every request must carry (at least 16 characters); "
        "repeatable, one per agent or team (the variable: separated by spaces). "
        "Required with a --host other machines can reach.")] = None,
    allow_writes: Annotated[bool, typer.Option(
        "--allow-writes", help="http: also serve the write tools, holding the "
        "repository's writer lease for the server's life (refused while another live "
        "writer holds it).")] = False,
    rate: Annotated[float, typer.Option(
        "--rate", min=0.001, help="http: requests a second each client (a token, else an "
        "address) may make, in bursts of twice as many; more get HTTP 429.")] = 20.0,
) -> None:
    """Serve the knowledge store to MCP clients (official MCP SDK): over stdin/stdout by
    default, or with --transport http to a team's agents.

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

    Over HTTP the same tools have the same schemas, but only the read-only ones are
    listed unless --allow-writes; a bearer token is required off loopback; each client
    is limited to --rate requests a second. With a team index configured, reads come
    from it (docs/team-index.md). Stops on SIGTERM or Ctrl-C.

    Either way, while it runs it also answers this repository's CLI reading commands warm
    (`memidex help warm`), unless a daemon already does.
    """
    if transport not in ("stdio", "http"):
        raise UsageError(f"unknown --transport {transport!r}: use stdio or http")
    if transport == "stdio":
        given = [flag for flag, on in (("--host", host != DEFAULT_HOST),
                                       ("--port", port != DEFAULT_PORT),
                                       ("--allow-writes", allow_writes),
                                       ("--rate", rate != 20.0)) if on]
        if given:
            raise UsageError(f"{given[0]} is for --transport http",
                             hint="over stdio the one client that starts the server is "
                             "served every tool")
        from memidex.mcpserver.server import serve

        with memidex(wait=wait) as m, serving(m.config.root, log=_log, ready=False):
            serve(m)  # (its protocol on stdout; what the warm server says on stderr)
        return
    from memidex.mcpserver.http import check_binding

    tokens = [t for t in (token or []) if t]
    check_binding(host, tokens)  # before anything is opened: exit 2 at once
    from memidex.mcpserver.server import serve_http

    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    with memidex(wait=wait) as m, serving(m.config.root, log=_log, ready=False):
        serve_http(m, host=host, port=port, tokens=tokens, rate=rate,
                   allow_writes=allow_writes, say=say)


def _log(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
