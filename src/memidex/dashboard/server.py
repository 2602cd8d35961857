"""Serving the dashboard: the socket bound here (so a port in use is one ``error:`` line,
and ``--port 0`` picks a free one and says which), then uvicorn on it until Ctrl-C or
SIGTERM."""

from __future__ import annotations

import signal
import threading
import webbrowser
from collections.abc import Callable
from typing import TYPE_CHECKING

from memidex.dashboard.security import check_binding
from memidex.listening import bind, is_loopback, url_host

if TYPE_CHECKING:
    from memidex.app import Memidex

__all__ = ["bind", "serve", "url_host"]




def serve(m: Memidex, *, host: str, port: int, token: str | None, open_browser: bool,
          say: Callable[[str], None]) -> None:
    """Serve the dashboard over ``m`` until stopped. ``say`` gets the address (with the
    token once, when there is one) and what the binding means."""
    import uvicorn

    from memidex.dashboard.app import create_app

    check_binding(host, token)
    sock = bind(host, port)
    bound = sock.getsockname()[1]
    hosts = None
    if is_loopback(host) and token is None:
        hosts = frozenset(f"{h}:{bound}" for h in ("127.0.0.1", "localhost", "[::1]",
                                                   url_host(host).lower()))
    app = create_app(m, token=token, hosts=hosts)
    url = f"http://{url_host(host)}:{bound}/"
    if token is not None:
        say(f"memidex dashboard: {url}?token={token}")
        say("  every request needs the token (its cookie, or Authorization: Bearer); "
            "open the address above once in the browser")
    else:
        say(f"memidex dashboard: {url}")
    if not is_loopback(host):
        say(f"  listening on {host}: reachable from other machines, with the token")
    say("  Ctrl-C stops it")
    if open_browser:
        threading.Timer(0.3, webbrowser.open, [url + (f"?token={token}" if token else "")]
                        ).start()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            server_header=False, date_header=False)
    # uvicorn shuts down on SIGTERM, then raises the signal again with the handler it
    # found: a handler of ours makes that a clean exit (atexit runs, exit status 0)
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _stopped)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _stopped(_signum: int, _frame: object) -> None:
    raise SystemExit(0)
