"""The real loop's scoreboard: what score.py collects, its targets and the
printed scoreboard (docs/realloop.md)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

FACT_TARGET = 0.95
BUG_TARGET = 10 / 12
OUTAGE_TARGET = 0.90


# -- what the loop collects ---------------------------------------------------------------

@dataclass
class Served:
    """One record served before one run (to one or more tests), and its judgement."""

    k: int  # the run the brief was for (len(runs) + 1: after the last run)
    build: int
    id: str
    kind: str
    title: str
    tests: list[str]
    anchor: str = ""
    check: str | None = None
    observed: str | None = None
    aspect: str | None = None
    verdict: str = ""  # fact: true/false/unjudged; caution: right/wrong/unjudged
    cause: str | None = None  # caution: the cause of the failure it was learned from
    reason: str = ""
    # the evidence behind a wrong item or an unknown: "run N TEST saw 'OBSERVED'"
    learned_from: list[str] = field(default_factory=list)
    bug: str | None = None  # fact: the bug whose wrong value it states; unknown: its bug


@dataclass
class Failure:
    """A test that failed (or needed a retry) in a run, what the truth says caused it, and
    what memidex's analysis said."""

    run: int
    build: int
    test: str
    verdict: str  # fail, or pass with flaky
    truth: str  # bug:<id>, outage, slow:<anchor>, or unexplained
    cause: str | None


@dataclass
class ChangeLag:
    change: str
    first_run: int
    served_in: list[int]  # runs k > first_run of the window whose brief served the old claim
    runs_until_stopped: int | None  # None: still served at the end of the window
    new_served_from: int | None  # the first run whose brief served a true fact of the new
    kind: str = "value"  # value, gone or added
    ever_claimed: bool = True  # whether any brief served a fact about the anchor at all


@dataclass
class Target:
    name: str
    ok: bool
    figure: str
    goal: str


@dataclass
class Scoreboard:
    variant: str
    product: str
    runs: int
    briefs: int
    commands: int
    served: list[Served]
    failures: list[Failure]
    changes: list[ChangeLag]
    uncautioned: list[str]  # "run k: test lacks a flaky caution on anchor"
    fixed_unknowns: list[Served]
    first_of_build: list[int] = field(default_factory=list)  # the first run of builds 2…
    levels: dict[str, int] = field(default_factory=dict)  # the briefs' search levels
    withheld: dict[str, int] = field(default_factory=dict)  # records withheld, by reason
    targets: list[Target] = field(default_factory=list)

    def of(self, kind: str, verdict: str | None = None) -> list[Served]:
        return [s for s in self.served if s.kind == kind
                and (verdict is None or s.verdict == verdict)]

    def target(self, name: str) -> Target:
        return next(t for t in self.targets if t.name == name)

    def render(self) -> str:
        return render(self)


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} = {100 * n / d:.1f} %" if d else "0/0"


# -- targets and the scoreboard --------------------------------------------------------------

def targets(b: Scoreboard) -> list[Target]:
    facts = [s for s in b.of("fact") if s.verdict in ("true", "false")]
    true = sum(s.verdict == "true" for s in facts)
    bug_f = [f for f in b.failures if f.truth.startswith("bug:")]
    outage_f = [f for f in b.failures if f.truth == "outage"]
    env = sum(f.cause == "environment" for f in outage_f)
    flaky_outage = sum(f.cause == "flaky" for f in outage_f)
    late = [c for c in b.changes if c.runs_until_stopped != 0]
    wrong_flaky = [s for s in b.of("caution", "wrong") if s.cause == "flaky"]
    unexplained = [f for f in b.failures if f.truth == "unexplained"]
    bug_facts = [s for s in b.of("fact") if s.bug]
    return [
        Target("facts", bool(facts) and true / len(facts) >= FACT_TARGET,
               _pct(true, len(facts)), f"≥ {FACT_TARGET:.0%} of served facts true"),
        Target("changes", not late, f"{len(late)} of {len(b.changes)} changes late",
               "no old claim served after the first run that shows the change"),
        Target("bug-failures", bool(bug_f) and
               sum(f.cause == "app-bug" for f in bug_f) >= math.ceil(BUG_TARGET * len(bug_f)),
               _pct(sum(f.cause == "app-bug" for f in bug_f), len(bug_f)),
               f"≥ {math.ceil(BUG_TARGET * len(bug_f))} of {len(bug_f)} real-bug "
               "failures app-bug"),
        Target("outage-failures", bool(outage_f) and env / len(outage_f) >= OUTAGE_TARGET
               and flaky_outage == 0, f"{_pct(env, len(outage_f))} environment, "
               f"{flaky_outage} flaky", f"≥ {OUTAGE_TARGET:.0%} environment, none flaky"),
        Target("bugs-as-facts", not bug_facts, f"{len(bug_facts)} served",
               "no bug served as a fact"),
        Target("flaky-cautions", not wrong_flaky, f"{len(wrong_flaky)} served",
               "no flaky caution on an element that is not flaky"),
        Target("flaky-cautioned", not b.uncautioned, f"{len(b.uncautioned)} briefs without",
               "every slow element cautioned to its tests from its second flake on"),
        Target("fixed-unknowns", not b.fixed_unknowns, f"{len(b.fixed_unknowns)} served",
               "no unknown of a fixed bug after two passing runs"),
        Target("explained", not unexplained, f"{len(unexplained)} failures",
               "every failure explained by the truth (a check of the recordings)"),
    ]


def render(b: Scoreboard) -> str:
    lines = [f"memidex real loop: {b.product}, {b.runs} runs, {b.variant} "
             f"({b.briefs} briefs, {b.commands} memidex commands)", ""]
    for t in b.targets:
        lines.append(f"  {'ok    ' if t.ok else 'MISSED'}  {t.name:16s} {t.figure:28s} "
                     f"target: {t.goal}")
    facts = b.of("fact")
    unjudged = b.of("fact", "unjudged")
    cautions = b.of("caution")
    later = [s for s in facts if s.k not in b.first_of_build and s.verdict != "unjudged"]
    judged = [s for s in facts if s.verdict != "unjudged"]
    lines += ["", "served facts true, counted once per test served to: " + _pct(
        sum(len(s.tests) for s in judged if s.verdict == "true"),
        sum(len(s.tests) for s in judged)),
        "served facts true, leaving out the brief before the first run of each build "
        "(which cannot know the build yet): "
        + _pct(sum(s.verdict == "true" for s in later), len(later))]
    lines += [f"served (per run, distinct records): {len(facts)} facts "
              f"({len(unjudged)} unjudged), {len(cautions)} cautions "
              f"({len(b.of('caution', 'right'))} right, {len(b.of('caution', 'wrong'))} "
              f"wrong, {len(b.of('caution', 'unjudged'))} unjudged), "
              f"{len(b.of('unknown'))} unknowns ({sum(1 for s in b.of('unknown') if s.bug)} "
              f"of real bugs), {len(b.of('procedure'))} procedures "
              f"({len(b.of('procedure', 'stale'))} naming a page or element that is gone)"]
    lines.append("briefs by search level: " + (", ".join(
        f"{k} {n}" for k, n in sorted(b.levels.items())) or "none") + "; withheld: " + (
        ", ".join(f"{k} {n}" for k, n in sorted(b.withheld.items()) if n) or "none"))
    by: dict[str, dict[str | None, int]] = defaultdict(lambda: defaultdict(int))
    for f in b.failures:
        by[f.truth.split(":")[0]][f.cause] += 1
    lines.append("failures by what caused them → memidex's analysis: " + "; ".join(
        f"{k} {sum(v.values())}: " + ", ".join(f"{c} {n}" for c, n in sorted(
            v.items(), key=lambda x: str(x[0]))) for k, v in sorted(by.items())))
    lines += ["", "changed facts (runs until the old claim stops being served, from the "
              "first run of the build that changes it):"]
    for c in b.changes:
        if not c.ever_claimed:
            lines.append(f"  {c.change}: no served fact ever named it")
            continue
        if c.kind == "added":
            lines.append(f"  {c.change}: " + (
                f"a fact about it served from run {c.new_served_from}"
                if c.new_served_from else "no fact about it served in the window"))
            continue
        when = ("still served at the end" if c.runs_until_stopped is None
                else f"{c.runs_until_stopped}")
        extra = f" (served before runs {', '.join(map(str, c.served_in))})" \
            if c.served_in else ""
        new = "" if c.kind == "gone" else (
            f"; the new value served from run {c.new_served_from}"
            if c.new_served_from else "; the new value never served")
        lines.append(f"  {c.change}: {when}{extra}{new}")
    lines += ["", "why — every wrong item:"]
    lines += _wrong(b)
    return "\n".join(lines)


def _wrong(b: Scoreboard) -> list[str]:
    """Every wrong item, one line per record (with the runs it was served before) or per
    test and cause (with the runs it failed in)."""
    groups: dict[tuple[str, str, str], list[tuple[Served, str]]] = {}

    def item(tag: str, s: Served, why: str) -> None:
        groups.setdefault((tag, s.id, s.title), []).append((s, why))

    for s in b.of("fact", "false"):
        item("false fact", s, f"claims `{s.check}` {s.observed!r}; {s.reason}")
    for s in b.of("fact", "unjudged"):
        item("unjudged fact", s, s.reason)
    for s in b.of("fact"):
        if s.bug:
            item("bug as fact", s, f"states the wrong value of the bug {s.bug}")
    for s in b.of("caution", "wrong") + b.of("caution", "unjudged"):
        item(f"{s.verdict} caution", s, s.reason)
    for s in b.fixed_unknowns:
        item("unknown of a fixed bug", s, s.reason)
    out: list[str] = []
    for (tag, rid, title), items in groups.items():
        whys = list(dict.fromkeys(w for _, w in items))
        widest = max((s for s, _ in items), key=lambda s: len(s.tests))
        last = items[-1][0]
        out.append(f"  [{tag}] {rid} “{title}” — {'; '.join(whys)}; served before runs "
                   f"{', '.join(str(s.k) for s, _ in items)}, to up to {len(widest.tests)} "
                   f"test(s) ({', '.join(widest.tests[:3])}"
                   f"{'…' if len(widest.tests) > 3 else ''}); learned from "
                   f"{'; '.join(last.learned_from[-3:])}")
    out += [f"  [no caution] {line}" for line in b.uncautioned]
    failed: dict[tuple[str, str, str | None], list[int]] = {}
    for f in b.failures:
        if f.truth.startswith("bug:") and f.cause != "app-bug":
            failed.setdefault(("bug failure", f"{f.test} ({f.truth})", f.cause), []).append(f.run)
        elif f.truth == "outage" and f.cause != "environment":
            failed.setdefault(("outage failure", f.test, f.cause), []).append(f.run)
        elif f.truth == "unexplained":
            failed.setdefault(("unexplained failure", f.test, f.verdict), []).append(f.run)
    out += [f"  [{tag}] {test} analysed {cause} in runs {', '.join(map(str, runs))}"
            for (tag, test, cause), runs in failed.items()]
    return out or ["  (none)"]


def as_json(b: Scoreboard) -> dict[str, Any]:
    return asdict(b)
