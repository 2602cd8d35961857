"""``memidex dashboard``: the typer command that serves the local web dashboard
(:mod:`memidex.dashboard`, docs/dashboard.md). Registered on :data:`memidex.cli.base.app`
when :mod:`memidex.cli.commands` loads; starlette, uvicorn and jinja2 are imported only
when the command runs."""


import sys
from typing import Annotated

import typer

from memidex.cli.base import app, memidex
from memidex.cli.warmserve import serving
from memidex.errors import UsageError

__all__: list[str] = []


@app.command("dashboard")
def dashboard(
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="The TCP port (0 "
                                      "picks a free one and prints it).")] = 8421,
    host: Annotated[str, typer.Option("--host", help="The address to listen on. Anything "
                                      "but loopback needs --token.")] = "127.0.0.1",
    token: Annotated[str | None, typer.Option(
        "--token", envvar="MEMIDEX_DASHBOARD_TOKEN", show_envvar=True,
        help="Asked of every request (at least 16 characters); required with a --host "
        "other machines can reach.")] = None,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the dashboard in the "
                                               "default browser.")] = False,
    wait: Annotated[float, typer.Option("--wait", min=0, help="Seconds an action waits "
                                        "for the writer lease before it shows who holds "
                                        "it.")] = 2.0,
) -> None:
    """Serve a local web dashboard over the knowledge store: an overview per product,
    builds and runs (with rollback), flakiness and causes, each record's versions and
    trust over time (confirm, quarantine, release, deprecate), proposals (accept,
    reject), a brief preview (--at) and search.

    Bound to 127.0.0.1 by default; another --host is refused (exit 2) without --token.
    Actions go through the same write route as the CLI (lease, fence, ledger), each form
    behind a CSRF token. Needs the dashboard extra (pip install 'memidex[dashboard]').
    Stops on Ctrl-C. It serves pages, so it takes no --json (docs/dashboard.md). While it
    runs it also answers this repository's CLI reading commands warm (`memidex help
    warm`), unless a daemon already does.
    """
    from memidex.dashboard.security import check_binding

    check_binding(host, token)
    try:
        from memidex.dashboard.server import serve
    except ImportError as exc:
        raise UsageError(f"memidex dashboard needs {exc.name or 'its dependencies'}, which "
                         "is not installed", hint="pip install 'memidex[dashboard]'") from None

    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    with memidex(wait=wait) as m, serving(m.config.root, log=_log, ready=False):
        serve(m, host=host, port=port, token=token, open_browser=open_browser, say=say)


def _log(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
