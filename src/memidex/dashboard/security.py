"""What keeps the dashboard a local tool: where it may listen, who may use it, which
requests may write, and the headers every answer carries.

* **Binding**: loopback (127.0.0.0/8, ``::1``, ``localhost``) by default; any other host
  only with a token (``--token`` or ``MEMIDEX_DASHBOARD_TOKEN``) — else one ``error:``
  line and exit 2 (:func:`check_binding`).
* **The token**, when there is one, is asked of every request, static files included:
  ``Authorization: Bearer T``, or the cookie that opening ``/?token=T`` once sets
  (HttpOnly, SameSite=Strict, holding a digest of the token, never the token; the token
  is then dropped from the address bar). Compared in constant time.
* **Host header**: served on loopback without a token, only ``Host: 127.0.0.1:PORT``,
  ``localhost:PORT`` or ``[::1]:PORT`` is answered — a page on another site that points a
  DNS name at 127.0.0.1 (DNS rebinding) gets a 421, never a page.
* **Writes** are POST forms carrying a CSRF token issued with each page (an HMAC of the
  time it was issued, under a key made when the server starts, valid for 12 hours); a
  POST without a valid one, or from another origin (``Origin``, ``Sec-Fetch-Site``), is a
  403 and nothing is written.
* **Headers**: a Content-Security-Policy allowing scripts, styles and images from the
  dashboard itself only (no inline script, no inline style, no frames, forms only to
  itself), ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin`` (with
  ``no-referrer`` a browser sends ``Origin: null`` with every form), ``X-Frame-Options:
  DENY``, ``Cache-Control: no-store`` on pages.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, quote, urlencode

from memidex.errors import UsageError
from memidex.listening import ASGIApp, Message, Receive, Scope, Send, is_loopback

__all__ = ["CSP", "COOKIE", "TOKEN_ENV", "Csrf", "Guard", "check_binding", "is_loopback"]

TOKEN_ENV = "MEMIDEX_DASHBOARD_TOKEN"
COOKIE = "memidex_dashboard"
MIN_TOKEN = 16
"""The shortest token accepted for a dashboard reachable from other machines."""
CSRF_TTL = 12 * 3600

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)





def check_binding(host: str, token: str | None) -> None:
    """Refuse (:class:`UsageError`, exit 2) a non-loopback host without a token, and a
    token too short to guess-proof a dashboard other machines can reach."""
    if token is not None and not token.strip():
        raise UsageError("--token is empty", hint=f"give a token of at least {MIN_TOKEN} "
                         "characters, or leave --token out on 127.0.0.1")
    if is_loopback(host):
        return
    if token is None:
        raise UsageError(f"--host {host} is reachable from other machines: give --token "
                         f"(or set {TOKEN_ENV}), or serve on 127.0.0.1",
                         hint="every request then needs the token: open the address the "
                         "dashboard prints, which carries it once")
    if len(token) < MIN_TOKEN:
        raise UsageError(f"--token must be at least {MIN_TOKEN} characters on --host {host}",
                         hint="e.g. python3 -c 'import secrets; print(secrets.token_urlsafe())'")


class Csrf:
    """CSRF tokens: issued with every page, checked on every POST."""

    def __init__(self, key: bytes | None = None, *, clock: Callable[[], float] = time.time
                 ) -> None:
        self.key = key or secrets.token_bytes(32)
        self.clock = clock

    def _sig(self, issued: str) -> str:
        return hmac.new(self.key, f"csrf:{issued}".encode(), hashlib.sha256).hexdigest()[:32]

    def issue(self) -> str:
        issued = str(int(self.clock()))
        return f"{issued}.{self._sig(issued)}"

    def sign(self, text: str) -> str:
        """A signature of ``text`` (what a write did, shown on the page it redirects to)."""
        return hmac.new(self.key, f"done:{text}".encode(), hashlib.sha256).hexdigest()[:32]

    def signed(self, text: str, sig: str | None) -> bool:
        return sig is not None and hmac.compare_digest(sig, self.sign(text))

    def valid(self, token: str | None) -> bool:
        if not token or token.count(".") != 1:
            return False
        issued, sig = token.split(".")
        if not issued.isdigit() or not hmac.compare_digest(sig, self._sig(issued)):
            return False
        age = self.clock() - int(issued)
        return -60 <= age <= CSRF_TTL


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


class Guard:
    """The ASGI middleware in front of every route: Host check, token, headers."""

    def __init__(self, app: ASGIApp, *, token: str | None, hosts: frozenset[str] | None
                 ) -> None:
        self.app = app
        self.token = token
        self.hosts = hosts  # None: any Host header (served with a token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.hosts is not None and (_header(scope, b"host") or "").lower() not in self.hosts:
            await _plain(send, 421, "this dashboard answers only on the address it printed "
                         "(127.0.0.1); the Host header names another site\n")
            return
        if self.token is not None and not self._authorised(scope):
            query = dict(parse_qsl(bytes(scope.get("query_string", b"")).decode("latin-1")))
            given = query.pop("token", None)
            if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
                rest = urlencode(query)
                location = quote(scope.get("path", "/")) + (f"?{rest}" if rest else "")
                await _redirect_with_cookie(send, location, _cookie_value(self.token))
                return
            await _plain(send, 401, "this dashboard needs its token: open the address "
                         "`memidex dashboard` printed (it carries ?token=… once), or send "
                         "Authorization: Bearer <token>\n")
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                headers.extend(HEADERS)
                if not any(k.lower() == b"cache-control" for k, _ in headers):
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)

    def _authorised(self, scope: Scope) -> bool:
        assert self.token is not None
        want = self.token.encode()
        auth = _header(scope, b"authorization")
        if auth and auth.startswith("Bearer ") and hmac.compare_digest(
                auth[7:].strip().encode(), want):
            return True
        raw = _header(scope, b"cookie")
        if raw:
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(raw)
            except Exception:  # a malformed Cookie header: not authorised, never a 500
                return False
            morsel = jar.get(COOKIE)
            if morsel is not None and hmac.compare_digest(
                    morsel.value.encode(), _cookie_value(self.token).encode()):
                return True
        return False


def _cookie_value(token: str) -> str:
    """What the cookie holds: a digest of the token (hex, so any token fits a cookie)."""
    return hashlib.sha256(b"memidex-dashboard-cookie:" + token.encode()).hexdigest()


async def _plain(send: Send, status: int, text: str) -> None:
    body = text.encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *HEADERS,
                            (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": body})


async def _redirect_with_cookie(send: Send, location: str, value: str) -> None:
    cookie = f"{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict"
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", location.encode("latin-1", "replace")),
                            (b"set-cookie", cookie.encode("latin-1", "replace")),
                            (b"content-length", b"0"), *HEADERS,
                            (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": b""})
