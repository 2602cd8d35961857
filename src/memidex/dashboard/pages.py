"""The pages: each parses its request, calls the facade (the same methods, hence the same
numbers, as the CLI's ``--json``) and hands the results to its template.

A page never reads a file or the index itself; writes (the actions) call the same facade
methods as ``knowledge confirm|quarantine|release|deprecate``, ``knowledge proposals
accept|reject`` and ``knowledge rollback`` — the write route, under the lease, fenced and
written to the change ledger. Errors are raised; :mod:`memidex.dashboard.app` turns them
into a page with an HTTP status, in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from memidex.dashboard import charts, views
from memidex.errors import NotFoundError, UsageError

if TYPE_CHECKING:
    from memidex.app import Memidex
    from memidex.app.results import RunDetail, RunRow

__all__ = ["ACTIONS", "Page", "Redirect", "Req", "ROUTES"]

RUN_WINDOW = 20
"""Runs the flakiness page (and a record's "served to") looks back over by default."""
MAX_WINDOW = 200
TITLES = 300
"""Record titles a page looks up (one ``knowledge show`` each); ids past that are listed
without one."""
CAUTION_TESTS = 5
"""The most-flaky tests whose briefs give "the cautions that apply"."""

ACTIONS = ("confirm", "quarantine", "release", "deprecate")
"""The curation actions a record page offers (those its status allows)."""


@dataclass(frozen=True)
class Req:
    """A request as a page sees it: query arguments (repeatable), path parameters and the
    POSTed form."""

    query: Mapping[str, Sequence[str]]
    path: Mapping[str, str]
    form: Mapping[str, str] = field(default_factory=dict)

    def arg(self, name: str) -> str | None:
        values = self.query.get(name) or ()
        value = values[-1].strip() if values else ""
        return value or None

    def args(self, name: str) -> list[str]:
        return [v.strip() for v in self.query.get(name) or () if v.strip()]

    def number(self, name: str, default: int | None, lo: int, hi: int) -> int | None:
        text = self.arg(name)
        if text is None:
            return default
        if not text.isdigit() or not lo <= int(text) <= hi:
            raise UsageError(f"{name} must be a whole number from {lo} to {hi}, not "
                             f"{text[:40]!r}")
        return int(text)


@dataclass(frozen=True)
class Page:
    template: str
    title: str
    context: dict[str, Any]
    status: int = 200


@dataclass(frozen=True)
class Redirect:
    """Where a write sends the browser next, and what it did (shown there once, signed so
    that a link cannot make the page say something else)."""

    url: str
    done: str = ""


def _q(**params: object) -> str:
    """A query string of the parameters that are set."""
    kept = {k: str(v) for k, v in params.items() if v is not None and v != ""}
    return ("?" + urlencode(kept)) if kept else ""


def _p(value: str) -> str:
    return quote(value, safe="")


def _product(m: Memidex, r: Req) -> str:
    return m.product(r.arg("product"))


def _titles(m: Memidex, ids: Sequence[str]) -> dict[str, dict[str, str]]:
    """id -> {title, kind, status} for up to :data:`TITLES` ids (``knowledge show``); an
    id no record has any more (purged) is left out."""
    out: dict[str, dict[str, str]] = {}
    for rid in list(dict.fromkeys(ids))[:TITLES]:
        try:
            r = m.show(rid).record
        except NotFoundError:
            continue
        out[rid] = {"title": r.title, "kind": r.kind, "status": r.status}
    return out


def _details(m: Memidex, rows: Sequence[RunRow]) -> list[RunDetail]:
    return [m.run(r.run_id) for r in rows]


def _window(m: Memidex, product: str, last: int) -> tuple[list[RunRow], list[RunDetail]]:
    """The product's last ``last`` runs that stand (not rolled back), and each one's
    ``runs show``."""
    rows = [r for r in m.runs(product).runs if not r.rolled_back][-last:]
    return rows, _details(m, rows)


# --- 1. overview ----------------------------------------------------------------------


def overview(m: Memidex, r: Req) -> Page:
    product = _product(m, r)
    status = m.health_status()
    counts = m.record_counts()
    candidates = m.list_records(product=product, statuses=["candidate"], limit=8)
    runs = m.runs(product).runs
    run_ids = {x.run_id for x in runs}
    listing = m.proposals()
    mine = [p for p in listing.proposals if p.run_id in run_ids]
    kinds = counts.of(product)
    statuses = sorted({s for by in kinds.values() for s in by},
                      key=lambda s: _STATUS_ORDER.get(s, 99))
    return Page("overview.html", f"{product} — overview", {
        "product": product, "status": status, "counts": counts, "kinds": kinds,
        "statuses": statuses, "total": counts.total(product),
        "products": sorted({*counts.products(), product}),
        "candidates": candidates.records, "candidate_count": sum(
            by.get("candidate", 0) for by in kinds.values()),
        "proposals": mine, "damaged": listing.damaged,
        "recent": list(reversed(runs[-10:])), "run_count": len(runs),
        "verdict_text": views.verdict_text})


_STATUS_ORDER = {s: i for i, s in enumerate(
    ("active", "candidate", "superseded", "deprecated", "quarantined"))}


def health(m: Memidex, r: Req) -> Page:
    report = m.doctor(deep=True)  # the full check: quick_check too
    return Page("health.html", "doctor", {"report": report, "data": report.to_json()})


# --- 2. builds and runs ---------------------------------------------------------------


def runs_page(m: Memidex, r: Req) -> Page:
    product = _product(m, r)
    rows = m.runs(product).runs
    builds: dict[str, list[RunRow]] = {}
    for row in rows:
        builds.setdefault(row.build_tag or "", []).append(row)
    line = charts.timeline(views.timeline_runs(rows, "/runs/{}" + _q(product=product)),
                           label=f"runs of {product} by ordinal, each build a band")
    return Page("runs.html", f"{product} — builds and runs", {
        "product": product, "rows": list(reversed(rows)), "builds": builds,
        "timeline": line, "verdict_text": views.verdict_text})


DIFF_KEYS = ("added", "confirmed", "superseded", "deprecated")


def build_page(m: Memidex, r: Req) -> Page:
    product = _product(m, r)
    tag = r.path["tag"]
    diff = m.diff(tag, product)
    lists = {k: list(getattr(diff, k)) for k in DIFF_KEYS}
    titles = _titles(m, [rid for k in DIFF_KEYS for rid in lists[k]])
    # resolved: a question raised since the build (an unknown added) that is closed now
    resolved = [rid for rid in lists["added"] if rid.startswith("unknown-")
                and titles.get(rid, {}).get("status") in ("deprecated", "superseded")]
    lists["resolved"] = resolved
    return Page("build.html", f"{product} — build {tag}", {
        "product": product, "tag": tag, "diff": diff, "lists": lists, "titles": titles,
        "keys": (*DIFF_KEYS, "resolved")})


def run_page(m: Memidex, r: Req) -> Page:
    detail = m.run(r.path["run_id"])
    ids = [rid for _op, rid in detail.changes]
    for t in detail.tests:
        ids += [*t.served_records, *t.briefed]
    return Page("run.html", f"run {detail.run_id}", {
        "d": detail, "product": detail.product, "titles": _titles(m, ids),
        "outcome": views.outcome})


def rollback_form(m: Memidex, r: Req) -> Page:
    detail = m.run(r.path["run_id"])
    return Page("rollback.html", f"roll back {detail.run_id}", {
        "d": detail, "product": detail.product,
        "titles": _titles(m, [rid for _op, rid in detail.changes])})


def rollback(m: Memidex, r: Req) -> Redirect:
    run_id = r.path["run_id"]
    result = m.rollback(run_id, cascade=r.form.get("cascade") == "1")
    return Redirect(f"/runs/{_p(run_id)}", "already rolled back" if result.already else
                    f"rolled back {', '.join(result.runs)}: {len(result.restored)} restored, "
                    f"{len(result.removed)} removed")


# --- 3. flakiness and causes ----------------------------------------------------------


def flaky_page(m: Memidex, r: Req) -> Page:
    product = _product(m, r)
    last = r.number("last", RUN_WINDOW, 1, MAX_WINDOW)
    assert last is not None
    rows, details = _window(m, product, last)
    ranked = views.flakiness(details)
    bars = views.causes_by_build(details)
    flaky = [row for row in ranked if row.flaky][:CAUTION_TESTS]
    cautions: dict[str, dict[str, Any]] = {}
    for row in flaky:
        brief = m.brief(row.test_id, product=product, record=False)
        for rec in brief.records:
            if rec.kind != "caution":
                continue
            entry = cautions.setdefault(rec.id, {"rec": rec, "tests": []})
            entry["tests"].append(row.test_id)
    return Page("flaky.html", f"{product} — flakiness and causes", {
        "product": product, "last": last, "window": len(details), "ranked": ranked,
        "trend": lambda row: charts.trend(row.cells, label=f"{row.test_id}: {row.label}"),
        "bars": charts.stacked_bars(bars, views.CAUSE_ORDER,
                                    label=f"failures by cause, per build, last "
                                          f"{len(details)} runs"),
        "bar_data": bars, "cause_order": views.CAUSE_ORDER,
        "cautions": list(cautions.values()), "brief_tests": [x.test_id for x in flaky]})


# --- 4. a record ----------------------------------------------------------------------


def record_page(m: Memidex, r: Req) -> Page:
    from memidex.records.transitions import TRANSITIONS

    shown = m.show(r.path["record_id"])
    rec = shown.record
    series = m.trust_series(rec.id)
    rows, details = _window(m, rec.product, RUN_WINDOW)
    served: dict[str, list[str]] = {}
    for d in details:
        for t in d.tests:
            if rec.id in t.served_records or rec.id in t.briefed:
                served.setdefault(t.test_id, []).append(d.run_id)
    points = [charts.LinePoint(p.ordinal, p.value, p.version, p.status)
              for p in series.points]
    versions = [*((h.valid, h.title, *h.resolved(rec)) for h in rec.history),
                (rec.valid, rec.title, rec.trust, rec.anchors, rec.status)]
    return Page("record.html", rec.title, {
        "shown": shown, "rec": rec, "data": shown.to_json(), "product": rec.product,
        "series": series, "versions": versions,
        "chart": charts.trust_line(points, label=f"trust of {rec.id} by run ordinal"),
        "served": served, "window": len(details),
        "actions": [a for a in ACTIONS if rec.status in TRANSITIONS[a]]})


def record_action(m: Memidex, r: Req) -> Redirect:
    action = r.path["action"]
    rid = r.path["record_id"]
    if action not in ACTIONS:
        raise NotFoundError(f"no action {action[:40]!r}: use {', '.join(ACTIONS)}")
    result = getattr(m, action)(rid)
    return Redirect(f"/records/{_p(result.id)}", f"{action}: {result.change} "
                    f"({result.status})")


def records_page(m: Memidex, r: Req) -> Page:
    """``knowledge list``; without a filter, the candidates (the records waiting for a
    person): listing every record of a large product sorts all of them (~0.1 s at
    100,000 records), so that is asked for (``status=any``), not the default."""
    product = _product(m, r)
    kinds, statuses = r.args("kind"), r.args("status")
    if not kinds and not statuses:
        statuses = ["candidate"]
    limit = r.number("limit", 200, 1, 5000)
    listing = m.list_records(product=product, kinds=kinds, statuses=statuses or None,
                             limit=limit)
    return Page("records.html", f"{product} — records", {
        "product": product, "rows": listing.records, "kinds": kinds, "statuses": statuses,
        "limit": limit})


# --- 5. proposals ---------------------------------------------------------------------


def proposals_page(m: Memidex, r: Req) -> Page:
    listing = m.proposals()
    return Page("proposals.html", "proposals", {"listing": listing,
                                                "product": r.arg("product")})


def proposal_page(m: Memidex, r: Req) -> Page:
    pid = r.path["pid"]
    listing = m.proposals()
    p = next((x for x in listing.proposals if x.id == pid), None)
    if p is None:
        raise NotFoundError(f"no proposal {pid[:60]}",
                            hint="it was accepted or rejected, or never made: see /proposals")
    try:
        shown = m.show(p.record_id)
        current: tuple[str, str] | None = (shown.record.title, shown.text)
    except NotFoundError:
        current = None
    view = views.proposal_view(current, p.text, p.path)
    return Page("proposal.html", f"proposal {p.id}", {"p": p, "view": view,
                                                      "exists": current is not None})


def decide(m: Memidex, r: Req) -> Redirect:
    pid = r.path["pid"]
    accept = r.path["decision"] == "accept"
    if r.path["decision"] not in ("accept", "reject"):
        raise NotFoundError("a proposal is accepted or rejected")
    d = m.decide_proposal(pid, accept=accept)
    return Redirect("/proposals", f"{d.decision} {d.id}: {d.op} "
                    f"{d.record_id}" + ("" if d.changed else " (nothing changed)"))


# --- 6. brief preview -----------------------------------------------------------------


def brief_page(m: Memidex, r: Req) -> Page:
    product = _product(m, r)
    rows = m.runs(product).runs
    tests: list[str] = []
    for d in _details(m, rows[-3:]):
        tests += [t.test_id for t in d.tests if t.test_id not in tests]
    test_id = r.arg("test") or (tests[0] if tests else None)
    ctx: dict[str, Any] = {"product": product, "tests": tests, "test_id": test_id,
                           "anchors": r.args("anchor")}
    if test_id is None:
        return Page("brief.html", f"{product} — brief", {**ctx, "now": None, "then": None})
    now = m.brief(test_id, product=product, anchors=r.args("anchor"), explain=True,
                  record=False)
    builds = [x for x in rows if x.build_tag == rows[-1].build_tag] if rows else []
    default_at = builds[0].ordinal if builds else max(0, now.next_ordinal - 1)
    at = r.number("at", default_at, 0, now.next_ordinal)
    then = m.brief(test_id, product=product, anchors=r.args("anchor"), at=at, explain=True,
                   record=False)
    now_ids, then_ids = set(now.ids), set(then.ids)
    return Page("brief.html", f"{product} — brief for {test_id}", {
        **ctx, "now": now, "then": then, "at": at, "only_now": now_ids - then_ids,
        "only_then": then_ids - now_ids})


# --- 7. search ------------------------------------------------------------------------


def search_page(m: Memidex, r: Req) -> Page:
    product = _product(m, r)
    text = r.arg("q")
    ctx: dict[str, Any] = {"product": product, "q": text or "", "kinds": r.args("kind"),
                           "statuses": r.args("status"), "near": r.args("near")}
    if text is None:
        return Page("search.html", f"{product} — search", {**ctx, "result": None})
    limit = r.number("limit", 10, 1, 200)
    assert limit is not None
    result = m.search(text, product=product, kinds=r.args("kind"),
                      statuses=r.args("status") or None, near=r.args("near"), limit=limit)
    return Page("search.html", f"{product} — search: {text}", {
        **ctx, "result": result, "limit": limit, "highlight": views.highlight})


ROUTES: tuple[tuple[str, Any, str], ...] = (
    ("/", overview, "GET"),
    ("/health", health, "GET"),
    ("/runs", runs_page, "GET"),
    ("/runs/{run_id}", run_page, "GET"),
    ("/runs/{run_id}/rollback", rollback_form, "GET"),
    ("/runs/{run_id}/rollback", rollback, "POST"),
    ("/builds/{tag}", build_page, "GET"),
    ("/flaky", flaky_page, "GET"),
    ("/records", records_page, "GET"),
    ("/records/{record_id}", record_page, "GET"),
    ("/records/{record_id}/{action}", record_action, "POST"),
    ("/proposals", proposals_page, "GET"),
    ("/proposals/{pid}", proposal_page, "GET"),
    ("/proposals/{pid}/{decision}", decide, "POST"),
    ("/brief", brief_page, "GET"),
    ("/search", search_page, "GET"),
)
"""(path, page, method): every page of the dashboard."""
