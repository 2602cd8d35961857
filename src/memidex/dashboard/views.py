"""Pure view models: the facade's typed results arranged for a page. No I/O, no facade.

What is counted here is counted from the results the pages were given — each a value the
CLI prints with ``--json`` (``runs show``, ``runs list``, ``knowledge diff``, ``brief``) —
so a test can count the same from the CLI's output and compare.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from markupsafe import Markup, escape

from memidex.dashboard.charts import Bar, Cell, TimelineRun

if TYPE_CHECKING:
    from memidex.app.results import RunDetail, RunRow, RunTest

__all__ = ["CAUSE_ORDER", "FLAKY_CAUSES", "DiffLine", "FlakyRow", "ProposalView",
           "causes_by_build", "flakiness", "highlight", "line_diff", "outcome",
           "proposal_view", "run_outcome", "timeline_runs"]

CAUSE_ORDER: tuple[str, ...] = ("flaky", "environment", "test-bug", "app-bug", "unknown")
"""The causes a failure is classified as (docs/learning.md), bottom of a stacked bar
first."""
FLAKY_CAUSES = frozenset({"flaky", "environment"})


def outcome(t: RunTest) -> str:
    """A test's outcome in one run: its cause when it has one, else its verdict (an
    unclassified failure is ``unknown``)."""
    if t.cause:
        return t.cause
    if t.verdict in ("pass", "skip"):
        return t.verdict
    return "unknown"


# --- flakiness ------------------------------------------------------------------------


@dataclass(frozen=True)
class FlakyRow:
    """One test over the window of runs: how often it ran, failed as flaky or
    environment, and failed at all; its trend, oldest run first."""

    test_id: str
    ran: int
    flaky: int
    failed: int
    causes: Mapping[str, int]
    cells: tuple[Cell, ...]
    window: int

    @property
    def label(self) -> str:
        """The microsoft/testfx form: "failed 3/20 in the last 20 runs"."""
        return f"failed {self.flaky}/{self.ran} in the last {self.window} runs"


def flakiness(details: Sequence[RunDetail]) -> list[FlakyRow]:
    """Every test of ``details`` (runs in ordinal order), ranked by failures as flaky or
    environment, then by failures of any cause, then by test id."""
    window = len(details)
    seen: dict[str, list[tuple[int, RunTest]]] = {}
    for i, d in enumerate(details):
        for test in d.tests:
            seen.setdefault(test.test_id, []).append((i, test))
    rows = []
    for test_id, runs in seen.items():
        by_run = dict(runs)
        causes: dict[str, int] = {}
        cells = []
        for i, d in enumerate(details):
            t = by_run.get(i)
            if t is None:
                cells.append(Cell("absent", f"{d.run_id} (ordinal {d.ordinal}): not run"))
                continue
            o = outcome(t)
            if o not in ("pass", "skip"):
                causes[o] = causes.get(o, 0) + 1
            cells.append(Cell(o, f"{d.run_id} (ordinal {d.ordinal}, build "
                                 f"{d.build_tag or '-'}): {t.verdict}"
                                 + (f", {t.cause}" if t.cause else "")))
        flaky = sum(n for c, n in causes.items() if c in FLAKY_CAUSES)
        rows.append(FlakyRow(test_id, len(runs), flaky, sum(causes.values()),
                             dict(sorted(causes.items())), tuple(cells), window))
    rows.sort(key=lambda r: (-r.flaky, -r.failed, r.test_id))
    return rows


def causes_by_build(details: Sequence[RunDetail]) -> list[Bar]:
    """Per build (in the order of its first run), how many failures of each cause its
    runs had."""
    bars: dict[str, dict[str, int]] = {}
    for d in details:
        parts = bars.setdefault(d.build_tag or "(no build)", {})
        for t in d.tests:
            o = outcome(t)
            if o not in ("pass", "skip"):
                parts[o] = parts.get(o, 0) + 1
    return [Bar(tag, parts) for tag, parts in bars.items()]


# --- runs on a timeline ---------------------------------------------------------------


def run_outcome(row: RunRow) -> str:
    """A run's dot: ``rolled-back``, ``fail`` (any test failed), ``skip`` (none ran) or
    ``pass``."""
    if row.rolled_back:
        return "rolled-back"
    if row.verdicts.get("fail", 0) or row.verdicts.get("error", 0):
        return "fail"
    if row.verdicts and set(row.verdicts) == {"skip"}:
        return "skip"
    return "pass"


def verdict_text(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "no tests"


def timeline_runs(rows: Iterable[RunRow], href: str) -> list[TimelineRun]:
    """The runs as timeline dots; ``href`` is formatted with the run id."""
    out = []
    for r in rows:
        taught = ", ".join(f"{n} {op}" for op, n in r.changes.items()) or "nothing"
        out.append(TimelineRun(
            r.ordinal, r.build_tag, run_outcome(r),
            f"{r.run_id}, ordinal {r.ordinal}, build {r.build_tag or '-'}"
            f"{' (CI)' if r.ci else ''}: {verdict_text(r.verdicts)}; taught {taught}"
            + (" (rolled back)" if r.rolled_back else ""),
            href.format(r.run_id)))
    return out


# --- text -----------------------------------------------------------------------------


def highlight(snippet: str) -> Markup:
    """A search snippet as HTML: escaped, the «matched» words in ``<mark>`` (markers
    that do not pair up are shown as they are)."""
    text = str(escape(snippet))
    if text.count("«") == text.count("»") and text.find("»") >= text.find("«"):
        depth = 0
        out = []
        for ch in text:
            if ch == "«" and depth == 0:
                out.append("<mark>")
                depth = 1
            elif ch == "»" and depth == 1:
                out.append("</mark>")
                depth = 0
            else:
                out.append(ch)
        if depth == 0:
            return Markup("".join(out))
    return Markup(text)


@dataclass(frozen=True)
class DiffLine:
    """One line of a diff: ``+`` added, ``-`` removed, `` `` kept, ``@`` a hunk."""

    sign: str
    text: str


def line_diff(old: str, new: str, *, context: int = 3) -> list[DiffLine]:
    """A unified diff of two texts, line by line (no file headers)."""
    out = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="",
                                     n=context):
        if line.startswith(("---", "+++")):
            continue
        sign = "@" if line.startswith("@@") else line[:1]
        out.append(DiffLine(sign, line[1:] if sign != "@" else line))
    return out


@dataclass(frozen=True)
class ProposalView:
    """A proposed change as a diff of the record: its title, front matter and body."""

    title_before: str | None
    title_after: str
    front: list[DiffLine] = field(default_factory=list)
    body: list[DiffLine] = field(default_factory=list)

    @property
    def title_changed(self) -> bool:
        return self.title_before != self.title_after


def _split(text: str, path: str) -> tuple[str, str, str]:
    """(front matter without the title line, body, title) of a record's text."""
    from memidex.records.codec import split_front_matter

    front, body, _ = split_front_matter(text, path)
    title = ""
    kept = []
    for line in front.splitlines():
        if line.startswith("title:") and not title:
            title = line
        else:
            kept.append(line)
    return "\n".join(kept), body, title


def proposal_view(current: tuple[str, str] | None, proposed_text: str, path: str
                  ) -> ProposalView:
    """``current``: (the record's title, its text) now, or None when the proposal adds it."""
    from memidex.records.codec import parse_record_bytes

    after = parse_record_bytes(proposed_text.encode("utf-8"), path)
    new_front, new_body, _ = _split(proposed_text, path)
    if current is None:
        return ProposalView(None, after.title, line_diff("", new_front),
                            line_diff("", new_body))
    old_title, old_text = current
    old_front, old_body, _ = _split(old_text, path)
    return ProposalView(old_title, after.title, line_diff(old_front, new_front),
                        line_diff(old_body, new_body))
