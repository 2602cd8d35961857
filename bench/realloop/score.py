"""Score what memidex learns from the real loop's recorded runs against the ground truth
(docs/realloop.md).

    python bench/realloop/score.py [--without-inventory] [--json] [--subprocess]

In a fresh git repository in a temporary folder (``memidex init --product roombook``) the
recorded reports (``reports/runs.yaml``, in order) are ingested one by one with their
build tags, and before each run k ≥ 2 — and once after the last — every test of the suite
gets its brief (``memidex brief TEST --json --no-record --anchor PAGE…``). Each record
served is judged against the truth of run k's build (``truth.yaml``, ``truth.py``), and
every failure of every run against what the truth says caused it. ``--without-inventory``
leaves the observing test out of every report before it is ingested, so the case "without
an observing test" is scored from the same recordings. memidex is driven through its CLI's
``--json`` output (the stable contract): in this process by default (``memidex.cli.main``,
fast), or one subprocess per command with ``--subprocess``.

In code: ``score(without_inventory=False) -> Scoreboard``; ``Scoreboard.targets`` are the
issue's targets, ``Scoreboard.render()`` the printed scoreboard.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import math
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from truth import Change, Truth, TruthError, load_truth  # beside this file (on sys.path)

from memidex.errors import MemidexError

HERE = Path(__file__).resolve().parent
REPORTS = HERE / "reports"
TRUTH = HERE / "truth.yaml"
RECORDS = Path("agent-qa-knowledge/memory/records")
"""Where memidex keeps a record (docs/records.md): only read to tell whether a record
changed since it was last shown."""

FACT_TARGET = 0.95
BUG_TARGET = 10 / 12
OUTAGE_TARGET = 0.90


class ScoreError(MemidexError):
    """memidex answered a command of the scorer with an error."""


@dataclass(frozen=True)
class RunEntry:
    """One recorded run of reports/runs.yaml."""

    run: int
    build: int
    tag: str
    outage: bool
    report: Path


def load_manifest(path: Path) -> tuple[str, list[RunEntry]]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        runs = [RunEntry(int(r["run"]), int(r["build"]), str(r["build_tag"]),
                         bool(r["outage"]), path.parent / str(r["report"]))
                for r in raw["runs"]]
        product = str(raw["product"])
    except OSError as exc:
        raise TruthError(f"{path}: cannot read it ({exc.strerror})") from None
    except (yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise TruthError(f"{path}: not a runs manifest ({type(exc).__name__}: {exc})") from None
    if [r.run for r in runs] != sorted(r.run for r in runs) or not runs:
        raise TruthError(f"{path}: the runs are not in order (or there are none)")
    for r in runs:
        if not r.report.is_file():
            raise TruthError(f"{path}: run {r.run}'s report {r.report.name} is missing")
    return product, runs


class Cli:
    """memidex's CLI with ``--json``: one JSON object per command."""

    def __init__(self, root: Path, *, as_subprocess: bool = False) -> None:
        self.root, self.as_subprocess = root, as_subprocess
        self.calls = 0

    def __call__(self, *args: str) -> dict[str, Any]:
        argv = ["--root", str(self.root), *args]
        self.calls += 1
        if self.as_subprocess:
            done = subprocess.run([sys.executable, "-m", "memidex", *argv],
                                  capture_output=True, text=True, check=False)
            code, out, err = done.returncode, done.stdout, done.stderr
        else:
            from memidex.cli.main import main

            o, e = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
                code = main(argv)
            out, err = o.getvalue(), e.getvalue()
        if code != 0:
            raise ScoreError(f"memidex {' '.join(args)} exited {code}: "
                             f"{err.strip().splitlines()[0] if err.strip() else out[:200]}")
        value = json.loads(out)
        if not isinstance(value, dict):
            raise ScoreError(f"memidex {' '.join(args)} printed no JSON object")
        return value


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


# -- the loop -----------------------------------------------------------------------------

def _without_inventory(report: Path, out: Path, truth: Truth) -> Path:
    """A copy of a Playwright JSON report without the inventory spec file (its stats
    counted again), so the same recording is scored as if the test had not run."""
    data = json.loads(report.read_text(encoding="utf-8"))
    files = {t.split(":", 1)[0] for t in truth.inventory}

    def keep(suite: dict[str, Any]) -> bool:
        return suite.get("file") not in files

    data["suites"] = [s for s in data.get("suites", []) if keep(s)]
    counts = {"expected": 0, "unexpected": 0, "flaky": 0, "skipped": 0}

    def walk(suite: dict[str, Any]) -> None:
        for spec in suite.get("specs", []):
            for test in spec.get("tests", []):
                if test.get("status") in counts:
                    counts[test["status"]] += 1
        for child in suite.get("suites", []):
            walk(child)

    for s in data["suites"]:
        walk(s)
    data.setdefault("stats", {}).update(counts)
    out.write_text(json.dumps(data), encoding="utf-8")
    return out


class Loop:
    """Ingest the runs in order and judge every brief served before each."""

    def __init__(self, truth: Truth, product: str, runs: list[RunEntry], cli: Cli,
                 tests: list[str]) -> None:
        self.truth, self.product, self.runs, self.cli, self.tests = (
            truth, product, runs, cli, tests)
        self.build_of_run = {r.run: r.build for r in runs}
        self.run_of_id: dict[str, int] = {}  # memidex run id → run number
        self.analysis: dict[int, dict[str, str]] = {}
        self.verdicts: dict[int, dict[str, tuple[str, bool]]] = {}  # run → test → (v, flaky)
        self.served: list[Served] = []
        self.briefs = 0
        self._shown: dict[str, tuple[str, dict[str, Any]]] = {}
        self._by_version: dict[tuple[str, Any, Any], dict[str, Any]] = {}

    def run(self, workdir: Path, without_inventory: bool) -> None:
        for i, r in enumerate(self.runs):
            if i > 0:
                self.brief_all(r.run, r.build)
            report = r.report
            if without_inventory:
                report = _without_inventory(report, workdir / report.name, self.truth)
            self.ingest(r, report)
        last = self.runs[-1]
        self.brief_all(last.run + 1, last.build)

    def ingest(self, r: RunEntry, report: Path) -> None:
        evidence = self.cli("runs", "import", str(report), "--product", self.product,
                            "--json")["evidence"]
        seen = {}
        for t in evidence["tests"]:
            if t["test_id"] not in self.truth.tests:
                raise TruthError(f"{self.truth.path}: run {r.run} has the test "
                                 f"{t['test_id']}, which `tests` lacks")
            seen[t["test_id"]] = (t["verdict"], bool(t.get("flaky")))
        self.verdicts[r.run] = seen
        out = self.cli("runs", "ingest", str(report), "--product", self.product,
                       "--build-tag", r.tag, "--json")
        self.run_of_id[out["run_id"]] = r.run
        self.analysis[r.run] = dict(out.get("analysis") or {})

    def show(self, rid: str, kind: str) -> dict[str, Any]:
        """``knowledge show RID --json``, asked again only when the record's file changed
        (an ingest rewrites the records it confirms, supersedes or contradicts)."""
        path = self.cli.root / RECORDS / kind / f"{rid}.md"
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            digest = ""
        cached = self._shown.get(rid)
        if cached is None or cached[0] != digest or not digest:
            cached = self._shown[rid] = (digest, self.cli("knowledge", "show", rid, "--json"))
        return cached[1]

    def brief_all(self, k: int, build: int) -> None:
        by_id: dict[str, Served] = {}
        for test in self.tests:
            args = ["brief", test, "--product", self.product, "--json", "--no-record"]
            for page in self.truth.pages(test, build):
                args += ["--anchor", page]
            self.briefs += 1
            for rec in self.cli(*args)["records"]:
                s = by_id.get(rec["id"])
                if s is None:
                    s = by_id[rec["id"]] = Served(k, build, rec["id"], rec["kind"],
                                                  rec["title"], [])
                    self.judge(s, rec)
                s.tests.append(test)
        self.served.extend(by_id.values())

    def _learned(self, evidence: list[dict[str, Any]]) -> list[str]:
        return [f"run {self.run_of_id.get(e.get('run', ''), '?')} {e.get('test')}"
                + (f" saw {e['observed']!r}" if e.get("observed") else "") for e in evidence]

    def judge(self, s: Served, brief_record: dict[str, Any]) -> None:
        """Judge one served record. A fact's or a caution's claim is fixed for a version of
        the record (a different claim is a new version), so a version once shown is not
        shown again — unless its judgement needs the evidence as it is now (an unknown,
        a claim stating a bug's value, anything judged wrong: its evidence is printed)."""
        if s.kind == "procedure":  # the brief's anchors are the served version's
            gone = [a for a in brief_record.get("anchors") or []
                    if (self.truth.state(a, s.build) or {}).get("exists") is False]
            s.anchor = next(iter(brief_record.get("anchors") or []), "")
            s.verdict = "stale" if gone else "current"
            s.reason = f"names {', '.join(gone)}, gone at build {s.build}" if gone else ""
            return
        version = (brief_record.get("reasons") or {}).get("version") or {}
        key = (s.id, version.get("number"), version.get("from"))
        rec = self._by_version.get(key)
        if rec is None or s.kind == "unknown":
            rec = self._by_version[key] = self.show(s.id, s.kind)
            self._judge(s, brief_record, rec)
            return
        self._judge(s, brief_record, rec)
        if s.verdict in ("false", "wrong", "unjudged") or s.bug is not None or \
                self._states_bug(s):
            rec = self._by_version[key] = self.show(s.id, s.kind)
            self._judge(s, brief_record, rec)

    def _states_bug(self, s: Served) -> bool:
        return s.kind == "fact" and \
            self.truth.bug_of_claim(s.anchor, s.check, s.observed) is not None

    def _judge(self, s: Served, brief_record: dict[str, Any], rec: dict[str, Any]) -> None:
        s.anchor = rec["anchor"]
        s.bug = None
        evidence = rec.get("evidence") or []
        if rec["title"] != brief_record["title"]:
            s.verdict, s.reason = "unjudged", "the brief served another version than show's"
            s.learned_from = self._learned(evidence)
            return
        if s.kind == "fact":
            newest = next((e for e in reversed(evidence) if e.get("check")), None)
            s.check = newest.get("check") if newest else None
            s.observed = newest.get("observed") if newest else None
            j = self.truth.judge(s.anchor, s.check, s.observed, s.build)
            s.verdict, s.aspect, s.reason = j.verdict, j.aspect, j.reason
            bug = self.truth.bug_of_claim(s.anchor, s.check, s.observed)
            if bug is not None and any(
                    self.build_of_run.get(self.run_of_id.get(e.get("run", ""), 0)) in bug.builds
                    for e in evidence):
                s.bug = bug.id
        elif s.kind == "caution":
            newest = evidence[-1] if evidence else {}
            run = self.run_of_id.get(newest.get("run", ""))
            s.cause = self.analysis.get(run or 0, {}).get(newest.get("test", ""))
            s.verdict, s.reason = self._caution(s.anchor, s.cause)
        elif s.kind == "unknown":
            for bug in self.truth.bugs:
                if any(self.build_of_run.get(self.run_of_id.get(e.get("run", ""), 0))
                       in bug.builds and e.get("test") in bug.tests for e in evidence):
                    s.bug = bug.id
            s.reason = (f"raised by the bug {s.bug}" if s.bug else
                        "raised by no real bug (an outage, a slow element or a change)")
        wrong = s.verdict in ("false", "wrong", "unjudged") or s.bug is not None
        s.learned_from = self._learned(evidence) if wrong or s.kind == "unknown" else []

    def _caution(self, anchor: str, cause: str | None) -> tuple[str, str]:
        t = self.truth
        if cause == "flaky":
            ok = anchor in t.flaky or anchor in {f"test:{x}" for ts in t.flaky.values()
                                                   for x in ts}
            return ("right", "a slow element") if ok else (
                "wrong", f"a flaky caution, but {anchor} is not a slow element")
        if cause == "environment":
            ok = anchor in t.outage_anchors or anchor in {f"test:{x}" for x in t.outage_tests}
            return ("right", "the outage") if ok else (
                "wrong", f"an environment caution, but {anchor} is not what the outage hits")
        return "unjudged", f"the cause of the failure it was learned from is {cause!r}"

    # -- after the loop ---------------------------------------------------------------

    def failures(self) -> list[Failure]:
        out = []
        slow = {x: a for a, ts in self.truth.flaky.items() for x in ts}
        for r in self.runs:
            for test, (verdict, flaky) in self.verdicts[r.run].items():
                if verdict == "pass" and not flaky:
                    continue
                bug = next((b for b in self.truth.bugs
                            if r.build in b.builds and test in b.tests), None)
                if bug is not None:
                    why = f"bug:{bug.id}"
                elif r.run in self.truth.outage_runs and test in self.truth.outage_tests:
                    why = "outage"
                elif test in slow:
                    why = f"slow:{slow[test]}"
                else:
                    why = "unexplained"
                out.append(Failure(r.run, r.build, test, "pass, flaky" if flaky else verdict,
                                   why, self.analysis[r.run].get(test)))
        return out

    def changes(self) -> list[ChangeLag]:
        facts = [s for s in self.served if s.kind == "fact"]
        out = []
        ks = sorted({s.k for s in self.served} | {r.run for r in self.runs[1:]}
                    | {self.runs[-1].run + 1})
        for c in self.truth.changes:
            window = [k for k in ks if c.from_build <= self._build_at(k) <= c.until_build]
            if not window:
                continue
            if c.added:
                served_in: list[int] = []
                stopped: int | None = 0
            else:
                served_in = sorted({s.k for s in facts
                                    if s.k in window[1:] and self._old_claim(c, s)})
                stopped = (None if served_in and served_in[-1] == window[-1]
                           else (window.index(served_in[-1]) if served_in else 0))
            first_new = min((s.k for s in facts if s.k in window and s.anchor == c.anchor
                             and s.verdict == "true" and (c.added or self.truth.claim(
                                 s.check, s.observed)[0] == c.aspect)), default=None)
            out.append(ChangeLag(c.label, window[0], served_in, stopped, first_new,
                                 "gone" if c.gone else "added" if c.added else "value",
                                 any(s.anchor == c.anchor for s in facts)))
        return out

    def _old_claim(self, c: Change, s: Served) -> bool:
        """Whether the served fact ``s`` states what ``c`` changed (any claim about an
        anchor that is gone)."""
        if s.anchor != c.anchor:
            return False
        if c.gone:
            return True
        aspect, value = self.truth.claim(s.check, s.observed)
        return aspect == c.aspect and _equal(value, c.old)

    def _build_at(self, k: int) -> int:
        return self.build_of_run.get(k, self.runs[-1].build)

    def uncautioned(self) -> list[str]:
        """Briefs of a slow element's tests without a flaky caution on it, from the run
        after the second run it failed in (memidex needs two to promote a record)."""
        out = []
        cautions: dict[tuple[int, str], set[str]] = defaultdict(set)
        for s in self.served:
            if s.kind == "caution" and s.cause == "flaky":
                for test in s.tests:
                    cautions[(s.k, test)].add(s.anchor)
        for anchor, tests in self.truth.flaky.items():
            flaked = [r.run for r in self.runs
                      if any(self.verdicts[r.run].get(t, ("pass", False)) != ("pass", False)
                             for t in tests)]
            if len(flaked) < 2:
                continue
            for k in sorted({s.k for s in self.served} | {self.runs[-1].run + 1}):
                if k <= flaked[1]:
                    continue
                for test in tests:
                    if test not in self.tests:
                        continue
                    if not cautions[(k, test)] & {anchor, f"test:{test}"}:
                        out.append(f"run {k}: {test} gets no flaky caution on {anchor} "
                                   f"(it flaked in runs {', '.join(map(str, flaked))})")
        return out

    def fixed_unknowns(self) -> list[Served]:
        """Unknowns of a fixed bug served after its tests passed in two runs since."""
        out = []
        for s in self.served:
            if s.kind != "unknown" or s.bug is None:
                continue
            bug = next(b for b in self.truth.bugs if b.id == s.bug)
            passes = [r.run for r in self.runs if r.run < s.k and r.build > max(bug.builds)
                      and all(self.verdicts[r.run].get(t, ("fail", False)) == ("pass", False)
                              for t in bug.tests)]
            if len(passes) >= 2:
                s.reason = (f"the bug {bug.id} is fixed and its tests had passed in runs "
                            f"{passes[0]} and {passes[1]}")
                out.append(s)
        return out


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return " ".join(str(a).split()) == " ".join(str(b).split())


def _scratch() -> str | None:
    """Where the scratch repository goes: /dev/shm when it is there (memory: memidex's
    fsyncs cost nothing, and a shared disk's load does not slow the score), else the
    temporary folder."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def score(reports: Path = REPORTS, truth_path: Path = TRUTH, *,
          without_inventory: bool = False, as_subprocess: bool = False) -> Scoreboard:
    """Ingest the recorded runs into a fresh repository and judge everything served."""
    truth = load_truth(truth_path)
    product, runs = load_manifest(reports / "runs.yaml")
    if product != truth.product:
        raise TruthError(f"{truth.path}: product {truth.product!r}, the manifest's is "
                         f"{product!r}")
    outages = tuple(r.run for r in runs if r.outage)
    if outages != truth.outage_runs:
        raise TruthError(f"{truth.path}: outage runs {list(truth.outage_runs)}, the "
                         f"manifest's are {list(outages)}")
    for r in runs:
        if r.build not in truth.builds:
            raise TruthError(f"{truth.path}: run {r.run} is of build {r.build}, which "
                             "`builds` lacks")
    tests = [t for t in truth.tests if not (without_inventory and t in truth.inventory)]
    with tempfile.TemporaryDirectory(prefix="realloop-", dir=_scratch()) as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        cli = Cli(root, as_subprocess=as_subprocess)
        cli("init", "--product", product, "--json")
        loop = Loop(truth, product, runs, cli, tests)
        loop.run(Path(tmp), without_inventory)
        board = Scoreboard(
            variant="without the inventory test" if without_inventory
            else "with the inventory test",
            product=product, runs=len(runs), briefs=loop.briefs, commands=cli.calls,
            served=loop.served, failures=loop.failures(), changes=loop.changes(),
            uncautioned=loop.uncautioned(), fixed_unknowns=loop.fixed_unknowns(),
            first_of_build=[r.run for i, r in enumerate(runs)
                            if i > 0 and runs[i - 1].build != r.build])
    board.targets = targets(board)
    return board


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


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--without-inventory", action="store_true",
                        help="leave the observing test out of every report")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--subprocess", action="store_true",
                        help="run each memidex command as its own process")
    parser.add_argument("--reports", type=Path, default=REPORTS)
    parser.add_argument("--truth", type=Path, default=TRUTH)
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        board = score(args.reports, args.truth, without_inventory=args.without_inventory,
                      as_subprocess=args.subprocess)
    except MemidexError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return int(exc.exit_code)
    print(json.dumps(as_json(board), indent=1, ensure_ascii=False) if args.json
          else board.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
