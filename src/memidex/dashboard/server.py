"""Serving the dashboard: the socket bound here (so a port in use is one ``error:`` line,
and ``--port 0`` picks a free one and says which), then uvicorn on it until Ctrl-C or
SIGTERM."""

from __future__ import annotations

import errno
import signal
import socket
import threading
import webbrowser
from collections.abc import Callable
from typing import TYPE_CHECKING

from memidex.dashboard.security import check_binding, is_loopback
from memidex.errors import UsageError

if TYPE_CHECKING:
    from memidex.app import Memidex

__all__ = ["bind", "serve", "url_host"]


def url_host(host: str) -> str:
    return f"[{host.strip('[]')}]" if ":" in host else host


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: a free port), or :class:`UsageError`."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"--host {host}: {exc.strerror}") from None
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        why = {errno.EADDRINUSE: "is in use", errno.EACCES: "needs privileges",
               errno.EADDRNOTAVAIL: "is not an address of this machine"}.get(
            exc.errno or 0, exc.strerror or str(exc))
        raise UsageError(f"cannot listen on {url_host(host)}:{port}: the address {why}",
                         hint="choose another --port (0 picks a free one)") from None
    sock.set_inheritable(True)
    return sock


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
