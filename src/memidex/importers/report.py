"""Test-runner reports → run evidence (docs/import.md); :mod:`memidex.importers` exports
this module's names, imported on first use.

:func:`import_report` reads a Playwright JSON report (1.28 onwards) or a JUnit XML file
(pytest, Maven Surefire, Playwright's junit reporter) and returns SPEC §3 run evidence:
one evidence test per runner test, its verdict the runner's own, retries kept as
attempts, locators in errors turned into anchors (``locators.py`` holds the table), the
report machine's paths made repository-relative or redacted, secrets masked. The report
is read as a stream (one spec, or one ``<testcase>``, at a time), so a 50 MB report is
never held in memory whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memidex.errors import UsageError
from memidex.evidence import (
    BUILD_TAG_PATTERN,
    RUN_ID_PATTERN,
    Run,
    TestResult,
)
from memidex.importers.build import Builder
from memidex.importers.common import (
    SECRET_MARK,
    Cleaner,
    EmptyReportError,
    RawTest,
    ReportError,
    TestIds,
    strip_ansi,
    unreadable,
)
from memidex.importers.ctrf import CtrfRead, read_ctrf
from memidex.importers.detect import FORMATS, MAX_REPORT_BYTES, check_size, probe
from memidex.importers.junit import JunitRead, read_junit
from memidex.importers.paths import MachinePaths
from memidex.importers.playwright import COUNTED, PlaywrightRead, read_playwright
from memidex.masking import Masker
from memidex.records.ids import PRODUCT_RE

__all__ = ["ImportResult", "import_report", "report_run_id"]

MAX_TESTS = 100_000
COUNT_KEYS = ("tests", "passed", "failed", "flaky", "skipped")
CTRF_COUNTED = {k: k for k in ("passed", "failed", "flaky", "skipped")}
_JUNIT_COUNTED = {"failed": "failed", "skipped": "skipped", "flaky": "flaky",
                  "passed": "passed"}


@dataclass(frozen=True)
class ImportResult:
    """A report read as run evidence."""

    evidence: dict[str, Any]
    """SPEC §3 run evidence (``memidex.evidence.validate_run`` accepts it)."""
    format: str
    """``playwright``, ``junit`` or ``ctrf``."""
    counts: dict[str, int]
    """``tests``, ``passed``, ``failed``, ``flaky``, ``skipped`` as the runner counts them."""
    warnings: list[str] = field(default_factory=list)
    """One line each: counts that disagree, unknown statuses, ignored annotations…"""

    @property
    def run_id(self) -> str:
        return str(self.evidence["run_id"])

    def to_json(self, output: str | None = None) -> dict[str, Any]:
        """``runs import --json``; ``output``: the file the evidence was written to (then
        the evidence itself is left out)."""
        return {"run_id": self.run_id, "format": self.format, "counts": self.counts,
                "warnings": self.warnings, "output": output,
                "evidence": None if output is not None else self.evidence}


def report_run_id(digest: str) -> str:
    """The run id of a report whose SHA-256 is ``digest``: the same bytes, the same run."""
    return f"import-{digest[:16]}"


def _check_flags(product: str, run_id: str | None, build_tag: str | None,
                 fmt: str, masker: Masker) -> None:
    import re

    if not isinstance(product, str) or not PRODUCT_RE.fullmatch(product):
        raise UsageError(f"product {product!r} is not a product name (letters, digits, "
                         f"`.`, `_`, `-`)")
    if run_id is not None and not re.fullmatch(RUN_ID_PATTERN[1:-1], run_id):
        raise UsageError(f"run id {run_id!r} is not a run id (a letter or digit, then "
                         f"letters, digits, `.`, `_`, `-`)")
    if build_tag is not None and not re.fullmatch(BUILD_TAG_PATTERN[1:-1], build_tag):
        raise UsageError(f"build tag {build_tag!r} is not a build tag")
    if fmt not in FORMATS:
        raise UsageError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    # identifiers, not text: masked they would no longer be valid, so they are refused
    for what, value in (("product", product), ("run id", run_id), ("build tag", build_tag)):
        if value is not None and masker.holds_secret(value):
            raise UsageError(f"the {what} holds a value from the secrets file",
                             hint="it is an identifier: use another one")


def _digest(path: Path, max_bytes: int) -> str:
    """The SHA-256 of the file, read in chunks (the size refused before reading)."""
    source = str(path)
    try:
        check_size(path, max_bytes)
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    except OSError as exc:
        raise unreadable(source, exc) from None
    return digest.hexdigest()


class _Session:
    """One import: the warnings, the builder once the report's folders are known."""

    def __init__(self, root: Path, masker: Masker) -> None:
        self.root = root
        self.masker = masker
        self.warnings: list[str] = []
        self.builder: Builder | None = None
        self.paths = MachinePaths(root)

    def warn(self, message: str) -> None:
        if len(self.warnings) < 200:
            self.warnings.append(message)
        elif len(self.warnings) == 200:
            self.warnings.append("more warnings were left out")

    def ready(self, machine_roots: list[str]) -> None:
        self.paths = MachinePaths(self.root, machine_roots)
        self.builder = Builder(Cleaner(self.paths.redact, self.masker.mask),
                               self.paths.artifact, self.warn, self.masker.mask)

    def build(self, raw: RawTest) -> TestResult:
        if self.builder is None:  # pragma: no cover - ready() comes before any test
            self.ready([])
        assert self.builder is not None
        return self.builder.test(raw)

    def id_text(self, text: str) -> str:
        """A part of a test id: escapes removed, paths redacted, secrets masked as
        ``secret-<name>`` (a mask an id can hold) before the id is made of it."""
        mask = self.masker.mask
        masked = mask(self.paths.redact(mask(strip_ansi(text))))
        return SECRET_MARK.sub(lambda m: "secret-" + m.group(1), masked)

    def clean_warnings(self) -> list[str]:
        out = []
        for w in self.warnings:
            line = " ".join(self.masker.mask(self.paths.redact(
                self.masker.mask(strip_ansi(w)))).split())
            out.append(self.masker.mask(line[:500]))
        return out


def import_report(path: Path, *, product: str, root: Path, fmt: str = "auto",
                  build_tag: str | None = None, run_id: str | None = None,
                  ci: bool = False, masker: Masker | None = None,
                  max_bytes: int = MAX_REPORT_BYTES) -> ImportResult:
    """Read the report at ``path`` as run evidence for ``product``.

    ``root`` is the repository root: paths under it (or under the report machine's
    project folder) become relative, attachments are kept only inside
    ``<root>/artifacts/``. ``masker`` masks secrets (default: the secrets file at
    ``<root>/.agent-qa/secrets.yaml``). The run id defaults to
    :func:`report_run_id` of the report's bytes. Raises :class:`ReportError` (exit 4)
    when nothing can be read — :class:`EmptyReportError` for a report with no test —
    and ``UsageError`` for a bad product, run id, build tag or format, or one that holds
    a secret."""
    masker = masker if masker is not None else Masker.load(root / ".agent-qa" /
                                                            "secrets.yaml")
    _check_flags(product, run_id, build_tag, fmt, masker)
    source = str(path)
    check_size(path, max_bytes)
    found = probe(path)
    if found == "evidence":
        raise ReportError(f"{source}: this is run evidence (docs/runs.md), not a runner's "
                          f"report: `memidex runs ingest` reads it as it is")
    if fmt != "auto" and fmt != found:
        raise ReportError(f"{source}: --format {fmt} was asked for, but the file is a "
                          f"{found} report")
    digest = _digest(path, max_bytes)
    session = _Session(root, masker)
    counts = dict.fromkeys(COUNT_KEYS, 0)
    rows: list[tuple[list[str], str | None, TestResult]] = []
    try:
        if found == "junit":
            ju = JunitRead()
            stream: Iterator[tuple[str, RawTest]] = read_junit(
                path, source, session.warn, ju,
                lambda info: session.ready(info.machine_roots))
            _collect(stream, _JUNIT_COUNTED.__getitem__, session, counts, rows)
            _check_junit(ju, counts, session.warn, source)
        else:
            try:
                fh = path.open(encoding="utf-8-sig", newline="")
            except OSError as exc:
                raise ReportError(f"{source}: cannot be read ({exc.strerror or exc})"
                                  ) from None
            with fh:
                if found == "playwright":
                    pw = PlaywrightRead()
                    stream = read_playwright(fh, source, session.warn, pw,
                                             lambda info: session.ready(info.machine_roots))
                    _collect(stream, COUNTED.__getitem__, session, counts, rows)
                else:
                    ct = CtrfRead()
                    stream = read_ctrf(fh, source, session.warn, ct,
                                       lambda info: session.ready(info.machine_roots))
                    _collect(stream, CTRF_COUNTED.__getitem__, session, counts, rows)
            if found == "playwright":
                _check_playwright(pw, counts, session.warn, source)
            else:
                _check_ctrf(ct, counts, session.warn, source)
                _relabel_files(rows)
    except RecursionError:  # a last net: every reader bounds its own nesting
        raise ReportError(f"{source}: not JSON: nested too deeply") from None
    if not rows:
        raise EmptyReportError(f"{source}: the report holds no tests; nothing to import")
    if len(rows) > MAX_TESTS:
        session.warn(f"{source}: the report holds {len(rows)} tests; run evidence holds "
                     f"at most {MAX_TESTS}, the first {MAX_TESTS} were kept")
        del rows[MAX_TESTS:]
    several = len({p for _, p, _ in rows if p is not None}) > 1
    ids = TestIds()
    mask = session.masker.mask
    tests = tuple(replace(t, test_id=ids.make(
        [session.id_text(x) for x in parts],
        session.id_text(project) if several and project is not None else None, mask))
        for parts, project, t in rows)
    run = Run(run_id=run_id or report_run_id(digest), product=product, tests=tests,
              build_tag=build_tag, ci=ci)
    return ImportResult(evidence=run.as_dict(), format=found, counts=counts,
                        warnings=session.clean_warnings())


def _relabel_files(rows: list[tuple[list[str], str | None, TestResult]]) -> None:
    """CTRF names a test's file by its absolute path on the report's machine: in test ids
    it is named relative to the folder all the report's absolute file paths share."""
    absolute = [parts[0].replace("\\", "/") for parts, _, _ in rows
                if parts and (parts[0].startswith("/") or parts[0][1:3] in (":\\", ":/"))]
    if not absolute:
        return
    common = absolute[0].rsplit("/", 1)[0]
    for p in absolute[1:]:
        while common and not p.startswith(common + "/"):
            common = common.rsplit("/", 1)[0] if "/" in common else ""
    if not common:
        return
    for parts, _, _ in rows:
        if parts and parts[0].replace("\\", "/").startswith(common + "/"):
            parts[0] = parts[0].replace("\\", "/")[len(common) + 1:]


def _collect(stream: Iterator[tuple[str, RawTest]], counted: Callable[[str], str],
             session: _Session, counts: dict[str, int],
             rows: list[tuple[list[str], str | None, TestResult]]) -> None:
    for status, raw in stream:
        counts["tests"] += 1
        counts[counted(status)] += 1
        if len(rows) <= MAX_TESTS:
            rows.append((raw.parts, raw.project, session.build(raw)))


def _check_playwright(info: PlaywrightRead, counts: dict[str, int],
                      warn: Callable[[str], None], source: str) -> None:
    stats = info.stats
    if not stats:
        return
    claimed = {COUNTED[k]: stats.get(k) for k in COUNTED}
    differ = {k: v for k, v in claimed.items() if isinstance(v, int) and v != counts[k]}
    if differ:
        said = ", ".join(f"{k} {v}" for k, v in claimed.items())
        warn(f"{source}: the report's stats ({said}) disagree with its tests "
             f"({', '.join(f'{k} {counts[k]}' for k in claimed)}); the tests are trusted")


def _check_junit(info: JunitRead, counts: dict[str, int], warn: Callable[[str], None],
                 source: str) -> None:
    if info.suites == 0:
        return
    claimed = info.claimed
    failed = claimed["failures"] + claimed["errors"]
    if (claimed["tests"], failed, claimed["skipped"]) != (
            counts["tests"], counts["failed"], counts["skipped"]):
        warn(f"{source}: the suites claim {claimed['tests']} tests ({failed} failed, "
             f"{claimed['skipped']} skipped) but hold {counts['tests']} test cases "
             f"({counts['failed']} failed, {counts['flaky']} flaky, {counts['skipped']} "
             f"skipped); the test cases are trusted")


def _check_ctrf(info: CtrfRead, counts: dict[str, int], warn: Callable[[str], None],
                source: str) -> None:
    """The runner's counts (``summary``) against the tests: CTRF counts a flaky test as
    passed, and skipped, pending and other tests apart."""
    summary = info.summary
    if not summary:
        return

    def num(key: str) -> int | None:
        v = summary.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    skipped = [num(k) for k in ("skipped", "pending", "other")]
    claimed = {"tests": num("tests"),
               "passed": num("passed"),
               "failed": num("failed"),
               "skipped": sum(v for v in skipped if v is not None)
               if any(v is not None for v in skipped) else None,
               "flaky": num("flaky")}
    ours = {"tests": counts["tests"], "passed": counts["passed"] + counts["flaky"],
            "failed": counts["failed"], "skipped": counts["skipped"],
            "flaky": counts["flaky"]}
    differ = [k for k, v in claimed.items() if v is not None and v != ours[k]]
    if differ:
        said = ", ".join(f"{k} {v}" for k, v in claimed.items() if v is not None)
        held = ", ".join(f"{k} {ours[k]}" for k, v in claimed.items() if v is not None)
        warn(f"{source}: the report's summary ({said}) disagrees with its tests ({held}); "
             f"the tests are trusted")
