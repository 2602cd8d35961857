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

In code: ``score(without_inventory=False) -> Scoreboard`` (``board.py``); its ``targets``
are the issue's targets, ``render()`` the printed scoreboard.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from board import ChangeLag, Failure, Scoreboard, Served, as_json, targets
from truth import Change, Truth, TruthError, load_truth  # beside this file (on sys.path)

from memidex.errors import MemidexError

HERE = Path(__file__).resolve().parent
REPORTS = HERE / "reports"
TRUTH = HERE / "truth.yaml"
RECORDS = Path("agent-qa-knowledge/memory/records")
"""Where memidex keeps a record (docs/records.md): only read to tell whether a record
changed since it was last shown."""


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


def local_env() -> dict[str, str]:
    """The environment memidex runs in for the loop: this one without ``CI`` and
    ``MEMIDEX_*``. The recorded runs are a developer's runs on their machine: under a CI
    job (``CI=true``) every ingest would be a CI run, which never promotes a record, and
    no brief would serve one."""
    return {k: v for k, v in os.environ.items()
            if k != "CI" and not k.startswith("MEMIDEX_")}


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


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
                                  capture_output=True, text=True, check=False,
                                  env=local_env())
            code, out, err = done.returncode, done.stdout, done.stderr
        else:
            from memidex.cli.main import main

            o, e = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e), \
                    _environment(local_env()):
                code = main(argv)
            out, err = o.getvalue(), e.getvalue()
        if code != 0:
            raise ScoreError(f"memidex {' '.join(args)} exited {code}: "
                             f"{err.strip().splitlines()[0] if err.strip() else out[:200]}")
        value = json.loads(out)
        if not isinstance(value, dict):
            raise ScoreError(f"memidex {' '.join(args)} printed no JSON object")
        return value


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
        self.levels: dict[str, int] = {}
        self.withheld: dict[str, int] = {}
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
            brief = self.cli(*args)
            level = str(brief.get("level"))
            self.levels[level] = self.levels.get(level, 0) + 1
            for why, held in (brief.get("withheld") or {}).items():
                self.withheld[why] = self.withheld.get(why, 0) + int(held.get("count", 0))
            for rec in brief["records"]:
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


SCRATCH_MIN_FREE = 1 << 30
"""/dev/shm is used only with this much free (a container's is often 64 MB)."""


def _scratch() -> str | None:
    """Where the scratch repository goes: /dev/shm when it is there with room to spare
    (memory: memidex's fsyncs cost nothing, and a shared disk's load does not slow the
    score), else the temporary folder."""
    shm = Path("/dev/shm")
    try:
        st = os.statvfs(shm)
    except OSError:
        return None
    roomy = st.f_bavail * st.f_frsize >= SCRATCH_MIN_FREE
    return str(shm) if roomy and os.access(shm, os.W_OK) else None


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
            levels=loop.levels, withheld=loop.withheld,
            first_of_build=[r.run for i, r in enumerate(runs)
                            if i > 0 and runs[i - 1].build != r.build])
    board.targets = targets(board)
    return board


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
