"""CTRF, the Common Test Report Format (https://ctrf.io) → raw tests, read as a stream.

A CTRF report is ``{"results": {"tool", "summary", "tests": [...]}}``, written by
reporters for Playwright, Cypress, Jest, Mocha, WebdriverIO, pytest and others. One test
is one ``results.tests[]`` entry: ``passed`` → pass (``flaky: true`` → pass, flaky),
``failed`` → fail, ``skipped``/``pending`` → skip, ``other`` → skip with a warning. Its
``message``/``trace``/``snippet`` are its error, ``retryAttempts`` (or, without them,
``retries``) its attempts, ``steps`` its steps, ``attachments`` its attachments and
``extra.annotations`` (Playwright's reporter) its annotations. The runner's own counts
(``summary``) are checked against the tests.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from memidex.importers.common import RawAttempt, RawStep, RawTest, ReportError
from memidex.importers.jsonstream import Malformed, ctrf_events
from memidex.importers.paths import parent_dir

__all__ = ["COUNTED", "CtrfRead", "read_ctrf"]

COUNTED = {"passed": "passed", "failed": "failed", "flaky": "flaky", "skipped": "skipped"}
_VERDICT = {"passed": "pass", "failed": "fail", "skipped": "skip", "pending": "skip",
            "other": "skip"}
_ATTEMPT = {"passed": "pass", "failed": "fail", "skipped": "skip", "pending": "skip",
            "other": "error"}
_RAW = {"timedOut": "timeout", "timedout": "timeout", "interrupted": "interrupted",
        "broken": "error", "error": "error"}
_FILE = re.compile(r"\.[A-Za-z0-9]{1,8}$")


@dataclass(slots=True)
class CtrfRead:
    """What the reader found besides the tests."""

    tool: str | None = None
    summary: dict[str, Any] | None = None
    saw_results: bool = False
    machine_roots: list[str] = field(default_factory=list)
    other: int = 0


def read_ctrf(fh: TextIO, source: str, warn: Callable[[str], None], info: CtrfRead,
              ready: Callable[[CtrfRead], None]) -> Iterator[tuple[str, RawTest]]:
    """Yield ``(count key, raw test)`` for each test in file order; ``ready`` is called
    once before the first test is built, with the project folder the first test's paths
    give (Playwright's reporter: ``filePath`` minus the suite's file). Raises
    :class:`ReportError` for text that is not a CTRF report."""
    announced = False
    try:
        for kind, key, value in ctrf_events(fh):
            if kind == "top" and key == "results":
                info.saw_results = True
            elif kind == "results":
                if key == "tool" and isinstance(value, dict):
                    name = value.get("name")
                    info.tool = name if isinstance(name, str) else None
                elif key == "summary" and isinstance(value, dict):
                    info.summary = value
            elif kind == "test":
                if not isinstance(value, dict):
                    warn(f"{source}:{key}: a test that is not an object; skipped")
                    continue
                if not announced:
                    info.machine_roots = _roots(value, info.tool)
                    ready(info)
                    announced = True
                yield _test(value, info, source, key, warn)
            elif kind == "bad":
                info.saw_results = True
                what = "a list" if key == "tests" else "an object"
                warn(f"{source}:{value}: `{key}` is not {what}; skipped")
    except Malformed as exc:
        raise ReportError(f"{source}:{exc.line}: {exc.reason}") from None
    except UnicodeDecodeError as exc:
        raise ReportError(f"{source}: not UTF-8 text ({exc.reason})") from None
    if not info.saw_results:
        raise ReportError(f"{source}: a JSON file, but not a CTRF report (it has no "
                          f"`results`)")
    if not announced:
        ready(info)
    if info.other:
        warn(f"{source}: {info.other} test(s) have status `other`; read as skipped")


def _suite(test: dict[str, Any]) -> list[str]:
    suite = test.get("suite")
    if isinstance(suite, list):
        return [s for s in suite if isinstance(s, str) and s.strip()]
    if isinstance(suite, str) and suite.strip():
        return [s.strip() for s in suite.split(" > ") if s.strip()]
    return []


def _split(test: dict[str, Any], tool: str | None) -> tuple[str | None, str, list[str]]:
    """(project, file, describe titles): Playwright's reporter writes the suite as
    ``project > file > describe …``; other tools write only describe titles, if any."""
    suite = _suite(test)
    path = _str(test.get("filePath"))
    if len(suite) >= 2 and _FILE.search(suite[1]) and (
            tool == "playwright" or not path or path.replace("\\", "/").endswith(suite[1])):
        return suite[0], suite[1], suite[2:]
    if suite and _FILE.search(suite[0]) and (not path or path.endswith(suite[0])):
        return None, suite[0], suite[1:]
    return None, path, suite


def _roots(test: dict[str, Any], tool: str | None) -> list[str]:
    path = _str(test.get("filePath")).replace("\\", "/")
    _, file, _ = _split(test, tool)
    file = file.replace("\\", "/")
    if path.startswith("/") or re.match(r"[A-Za-z]:/", path):
        if file and file != path and path.endswith("/" + file):
            test_dir = path[: -len(file) - 1]
            parent = parent_dir(test_dir)
            return [parent] if parent else []
    return []


def _error(item: dict[str, Any]) -> str:
    """A test's (or an attempt's) words: its message, its trace when it says more, and
    its code frame (``snippet``)."""
    message = _str(item.get("message")).strip()
    trace = _str(item.get("trace")).strip()
    snippet = _str(item.get("snippet")).strip()
    if trace and (not message or trace.startswith(message) or message in trace):
        text = trace
    else:
        text = "\n".join(p for p in (message, trace) if p)
    if snippet and snippet[:40] not in text:
        text = f"{text}\n\n{snippet}" if text else snippet
    return text


def _ms(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return max(0, int(value)) if abs(value) < 2**62 else None


def _attempt_status(item: dict[str, Any]) -> str:
    raw = item.get("rawStatus")
    if isinstance(raw, str) and raw in _RAW:
        return _RAW[raw]
    status = item.get("status")
    return _ATTEMPT.get(status, "error") if isinstance(status, str) else "error"


def _test(test: dict[str, Any], info: CtrfRead, source: str, line: int,
          warn: Callable[[str], None]) -> tuple[str, RawTest]:
    status = test.get("status")
    if status not in _VERDICT:
        warn(f"{source}:{line}: test status {status!r} is not one CTRF documents; read as "
             f"'other'")
        status = "other"
    if status == "other":
        info.other += 1
    flaky = status == "passed" and test.get("flaky") is True
    verdict = _VERDICT[status]
    name = _str(test.get("name"))
    project, file, describes = _split(test, info.tool)
    final = RawAttempt(status=_attempt_status(test), duration_ms=_ms(test.get("duration")))
    error = _error(test)
    if verdict == "fail":
        final.errors = [error or f"The test ended {final.status}"]
    final.attachments = [a["path"] for a in test.get("attachments") or ()
                         if isinstance(a, dict) and isinstance(a.get("path"), str)]
    steps = [s for s in test.get("steps") or () if isinstance(s, dict)]
    failed_at = max((i for i, s in enumerate(steps) if s.get("status") == "failed"),
                    default=None)
    final.steps = [RawStep(title=_str(s.get("name")),
                           error=(error or "failed") if i == failed_at and verdict == "fail"
                           else None)
                   for i, s in enumerate(steps)]
    attempts = _attempts(test, final, flaky)
    extra = test.get("extra")
    annotations = []
    for a in (extra.get("annotations") if isinstance(extra, dict) else None) or ():
        if isinstance(a, dict) and isinstance(a.get("type"), str):
            desc = a.get("description")
            annotations.append((a["type"], desc if isinstance(desc, str) else ""))
    key = "flaky" if flaky else {"pass": "passed", "fail": "failed"}.get(verdict, "skipped")
    return key, RawTest(parts=[file, *describes, name], project=project, verdict=verdict,
                        flaky=flaky, attempts=attempts, annotations=annotations, title=name)


def _attempts(test: dict[str, Any], final: RawAttempt, flaky: bool) -> list[RawAttempt]:
    """The attempts: ``retryAttempts`` when the report has them, else as many failed
    attempts before the final one as ``retries`` says (a retry follows a failure)."""
    tried = [a for a in test.get("retryAttempts") or () if isinstance(a, dict)]
    retries = test.get("retries")
    n = retries if isinstance(retries, int) and not isinstance(retries, bool) and \
        0 <= retries <= 1000 else 0
    if tried:
        out = []
        for a in tried:
            status = _attempt_status(a)
            text = _error(a)
            out.append(RawAttempt(status=status, duration_ms=_ms(a.get("duration")),
                                  errors=[text] if text else []))
        if len(tried) <= n:  # only the attempts before the final one
            out.append(final)
        else:  # the last entry is the final attempt: keep the test's own details on it
            final.errors = final.errors or out[-1].errors
            final.status = out[-1].status if final.status == "error" else final.status
            if out[-1].duration_ms is not None:
                final.duration_ms = out[-1].duration_ms
            out[-1] = final
        return out
    if n == 0 and flaky:
        n = 1  # flaky: it failed at least once before it passed
    return [*(RawAttempt(status="fail") for _ in range(n)), final]


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""
