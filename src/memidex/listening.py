"""What memidex's local servers (the dashboard, MCP over HTTP) share: a listening socket
with one clear error for each way binding fails, the loopback test that decides whether a
token is required, and the ASGI callable's types."""

from __future__ import annotations

import errno
import ipaddress
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from memidex.errors import UsageError

__all__ = ["ASGIApp", "Message", "Receive", "Scope", "Send", "bind", "is_loopback",
           "url_host"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
