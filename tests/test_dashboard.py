"""The dashboard over HTTP: a real ``memidex dashboard`` server in a subprocess, talked
to with plain HTTP — its pages, headers, errors, the CSRF and token rules, a held lease,
binding refusals — and the parts that are pure (charts, escaping, tokens).

The browser's view (numbers against the CLI, clicks, hostile HTML in Chromium) is in
``test_dashboard_browser.py``.
"""

from __future__ import annotations

import ast
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from urllib.parse import quote, urlencode

import pytest

from conftest import REPO_ROOT, run_cli
from test_dashboard_shop import (
    Server,
    Shop,
    build_shop,
    cli_json,
)

PACKAGE = REPO_ROOT / "src/memidex/dashboard"
PAGES = ("/", "/health", "/runs", "/runs/r-0054", "/runs/r-0054/rollback", "/builds/v1.4.2",
         "/flaky", "/flaky?last=3", "/records", "/records?kind=caution&status=active",
         "/proposals", "/brief", "/brief?test=checkout-happy-path&at=50",
         "/search", "/search?q=place+order", "/search?q=cookie&near=page:/checkout")
TOKEN = "a-test-token-that-is-long-enough"


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Shop:
    return build_shop(tmp_path_factory.mktemp("dash") / "shop")


@pytest.fixture(scope="module")
def server(shop: Shop) -> Iterator[Server]:
    s = Server(shop.root, "--wait", "1")
    yield s
    s.stop()


def _tags(body: str) -> list[tuple[str, dict[str, str | None]]]:
    """Every start tag of a page and its attributes, as a browser's parser sees them."""
    from html.parser import HTMLParser

    found: list[tuple[str, dict[str, str | None]]] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, dict(attrs)))

    parser = Tags()
    parser.feed(body)
    parser.close()
    return found


def _csrf(server: Server, path: str = "/records/fact-page-cart-9840041845e6c1fc") -> str:
    status, _h, body = server.request("GET", path)
    assert status == 200
    found = re.search(r'name="csrf" value="([^"]+)"', body)
    assert found, "the page carries no CSRF token"
    return found.group(1)


def _record_bytes(shop: Shop, rid: str) -> bytes:
    shown = cli_json(shop.root, "knowledge", "show", rid)
    return (shop.root / shown["path"]).read_bytes()


# --- pages and headers ------------------------------------------------------------------


def test_every_page_answers_with_the_security_headers(server: Server, shop: Shop) -> None:
    from memidex.dashboard.security import CSP

    for path in (*PAGES, f"/records/{shop.hostile_id}", f"/proposals/{shop.proposals[0]}"):
        status, headers, body = server.request("GET", path)
        assert status == 200, (path, body[:500])
        assert headers["content-type"].startswith("text/html"), path
        assert headers["content-security-policy"] == CSP
        assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "DENY"
        assert headers["referrer-policy"] == "same-origin"
        assert headers["cache-control"] == "no-store"
        assert "server" not in headers
        # everything the page loads comes from the dashboard itself
        assert not re.search(r'(src|href|action)="(https?:)?//', body), path
        assert '<script src="/static/dashboard.js" defer></script>' in body
        tags = _tags(body)
        scripts = [attrs for tag, attrs in tags if tag == "script"]
        assert scripts == [{"src": "/static/dashboard.js", "defer": None}], path
        handlers = [(tag, a) for tag, attrs in tags for a in attrs if a.startswith("on")]
        assert handlers == [], (path, handlers)
        assert not [t for t, attrs in tags if "style" in attrs or t in ("iframe", "img")], path


def test_every_asset_is_shipped_in_the_package() -> None:
    for name in ("dashboard.js", "dashboard.css", "favicon.svg"):
        assert (PACKAGE / "static" / name).is_file(), name
    for path in [*PACKAGE.joinpath("templates").iterdir(), *PACKAGE.joinpath("static").iterdir()]:
        text = path.read_text(encoding="utf-8")
        urls = re.findall(r"https?://[^\s\"'<>)]+", text)
        assert set(urls) <= {"http://www.w3.org/2000/svg"}, (path.name, urls)
        assert "style=" not in text, f"{path.name}: an inline style (the CSP forbids it)"
        if path.suffix == ".html":
            assert "|safe" not in text.replace(" ", "") and "autoescape false" not in text
            assert not re.search(r"<script(?![^>]*\bsrc=)", text), path.name


def test_static_files_are_served_with_their_types(server: Server) -> None:
    for name, kind in (("dashboard.js", "javascript"), ("dashboard.css", "text/css"),
                       ("favicon.svg", "image/svg+xml")):
        status, headers, body = server.request("GET", f"/static/{name}")
        assert status == 200 and kind in headers["content-type"], (name, headers)
        assert body == (PACKAGE / "static" / name).read_text(encoding="utf-8")
        assert headers["x-content-type-options"] == "nosniff"


def test_hostile_record_text_is_sent_escaped(server: Server, shop: Shop) -> None:
    for path in (f"/records/{shop.hostile_id}", "/search?q=pwn",
                 "/records?kind=fact&status=active", "/brief?test=checkout-happy-path"):
        status, _h, body = server.request("GET", path)
        assert status == 200, path
        assert "<script>window.__pwned" not in body and "<img src=x" not in body, path
        assert "<svg onload" not in body and "<iframe" not in body, path
    _s, _h, body = server.request("GET", f"/records/{shop.hostile_id}")
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in body
    assert "onerror=&#34;window.__pwned = 2; alert(2)&#34;" in body
    _s, _h, body = server.request("GET", "/search?q=pwn")
    assert "<mark>" in body, "the snippet's matched words are marked"


def test_errors_are_pages_with_their_http_status(server: Server) -> None:
    cases = {
        "/records/no-such-record": (404, "no record with id or prefix"),
        "/records/%3Cscript%3Ealert(1)": (404, "&lt;script&gt;alert(1)"),
        "/records/%3Cscript%3Ealert(1)%3C%2Fscript%3E": (405, "takes GET"),
        "/runs/r-9999": (404, "no run r-9999 has been ingested"),
        "/builds/v9.9": (400, "no run of shop-web used build tag"),
        "/flaky?last=many": (400, "last must be a whole number"),
        "/search?q=x&kind=widget": (400, "unknown kind"),
        "/proposals/p-0000000000000000": (404, "no proposal"),
        "/brief?test=checkout-happy-path&at=100000": (400, "at must be a whole number"),
        "/no/such/page": (404, "no page /no/such/page"),
    }
    for path, (code, text) in cases.items():
        status, headers, body = server.request("GET", path)
        assert status == code, (path, status, body[:300])
        assert text in body, (path, body[:800])
        assert headers["content-security-policy"], path
        assert "Traceback" not in body
    status, _h, body = server.request("POST", "/records/x/explode", body="csrf=x")
    assert status == 403  # the CSRF check comes before anything else


# --- writes: CSRF, origin, the lease ------------------------------------------------------


def test_a_post_without_a_valid_csrf_token_writes_nothing(server: Server, shop: Shop) -> None:
    rid = "fact-el-button-place-order-72fe1a72868329c6"
    before = _record_bytes(shop, rid)
    good = _csrf(server)
    forged = good.split(".")[0] + "." + "0" * 32
    old = "1000000000." + good.split(".")[1]
    for body, headers in (("", {}), (urlencode({"csrf": forged}), {}),
                          (urlencode({"csrf": old}), {}),
                          (urlencode({"csrf": good}), {"Origin": "http://evil.example"}),
                          (urlencode({"csrf": good}), {"Sec-Fetch-Site": "cross-site"})):
        status, _h, page = server.request("POST", f"/records/{rid}/confirm", body=body,
                                          headers=headers)
        assert status == 403, (body, headers, page[:300])
        assert "never applied" in page or "CSRF token" in page
    assert _record_bytes(shop, rid) == before
    # the same form with the page's token, from the page's origin, is applied
    status, headers, _page = server.request(
        "POST", f"/records/{rid}/confirm", body=urlencode({"csrf": good}),
        headers={"Origin": server.url.rstrip("/"), "Sec-Fetch-Site": "same-origin"})
    assert status == 303, _page[:500]
    assert headers["location"].startswith(f"/records/{rid}?done=")
    after = cli_json(shop.root, "knowledge", "show", rid)
    assert _record_bytes(shop, rid) != before
    assert after["trust"]["confirmations"] == _confirmations(before) + 1
    # what it did is shown once, signed: the same text without the signature is not
    status, _h, page = server.request("GET", headers["location"])
    assert status == 200 and 'class="flash"' in page and "confirm: confirmed" in page
    forged_done = f"/records/{rid}?" + urlencode({"done": "your token expired, log in at x"})
    _s, _h, page = server.request("GET", forged_done)
    assert 'class="flash"' not in page and "your token expired" not in page


def _confirmations(data: bytes) -> int:
    found = re.search(rb"confirmations: (\d+)", data)
    assert found
    return int(found.group(1))


def test_a_held_lease_is_a_clear_message_never_a_hang(server: Server, shop: Shop) -> None:
    import os

    from memidex.config import load_config
    from memidex.store.files import Store
    from memidex.write.writer import writer_session

    rid = "fact-el-button-proceed-to-checkout-e0e30a2c6dc532b7"
    before = _record_bytes(shop, rid)
    token = _csrf(server)
    store = Store(load_config(shop.root))
    with writer_session(store, wait=0, ttl=30):
        t0 = time.monotonic()
        status, _h, page = server.request("POST", f"/records/{rid}/confirm",
                                          body=urlencode({"csrf": token}))
        took = time.monotonic() - t0
    assert status == 409, page[:500]
    assert f"pid {os.getpid()}" in page, page[:1500]
    assert took < 10, f"the action waited {took:.1f} s for the lease"
    assert _record_bytes(shop, rid) == before
    # the lease released, the same action goes through
    status, _h, _page = server.request("POST", f"/records/{rid}/confirm",
                                       body=urlencode({"csrf": _csrf(server)}))
    assert status == 303


def test_another_sites_host_header_is_refused(server: Server) -> None:
    """DNS rebinding: a page elsewhere that points its name at 127.0.0.1 gets no page."""
    for host in ("evil.example", f"evil.example:{server.port}", "127.0.0.1.nip.io"):
        status, _h, body = server.request("GET", "/", headers={"Host": host})
        assert status == 421 and "Host header" in body, host
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}"):
        assert server.request("GET", "/", headers={"Host": host})[0] == 200


# --- binding and the token ------------------------------------------------------------------


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_another_host_without_a_token_is_refused(shop: Shop) -> None:
    for args in (("--host", "0.0.0.0"), ("--host", "192.0.2.1", "--port", "0"),
                 ("--host", "::", "--token", "")):
        out = run_cli(shop.root, "dashboard", *args)
        assert out.returncode == 2, (args, out.stderr)
        assert len(_errors(out.stderr)) == 1, out.stderr
        assert "Traceback" not in out.stderr
    out = run_cli(shop.root, "dashboard", "--host", "0.0.0.0")
    assert "--token" in out.stderr and "MEMIDEX_DASHBOARD_TOKEN" in out.stderr
    out = run_cli(shop.root, "dashboard", "--host", "0.0.0.0", "--token", "short")
    assert out.returncode == 2 and "at least 16 characters" in out.stderr
    assert "--token" in run_cli(shop.root, "dashboard", "--help").stdout


def test_a_port_in_use_is_one_error_line(shop: Shop) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = run_cli(shop.root, "dashboard", "--port", str(port))
    assert out.returncode == 2, out.stderr
    assert _errors(out.stderr) == [f"error: cannot listen on 127.0.0.1:{port}: the address "
                                   "is in use"]


def test_with_a_token_every_request_needs_it(shop: Shop) -> None:
    s = Server(shop.root, "--host", "0.0.0.0", env={"MEMIDEX_DASHBOARD_TOKEN": TOKEN})
    try:
        assert s.lines[0].endswith(f"?token={TOKEN}")
        assert any("reachable from other machines" in line for line in s.lines[1:])
        s.host = "127.0.0.1"  # listening everywhere; asked only here
        for path in ("/", "/static/dashboard.css", "/records"):
            status, headers, body = s.request("GET", path)
            assert status == 401 and "needs its token" in body, path
            assert TOKEN not in body
        assert s.request("GET", "/", headers={"Authorization": "Bearer nope"})[0] == 401
        assert s.request("GET", "/", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
        status, headers, _ = s.request("GET", "/records?" + urlencode({"token": TOKEN,
                                                                       "kind": "fact"}))
        assert status == 303 and headers["location"] == "/records?kind=fact"
        cookie = headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        jar = cookie.split(";", 1)[0]
        status, _h, body = s.request("GET", "/records?kind=fact", headers={"Cookie": jar})
        assert status == 200 and "Records" in body
        bad = jar.split("=", 1)[0] + "=" + "0" * 64
        assert s.request("GET", "/", headers={"Cookie": bad})[0] == 401
        assert s.request("GET", "/", headers={"Cookie": ';;=="; x'})[0] == 401
    finally:
        s.stop()


# --- import cost and layering ----------------------------------------------------------------


def test_other_commands_do_not_import_the_web_stack() -> None:
    code = ("import sys; import memidex.cli.commands; "
            "print(','.join(m for m in ('starlette', 'uvicorn', 'jinja2', 'markupsafe', "
            "'memidex.dashboard.app', 'memidex.dashboard.server') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


def test_the_dashboard_imports_neither_typer_nor_rich_nor_the_cli() -> None:
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
        roots = {n.split(".")[0] for n in names}
        assert not roots & {"typer", "rich", "click", "sqlite3", "sqlite_utils", "anyio"}, path
        assert not {n for n in names if n.startswith(("memidex.cli", "memidex.index",
                                                      "memidex.store", "memidex.runstate"))
                    }, f"{path.name} reaches behind the facade"


# --- pure parts ----------------------------------------------------------------------


def test_charts_escape_every_text_they_draw() -> None:
    from memidex.dashboard import charts

    evil = '<script>alert(1)</script>"'
    svg = str(charts.stacked_bars([charts.Bar(evil, {"flaky": 2, "<x>": 1})],
                                  ("flaky", "<x>"), label=evil))
    assert "<script>" not in svg and "&lt;script&gt;" in svg and 'class="o-x"' in svg
    svg = str(charts.trend([charts.Cell("flaky", evil)], label=evil))
    assert "<script>" not in svg
    svg = str(charts.timeline([charts.TimelineRun(1, evil, "pass", evil,
                                                  '/runs/x"onclick="y')], label="t"))
    assert "<script>" not in svg and 'onclick="y' not in svg
    svg = str(charts.trust_line([charts.LinePoint(1, 0.5, 1, evil),
                                 charts.LinePoint(3, 0.9, 2, "active")], label=evil))
    assert "<script>" not in svg and svg.count("<polyline") == 2


def test_snippets_are_escaped_then_marked() -> None:
    from memidex.dashboard.views import highlight

    assert str(highlight("the «place» <b>«order»</b>")) == \
        "the <mark>place</mark> &lt;b&gt;<mark>order</mark>&lt;/b&gt;"
    assert str(highlight("»odd« <i>")) == "»odd« &lt;i&gt;"
    assert str(highlight("««twice»»")) == "<mark>«twice</mark>»"


def test_csrf_tokens_expire_and_cannot_be_forged() -> None:
    from memidex.dashboard.security import Csrf

    now = [1_000_000.0]
    c = Csrf(b"k" * 32, clock=lambda: now[0])
    token = c.issue()
    assert c.valid(token)
    assert not Csrf(b"j" * 32, clock=lambda: now[0]).valid(token)
    assert not c.valid(None) and not c.valid("") and not c.valid("1.2.3")
    assert not c.valid(token.split(".")[0] + ".x")
    now[0] += 12 * 3600 + 1
    assert not c.valid(token)
    assert c.signed("done", c.sign("done")) and not c.signed("done!", c.sign("done"))


def test_loopback_is_what_it_says() -> None:
    from memidex.dashboard.security import check_binding, is_loopback
    from memidex.errors import UsageError

    for host in ("127.0.0.1", "127.9.9.9", "::1", "[::1]", "localhost", "LOCALHOST"):
        assert is_loopback(host), host
        check_binding(host, None)
    for host in ("0.0.0.0", "::", "192.168.1.2", "example.com", "localhost.example"):
        assert not is_loopback(host), host
        with pytest.raises(UsageError):
            check_binding(host, None)
        check_binding(host, "x" * 16)


def test_a_page_quotes_what_it_puts_in_a_link(server: Server) -> None:
    status, _h, body = server.request("GET", "/runs")
    assert status == 200
    assert f'href="/builds/{quote("v1.4.2", safe="")}?product=shop-web"' in body
