"""What keeps ``memidex mcp --transport http`` a team's server and not an open door: where
it may listen, who may call it, and how often (docs/mcp.md, "Over HTTP"). No MCP SDK
here: :class:`Guard` is a plain ASGI middleware in front of the SDK's streamable HTTP
app, which :mod:`memidex.mcpserver.server` builds.

* **Binding**: loopback (127.0.0.0/8, ``::1``, ``localhost``) by default; any other host
  only with a bearer token (``--token`` or ``MEMIDEX_MCP_TOKEN``) — else one ``error:``
  line and exit 2 (:func:`check_binding`). A token is at least :data:`MIN_TOKEN`
  characters.
* **The token**, when there is one (or several: one per agent or team), is asked of every
  request as ``Authorization: Bearer T``, compared in constant time; a request without a
  valid one gets ``401`` with ``WWW-Authenticate: Bearer`` and nothing else.
* **Limits**: a token bucket per client — the bearer token it presented, else its remote
  address — refilled at ``rate`` requests a second, holding at most ``2 × rate`` (at
  least 1); a request that finds it empty gets ``429`` with ``Retry-After`` (whole
  seconds) and is not served.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memidex.errors import UsageError
from memidex.listening import ASGIApp, Receive, Scope, Send, bind, is_loopback, url_host

__all__ = ["DEFAULT_RATE", "MIN_TOKEN", "TOKEN_ENV", "Guard", "RateLimiter", "bind",
           "check_binding", "is_loopback", "url_host"]

TOKEN_ENV = "MEMIDEX_MCP_TOKEN"
MIN_TOKEN = 16
"""The shortest token accepted (a server other machines reach is guessed at)."""
DEFAULT_RATE = 20.0
"""Requests a second each client may make (bursts of twice as many)."""
MAX_CLIENTS = 10_000
"""Buckets kept; past this, those already full again (idle clients) are forgotten."""







def check_binding(host: str, tokens: Sequence[str]) -> None:
    """Refuse (:class:`UsageError`, exit 2) a host other machines reach without a token,
    and a token that is empty or too short."""
    for token in tokens:
        if not token.strip() or len(token) < MIN_TOKEN:
            raise UsageError(f"a --token must be at least {MIN_TOKEN} characters",
                             hint="e.g. python3 -c 'import secrets; "
                             "print(secrets.token_urlsafe())'")
    if not tokens and not is_loopback(host):
        raise UsageError(f"--host {host} is reachable from other machines: give --token (or "
                         f"set {TOKEN_ENV}), or serve on 127.0.0.1",
                         hint="every request then needs `Authorization: Bearer TOKEN`")




@dataclass
class RateLimiter:
    """A token bucket per client key: ``rate`` a second, ``burst`` at most."""

    rate: float
    burst: float = 0.0
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # key: (level, at)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if not self.rate > 0:
            raise UsageError(f"--rate must be a positive number of requests a second, got "
                             f"{self.rate:g}")
        if not self.burst:
            self.burst = max(1.0, 2.0 * self.rate)

    def take(self, key: str) -> float:
        """Take one request from ``key``'s bucket: 0.0 when it may go ahead, else the
        seconds until it may."""
        with self._lock:
            now = self.clock()
            level, at = self._buckets.get(key, (self.burst, now))
            level = min(self.burst, level + (now - at) * self.rate)
            if level >= 1.0:
                self._buckets[key] = (level - 1.0, now)
                wait = 0.0
            else:
                self._buckets[key] = (level, now)
                wait = (1.0 - level) / self.rate
            if len(self._buckets) > MAX_CLIENTS:
                self._forget_idle(now)
            return wait

    def _forget_idle(self, now: float) -> None:
        full = [k for k, (level, at) in self._buckets.items()
                if level + (now - at) * self.rate >= self.burst]
        for k in full:
            del self._buckets[k]


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class Guard:
    """The ASGI middleware of the module doc: limits, then the token, then ``app``."""

    def __init__(self, app: ASGIApp, *, tokens: Sequence[str], limiter: RateLimiter) -> None:
        self.app = app
        self.digests = [_digest(t) for t in tokens]
        self.limiter = limiter

    def _bearer(self, scope: Scope) -> int | None:
        """Which token the request presents (its index), None for none that is valid."""
        for name, value in scope.get("headers") or ():
            if name.lower() == b"authorization":
                kind, _, presented = value.decode("latin-1").partition(" ")
                if kind.lower() != "bearer" or not presented.strip():
                    return None
                digest = _digest(presented.strip())
                found = None
                for i, known in enumerate(self.digests):  # every one compared: no timing
                    if hmac.compare_digest(digest, known):
                        found = i
                return found
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        which = self._bearer(scope) if self.digests else None
        client = scope.get("client") or ("unknown", 0)
        key = f"token {which}" if which is not None else f"address {client[0]}"
        wait = self.limiter.take(key)
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            await _answer(send, 429, "too many requests: this client's limit is "
                          f"{self.limiter.rate:g} a second", [(b"retry-after",
                                                                str(seconds).encode())])
            return
        if self.digests and which is None:
            await _answer(send, 401, "a bearer token is required (Authorization: Bearer "
                          "TOKEN)", [(b"www-authenticate", b'Bearer realm="memidex"')])
            return
        await self.app(scope, receive, send)


async def _answer(send: Send, status: int, message: str,
                  headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"error": {"status": status, "message": message}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})
