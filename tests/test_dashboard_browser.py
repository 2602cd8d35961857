"""The dashboard in a real browser: Debian's Chromium (``/usr/bin/chromium``) driven by
Playwright, against a real ``memidex dashboard`` server on the example shop with its runs
learned (``test_dashboard_shop.py``).

One browser session loads every page and holds each number it shows against the CLI's
``--json`` for the same question; clicks confirm, accepts a proposal and rolls a run back,
and checks each change on disk and in the change ledger; and shows a record whose title
and body are hostile HTML — nothing in it runs (``window.__pwned`` stays undefined, no
dialog opens), and the page's own script still does (the CSP allows the shipped file).

If Chromium cannot be started, the test says why and FAILS: it never skips.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from test_dashboard_shop import (
    HOSTILE_BODY,
    HOSTILE_TITLE,
    REGRESSION,
    Server,
    Shop,
    build_shop,
    cli_json,
)

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PLACE_ORDER = "fact-el-button-place-order-b9ec294f56697d9c"
ENABLED = "The place order button is enabled on /checkout"
DISABLED = "The place order button is disabled on /checkout"


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Shop:
    return build_shop(tmp_path_factory.mktemp("browser") / "shop")


@pytest.fixture(scope="module")
def server(shop: Shop) -> Iterator[Server]:
    s = Server(shop.root, "--wait", "2")
    yield s
    err = s.stop()
    assert "Traceback" not in err, err


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # a dev dependency: its absence is a failure
        pytest.fail(f"playwright is not installed ({exc}): pip install -e '.[dev]'")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no browser at {CHROMIUM}: apt-get install -y chromium")
    with sync_playwright() as p:
        try:
            b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        except Exception as exc:  # any launch failure: say why, and fail
            pytest.fail(f"cannot start Chromium at {CHROMIUM}: {exc}")
        yield b
        b.close()


@pytest.fixture(scope="module")
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(10_000)
    pg.dialogs = []  # every alert/confirm/prompt: none may open
    pg.console_errors = []
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.on("console", lambda m: m.type == "error" and pg.console_errors.append(m.text))
    pg.on("pageerror", lambda e: pg.console_errors.append(str(e)))
    yield pg
    context.close()


def _go(page: Any, server: Server, path: str) -> Any:
    response = page.goto(server.url.rstrip("/") + path)
    assert response is not None and response.status == 200, (path, response and
                                                              response.status)
    assert page.evaluate("document.documentElement.dataset.enhanced") == "1", \
        f"{path}: the shipped script did not run"
    return response


def _metric(page: Any, name: str) -> str:
    return str(page.locator(f'[data-metric="{name}"]').first.inner_text()).strip()


def _ids(page: Any, selector: str) -> list[str]:
    return [str(x) for x in page.eval_on_selector_all(
        selector, "els => els.map(e => e.getAttribute('data-id'))")]


def _badges(page: Any, row: str, attr: str) -> dict[str, int]:
    """{attr value: n} of the ``N word`` badges carrying ``attr`` in ``row``."""
    out = {}
    for text, key in page.eval_on_selector_all(
            f"{row} [{attr}]", f"els => els.map(e => [e.textContent, e.getAttribute('{attr}')])"):
        out[key] = int(text.strip().lstrip("+").split()[0])
    return out


def _ledger(shop: Shop) -> list[dict[str, Any]]:
    path = shop.root / "agent-qa-knowledge/memory/queue/ledger/ledger.jsonl"
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [e for e in lines if e.get("type") == "change"]


def _hash(data: bytes) -> str:
    from memidex.records.digest import content_hash

    return content_hash(data)


# --- every page, every number ----------------------------------------------------------


def test_every_page_shows_the_numbers_the_cli_gives(page: Any, server: Server,
                                                     shop: Shop) -> None:
    root = shop.root
    listing = cli_json(root, "knowledge", "list")["records"]
    doctor = cli_json(root, "doctor")
    runs = cli_json(root, "runs", "list")["runs"]
    proposals = cli_json(root, "knowledge", "proposals")["proposals"]

    # 1. overview
    _go(page, server, "/")
    counts: dict[tuple[str, str], int] = {}
    for r in listing:
        counts[r["kind"], r["status"]] = counts.get((r["kind"], r["status"]), 0) + 1
    assert int(_metric(page, "total")) == len(listing)
    for (kind, status), n in counts.items():
        assert int(_metric(page, f"count:{kind}:{status}")) == n, (kind, status)
    assert int(_metric(page, "candidates")) == sum(
        n for (_k, s), n in counts.items() if s == "candidate")
    assert _metric(page, "level") == doctor["level"] == "lexical-only"
    assert int(_metric(page, "index:records")) == doctor["index"]["records"]
    assert int(_metric(page, "index:policies")) == doctor["index"]["policies"]
    assert _metric(page, "lease:held") == ("yes" if doctor["lease"]["held"] else "no")
    assert int(_metric(page, "lease:epoch")) == doctor["lease"]["epoch"]
    assert int(_metric(page, "proposals")) == len(proposals) == 3
    assert int(_metric(page, "runs")) == len(runs)
    for r in runs[-10:]:
        row = f'#recent-runs tr[data-run="{r["run_id"]}"]'
        assert _badges(page, row, "data-verdict") == r["verdicts"], r["run_id"]
        taught = dict(r["changes"], **({"proposed": r["proposals"]} if r["proposals"] else {}))
        assert _badges(page, row, "data-op") == taught, r["run_id"]

    # 2. builds and runs; a build's diff; each run's tests, causes, what it was served
    _go(page, server, "/runs")
    assert int(_metric(page, "runs")) == len(runs)
    assert int(_metric(page, "builds")) == len({r["build_tag"] for r in runs})
    shown = page.eval_on_selector_all("#run-table tbody tr", "els => els.map(e => "
                                      "[e.dataset.run, e.querySelector('[data-metric=ordinal]')"
                                      ".textContent])")
    assert [(r, int(o)) for r, o in shown] == [(r["run_id"], r["ordinal"])
                                               for r in reversed(runs)]
    for tag in sorted({r["build_tag"] for r in runs}):
        diff = cli_json(root, "knowledge", "diff", tag)
        _go(page, server, f"/builds/{tag}")
        assert int(_metric(page, "since")) == diff["since_ordinal"]
        for key in ("added", "confirmed", "superseded", "deprecated"):
            assert _ids(page, f"#diff-{key} li[data-id]") == diff[key], (tag, key)
            assert int(_metric(page, f"diff:{key}")) == len(diff[key])
    details = {r["run_id"]: cli_json(root, "runs", "show", r["run_id"]) for r in runs}
    for run_id, d in details.items():
        _go(page, server, f"/runs/{run_id}")
        assert int(_metric(page, "ordinal")) == d["ordinal"]
        assert int(_metric(page, "changes")) == len(d["changes"])
        for t in d["tests"]:
            row = f'#tests tr[data-test="{t["test_id"]}"]'
            assert page.inner_text(f"{row} [data-field=verdict]") == t["verdict"]
            cause = page.locator(f"{row} [data-field=cause]")
            assert (cause.inner_text() if cause.count() else None) == t["cause"]
            served = page.eval_on_selector_all(
                f"{row} [data-field=served] .id", "els => els.map(e => e.textContent)")
            assert served == t["served_records"], (run_id, t["test_id"])

    # 3. flakiness: counted here from `runs show --json`, as the page counts
    _go(page, server, "/flaky")
    standing = [details[r["run_id"]] for r in runs if not r["rolled_back"]][-20:]
    assert int(_metric(page, "window")) == len(standing)
    per_test: dict[str, list[str | None]] = {}
    for d in standing:
        for t in d["tests"]:
            per_test.setdefault(t["test_id"], []).append(t["cause"])
    for test_id, causes in per_test.items():
        cell = page.locator(f'#ranked tr[data-test="{test_id}"] [data-metric=flaky]')
        flaky = sum(c in ("flaky", "environment") for c in causes)
        assert (int(cell.get_attribute("data-flaky")), int(cell.get_attribute("data-ran"))) \
            == (flaky, len(causes)), test_id
        assert cell.inner_text() == f"failed {flaky}/{len(causes)} in the last " \
                                    f"{len(standing)} runs"
    ranked = page.eval_on_selector_all("#ranked tr[data-test]", "els => els.map(e => "
                                       "e.dataset.test)")
    assert ranked[0] == "search-suggestions"  # flaky twice, environment once
    by_build: dict[str, dict[str, int]] = {}
    for d in standing:
        for t in d["tests"]:
            if t["cause"]:
                b = by_build.setdefault(d["build_tag"], {})
                b[t["cause"]] = b.get(t["cause"], 0) + 1
    for tag, parts in by_build.items():
        for cause, n in parts.items():
            cell = page.locator(f'#causes tr[data-build="{tag}"] [data-metric="cause:{cause}"]')
            assert int(cell.inner_text()) == n, (tag, cause)
    assert page.locator("#causes svg rect").count() >= len(by_build)

    # 4. a record: trust, versions, evidence; its trust now as the brief weighs it
    brief = cli_json(root, "brief", "checkout-happy-path", "--no-record")
    for rid in (PLACE_ORDER, *(r["id"] for r in brief["records"][:3])):
        show = cli_json(root, "knowledge", "show", rid)
        _go(page, server, f"/records/{rid}")
        cell = page.locator("[data-metric=trust]")
        assert int(cell.get_attribute("data-confirmations")) == \
            show["trust"]["confirmations"]
        assert int(cell.get_attribute("data-contradictions")) == \
            show["trust"]["contradictions"]
        assert int(_metric(page, "versions")) == len(show["history"]) + 1
        assert int(_metric(page, "evidence")) == show["evidence_total"]
        assert page.locator("#trust svg polyline").count() >= 1
        served = {r["id"]: r for r in brief["records"]}
        if rid in served:
            assert int(_metric(page, "trust-at")) == brief["ordinal"]
            assert _metric(page, "trust-now") == f"{served[rid]['trust']:.3f}", rid

    # 5. proposals
    _go(page, server, "/proposals")
    rows = page.eval_on_selector_all("tr[data-proposal]", "els => els.map(e => "
                                     "e.dataset.proposal)")
    assert rows == [p["id"] for p in proposals]

    # 6. the brief now and at an earlier ordinal
    at = 50
    now = cli_json(root, "brief", "checkout-happy-path", "--no-record")
    then = cli_json(root, "brief", "checkout-happy-path", "--no-record", "--at", str(at))
    _go(page, server, f"/brief?test=checkout-happy-path&at={at}")
    for label, b in (("now", now), ("then", then)):
        assert _ids(page, f"#brief-{label} ol.served li[data-id]") == \
            [r["id"] for r in b["records"]], label
        assert int(_metric(page, f"{label}:policies")) == len(b["policies"])
        for reason, w in b["withheld"].items():
            if w["count"]:
                assert int(_metric(page, f"{label}:withheld:{reason}")) == w["count"]
        trusts = page.eval_on_selector_all(f"#brief-{label} [data-field=trust]",
                                           "els => els.map(e => e.textContent)")
        assert trusts == [f"{r['trust']:.3f}" for r in b["records"]]
    assert now["ordinal"] != then["ordinal"] == at

    # 7. search
    found = cli_json(root, "knowledge", "search", "place order")
    _go(page, server, "/search?q=place+order")
    assert _metric(page, "level") == found["level"]
    assert _ids(page, "ol.results li[data-id]") == [h["id"] for h in found["results"]]
    assert page.eval_on_selector_all("ol.results [data-field=confidence]",
                                     "els => els.map(e => e.textContent)") == \
        [h["confidence"] for h in found["results"]]
    assert page.locator("ol.results mark").count() > 0

    # the shipped script works under the CSP: the run table's filter
    _go(page, server, "/runs")
    page.fill("input[data-filter=run-table]", "r-0052")
    assert page.locator("#run-table tbody tr:visible").count() == 1
    assert not page.dialogs and not page.console_errors, (page.dialogs, page.console_errors)


# --- hostile text -------------------------------------------------------------------------


def test_a_hostile_record_title_stays_text(page: Any, server: Server, shop: Shop) -> None:
    for path in (f"/records/{shop.hostile_id}", "/search?q=pwn",
                 "/records?kind=fact&status=active", "/brief?test=checkout-happy-path",
                 "/runs"):
        _go(page, server, path)
        page.wait_for_timeout(100)  # an onerror would fire once the image failed
        assert page.evaluate("typeof window.__pwned") == "undefined", path
        assert page.locator("img, iframe").count() == 0, path
    _go(page, server, f"/records/{shop.hostile_id}")
    assert page.inner_text("h1.title") == HOSTILE_TITLE
    assert page.inner_text("pre.body") == HOSTILE_BODY
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.dialogs == [], page.dialogs


# --- actions through the write route --------------------------------------------------------


def test_confirm_in_the_browser_writes_through_the_ledger(page: Any, server: Server,
                                                           shop: Shop) -> None:
    rid = "caution-host-payments-sandbox-shop-web-test-b5084213357f36d6"
    before = cli_json(shop.root, "knowledge", "show", rid)
    assert before["status"] == "candidate"
    path = shop.root / before["path"]
    old = path.read_bytes()
    entries = len(_ledger(shop))
    _go(page, server, f"/records/{rid}")
    page.click("#actions button:text-is('Confirm')")
    page.wait_for_url(f"**/records/{rid}?done=*")
    assert "confirm: confirmed (active)" in page.inner_text(".flash")
    assert page.inner_text("[data-field=status]") == "active"
    after = cli_json(shop.root, "knowledge", "show", rid)
    assert after["status"] == "active"
    assert after["trust"]["confirmations"] == before["trust"]["confirmations"] + 1
    new = path.read_bytes()
    ledger = _ledger(shop)
    assert len(ledger) == entries + 1
    last = ledger[-1]
    assert last["command"] == "knowledge confirm" and last["outcome"] == "landed"
    (op,) = last["ops"]
    assert (op["record"], op["before"], op["after"]) == (rid, _hash(old), _hash(new))


def test_accepting_a_proposal_in_the_browser_applies_it(page: Any, server: Server,
                                                        shop: Shop) -> None:
    proposals = cli_json(shop.root, "knowledge", "proposals")["proposals"]
    (p,) = [x for x in proposals if x["record_id"] == PLACE_ORDER]
    path = shop.root / p["path"]
    old = path.read_bytes()
    _go(page, server, "/proposals")
    page.click(f'tr[data-proposal="{p["id"]}"] a[href^="/proposals/"]')
    page.wait_for_url(f"**/proposals/{p['id']}")
    assert page.inner_text("[data-field=title-before]") == ENABLED
    assert page.inner_text("[data-field=title-after]") == DISABLED
    assert page.locator("#body-diff .dadd").count() >= 1
    assert page.locator("#front-diff .ddel").count() >= 1
    page.click("button:text-is('Accept')")
    page.wait_for_url("**/proposals?done=*")
    assert f"accepted {p['id']}: supersede {PLACE_ORDER}" in page.inner_text(".flash")
    left = cli_json(shop.root, "knowledge", "proposals")["proposals"]
    assert p["id"] not in [x["id"] for x in left] and len(left) == len(proposals) - 1
    shown = cli_json(shop.root, "knowledge", "show", PLACE_ORDER)
    assert shown["title"] == DISABLED
    assert [h["title"] for h in shown["history"]] == [DISABLED, ENABLED]
    new = path.read_bytes()
    last = _ledger(shop)[-1]
    assert last["command"] == "knowledge proposals accept"
    (op,) = last["ops"]
    assert (op["record"], op["before"], op["after"]) == (PLACE_ORDER, _hash(old), _hash(new))
    _go(page, server, f"/records/{PLACE_ORDER}")
    assert int(_metric(page, "versions")) == 3
    assert page.locator("#trust svg polyline").count() == 3  # one line per version


def test_rolling_a_run_back_in_the_browser(page: Any, server: Server, shop: Shop) -> None:
    """The regression run r-0061, after a person accepted one of its proposals (a record
    the run itself held back, so nothing blocks the rollback): every file it wrote gets
    back the bytes it had, and its other proposals are dropped."""
    run_id = REGRESSION
    wrote = [op for e in _ledger(shop) if e["run_id"] == run_id and e["outcome"] == "landed"
             for op in e["ops"]]
    assert wrote
    _go(page, server, f"/runs/{run_id}")
    page.click("a:text-is('Roll back this run…')")
    page.wait_for_url(f"**/runs/{run_id}/rollback")
    page.click(f"button:text-is('Roll back {run_id}')")
    page.wait_for_load_state()
    assert "?done=" in page.url, page.inner_text("main")
    assert f"rolled back {run_id}" in page.inner_text(".flash")
    rows = {r["run_id"]: r for r in cli_json(shop.root, "runs", "list")["runs"]}
    assert rows[run_id]["rolled_back"] is True
    assert _ledger(shop)[-1]["command"] == "knowledge rollback"
    for op in wrote:  # each file as it was before the run
        path = shop.root / op["path"]
        assert (_hash(path.read_bytes()) if path.exists() else None) == op["before"], op
    assert [p for p in cli_json(shop.root, "knowledge", "proposals")["proposals"]
            if p["run_id"] == run_id] == []
    _go(page, server, "/flaky")
    standing = sum(not r["rolled_back"] for r in rows.values())
    assert int(_metric(page, "window")) == standing == len(rows) - 1
    assert not page.dialogs and not page.console_errors, (page.dialogs, page.console_errors)
