"""The dashboard's ASGI application: Starlette routes over :mod:`memidex.dashboard.pages`,
Jinja2 templates (autoescaped), the shipped static files, and the one place that turns a
:class:`MemidexError` into an HTTP status and an error page.

One :class:`memidex.app.Memidex` serves every request, one request at a time (a lock:
the facade keeps one index connection, and a page takes milliseconds); its index is
re-checked against the files at most once a second (:attr:`Reading.recheck_seconds`)
and after every write. A write waits for the writer lease at most the facade's ``wait``
(2 s by default), then shows who holds it — never a hang.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlencode

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from memidex._version import __version__
from memidex.dashboard.pages import ROUTES, Page, Redirect, Req
from memidex.dashboard.security import Csrf, Guard
from memidex.errors import (
    ConflictError,
    IndexUnavailableError,
    InvalidInputError,
    LeaseError,
    MemidexError,
    NotFoundError,
    StorageError,
    UsageError,
    from_os_error,
)

if TYPE_CHECKING:
    from memidex.app import Memidex

__all__ = ["STATUS", "Site", "create_app", "http_status"]

HERE = Path(str(resources.files("memidex.dashboard")))
MAX_FORM = 64 * 1024

STATUS: tuple[tuple[type[MemidexError], int], ...] = (
    (NotFoundError, 404),
    (UsageError, 400),
    (LeaseError, 409),  # held by another writer, or fenced: say who, never hang
    (ConflictError, 409),
    (IndexUnavailableError, 503),
    (StorageError, 507),
    (InvalidInputError, 422),
    (MemidexError, 500),
)
"""Each error of the one tree and its HTTP status (first match wins)."""


def http_status(exc: MemidexError) -> int:
    return next(code for cls, code in STATUS if isinstance(exc, cls))


class Site:
    """What every page shares: the facade (behind a lock), the templates, the CSRF key."""

    def __init__(self, m: Memidex, *, csrf: Csrf | None = None) -> None:
        self.m = m
        self.lock = threading.Lock()
        self.csrf = csrf or Csrf()
        self.env = Environment(loader=FileSystemLoader(str(HERE / "templates")),
                               autoescape=select_autoescape(("html",), default=True),
                               undefined=StrictUndefined, trim_blocks=True,
                               lstrip_blocks=True)
        self.env.globals.update(version=__version__, link=_query)
        self.env.filters["seg"] = lambda value: quote(str(value), safe="")

    def render(self, template: str, title: str, context: Mapping[str, Any], *,
               status: int = 200, request: Request) -> HTMLResponse:
        page = self.env.get_template(template)
        done = request.query_params.get("done")
        if done is not None and not self.csrf.signed(done, request.query_params.get("sig")):
            done = None  # a link cannot make a page say what it did not do
        html = page.render(**{"product": None, **context}, title=title,
                           csrf=self.csrf.issue(), path=request.url.path, done=done)
        return HTMLResponse(html, status_code=status)

    def error(self, exc: MemidexError, request: Request) -> HTMLResponse:
        return self.render("error.html", "error", {
            "message": exc.message, "hint": exc.hint, "code": type(exc).__name__,
            "status": http_status(exc), "product": request.query_params.get("product")},
            status=http_status(exc), request=request)


def _query(base: str, **params: object) -> str:
    """``base`` with the parameters that are set as its query string (templates' ``link``)."""
    kept = {k: str(v) for k, v in params.items() if v is not None and v != ""}
    return base + ("?" + urlencode(kept) if kept else "")


def _endpoint(site: Site, page: Callable[..., Page | Redirect], method: str
              ) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        form: dict[str, str] = {}
        if method == "POST":
            body = await request.body()
            if len(body) > MAX_FORM:
                return site.error(UsageError("the form is too large"), request)
            form = {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
            refused = _refused(site, request, form)
            if refused is not None:
                return site.render("error.html", "refused", {
                    "message": refused, "hint": "reload the page and try again",
                    "code": "CsrfError", "status": 403,
                    "product": request.query_params.get("product")},
                    status=403, request=request)
        req = Req({k: request.query_params.getlist(k) for k in request.query_params},
                  dict(request.path_params), form)

        def call() -> Page | Redirect:
            with site.lock:
                try:
                    return page(site.m, req)
                except OSError as exc:  # disk full, permissions: the one error map
                    raise from_os_error(exc) from None

        try:
            out = await run_in_threadpool(call)
        except MemidexError as exc:
            return site.error(exc, request)
        if isinstance(out, Redirect):
            url = out.url
            if out.done:
                sep = "&" if "?" in url else "?"
                url += sep + urlencode({"done": out.done, "sig": site.csrf.sign(out.done)})
            return RedirectResponse(url, status_code=303)
        return site.render(out.template, out.title, out.context, status=out.status,
                           request=request)

    return endpoint


def _refused(site: Site, request: Request, form: Mapping[str, str]) -> str | None:
    """Why a POST is refused (no valid CSRF token, or sent from another site), or None."""
    if not site.csrf.valid(form.get("csrf")):
        return "the form's CSRF token is missing, forged or more than 12 hours old"
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return f"a form sent from another site ({fetch_site}) is never applied"
    origin = request.headers.get("origin")
    host = request.headers.get("host", "")
    if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
        return "a form sent from another origin is never applied"
    return None


def create_app(m: Memidex, *, token: str | None = None, hosts: frozenset[str] | None = None,
               csrf: Csrf | None = None) -> Guard:
    """The dashboard over ``m``. ``hosts``: the Host headers answered (None: any — only
    with a ``token``); ``token``: asked of every request."""
    site = Site(m, csrf=csrf)
    routes: list[Route | Mount] = [
        Route(path.replace("{tag}", "{tag:path}"), _endpoint(site, page, method),
              methods=[method], name=f"{page.__name__}-{method.lower()}")
        for path, page, method in ROUTES]
    routes.append(Mount("/static", app=StaticFiles(directory=str(HERE / "static")),
                        name="static"))

    async def not_found(request: Request, exc: Exception) -> Response:
        return site.error(NotFoundError(f"no page {request.url.path[:200]}",
                                        hint="start from the overview, /"), request)

    async def not_allowed(request: Request, exc: Exception) -> Response:
        page = site.error(UsageError(f"{request.url.path[:200]} takes GET (a page) or POST "
                                     "(an action), not " + request.method[:10]), request)
        page.status_code = 405
        return page

    async def failed(request: Request, exc: Exception) -> Response:
        sys.stderr.write(f"memidex dashboard: {request.method} {request.url.path}: "
                         f"{type(exc).__name__}: {exc}\n")
        return site.error(MemidexError("the dashboard failed on this page (see the "
                                       "server's output)"), request)

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed,
                                                          500: failed})
    app.state.site = site
    return Guard(app, token=token, hosts=hosts)
