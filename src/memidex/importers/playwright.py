"""Playwright's JSON reporter (1.28 to today) → raw tests, read as a stream.

One test is one ``suites[..].specs[].tests[]`` entry (spec × project). Its verdict is
the runner's own: ``expected`` → pass, ``unexpected`` → fail, ``flaky`` → pass with
``flaky``, ``skipped`` → skip. A status the table does not know is read from the last
attempt, with a warning. Each ``results[]`` entry is an attempt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from memidex.importers.common import RawAttempt, RawStep, RawTest, ReportError
from memidex.importers.jsonstream import Malformed, events
from memidex.importers.paths import parent_dir

__all__ = ["COUNTED", "PlaywrightRead", "read_playwright"]

VERDICT = {"expected": "pass", "unexpected": "fail", "flaky": "pass", "skipped": "skip"}
COUNTED = {"expected": "passed", "unexpected": "failed", "flaky": "flaky",
           "skipped": "skipped"}
ATTEMPT = {"passed": "pass", "failed": "fail", "timedOut": "timeout", "skipped": "skip",
           "interrupted": "interrupted"}
MAX_STEP_DEPTH = 50


@dataclass(slots=True)
class _Suite:
    title: str | None = None
    file: str | None = None
    seen_title: bool = False


@dataclass(slots=True)
class PlaywrightRead:
    """What the reader found besides the tests."""

    stats: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)
    machine_roots: list[str] = field(default_factory=list)
    version: str | None = None
    saw_suites: bool = False


def read_playwright(fh: TextIO, source: str, warn: Callable[[str], None],
                    info: PlaywrightRead,
                    ready: Callable[[PlaywrightRead], None]) -> Iterator[tuple[str, RawTest]]:
    """Yield ``(runner status, raw test)`` for each test in file order, filling ``info``
    with what the report says besides its tests; ``ready`` is called once, before the
    first test, with what the report said before them (its config: the machine's
    folders). Raises :class:`ReportError` for text that is not a Playwright JSON report."""
    stack: list[_Suite] = []
    deferred: list[tuple[list[_Suite], int, Any]] = []
    announced = False
    try:
        for kind, key, value in events(fh):
            if kind == "top":
                if key == "suites":
                    info.saw_suites = True
                elif key == "config" and isinstance(value, dict):
                    info.machine_roots = _machine_roots(value)
                    version = value.get("version")
                    info.version = version if isinstance(version, str) else None
                elif key == "stats" and isinstance(value, dict):
                    info.stats = value
                elif key == "errors" and isinstance(value, list):
                    info.errors = [m for m in (_message(e) for e in value) if m]
            elif kind == "suite":
                stack.append(_Suite())
            elif kind == "key" and stack:
                if key == "title":
                    stack[-1].title = value if isinstance(value, str) else None
                    stack[-1].seen_title = True
                elif key == "file" and isinstance(value, str):
                    stack[-1].file = value
            elif kind == "spec" and stack:
                if not announced:
                    ready(info)
                    announced = True
                if all(s.seen_title for s in stack):
                    yield from _spec(stack, key, value, source, warn)
                else:  # a suite whose title comes after its specs: wait for it
                    deferred.append((list(stack), key, value))
            elif kind == "end" and stack:
                stack.pop().seen_title = True  # no title now means none
                waiting: list[tuple[list[_Suite], int, Any]] = []
                for path, line, spec in deferred:
                    if all(s.seen_title for s in path):
                        yield from _spec(path, line, spec, source, warn)
                    else:
                        waiting.append((path, line, spec))
                deferred[:] = waiting
            elif kind == "bad":
                warn(f"{source}:{value}: `{key}` is not a list; skipped")
    except Malformed as exc:
        raise ReportError(f"{source}:{exc.line}: {exc.reason}") from None
    except UnicodeDecodeError as exc:
        raise ReportError(f"{source}: not UTF-8 text ({exc.reason})") from None
    if not info.saw_suites:
        raise ReportError(f"{source}: a JSON file, but not a Playwright JSON report (it "
                          f"has no `suites`)")
    if not announced:
        ready(info)
    if info.errors:
        first = info.errors[0].strip().splitlines()[0][:200] if info.errors[0].strip() else ""
        warn(f"{source}: the report holds {len(info.errors)} error(s) outside any test; "
             f"the first: {first}")


def _machine_roots(config: dict[str, Any]) -> list[str]:
    roots: list[str] = []
    for path in (config.get("configFile"), config.get("rootDir")):
        if isinstance(path, str) and (parent := parent_dir(path)):
            roots.append(parent)
    for project in config.get("projects") or ():
        if isinstance(project, dict):
            for k in ("outputDir", "testDir"):
                path = project.get(k)
                if isinstance(path, str) and (parent := parent_dir(path)):
                    roots.append(parent)
    return roots


def _message(error: Any) -> str:
    if isinstance(error, str):
        return error
    if not isinstance(error, dict):
        return ""
    for key in ("message", "value", "stack"):
        value = error.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _with_snippet(error: Any) -> str:
    """An error's message, and its code frame (``snippet``, 1.48 on) when the message does
    not already hold it: the frame names the locator and arguments of the failing call
    (``toHaveAttribute('href', …)``)."""
    message = _message(error)
    snippet = error.get("snippet") if isinstance(error, dict) else None
    if message and isinstance(snippet, str) and snippet.strip() and \
            snippet.strip()[:40] not in message:
        return f"{message}\n\n{snippet}"
    return message


def _spec(stack: list[_Suite], line: int, spec: Any, source: str,
          warn: Callable[[str], None]) -> Iterator[tuple[str, RawTest]]:
    if not isinstance(spec, dict) or not isinstance(spec.get("tests"), list):
        warn(f"{source}:{line}: a spec without a `tests` list; skipped")
        return
    title = _str(spec.get("title"))
    file = _str(spec.get("file")) or stack[0].file or stack[0].title or ""
    describes = [s.title for s in stack[1:] if s.title]
    for test in spec["tests"]:
        if not isinstance(test, dict):
            warn(f"{source}:{line}: a test that is not an object; skipped")
            continue
        yield _test(test, [file, *describes, title], source, line, warn)


def _test(test: dict[str, Any], parts: list[str], source: str, line: int,
          warn: Callable[[str], None]) -> tuple[str, RawTest]:
    results = [r for r in test.get("results") or () if isinstance(r, dict)]
    attempts = [_attempt(r, source, line, warn) for r in results]
    status = test.get("status")
    expected = test.get("expectedStatus", "passed")
    if status not in VERDICT:
        derived = _derive(attempts, expected)
        warn(f"{source}:{line}: test status {status!r} is not one Playwright documents; "
             f"read as {derived!r} from its last attempt")
        status = derived
    verdict = VERDICT[status]
    marked_fail = expected == "failed"
    if verdict == "fail" and attempts and not attempts[-1].errors and not (
            marked_fail and attempts[-1].status == "pass"):
        attempts[-1].errors.append(f"The test ended {attempts[-1].status}")
    project = test.get("projectName")
    if not isinstance(project, str):
        project = test.get("projectId") if isinstance(test.get("projectId"), str) else None
    return status, RawTest(parts=parts, project=project or None, verdict=verdict,
                           flaky=status == "flaky", attempts=attempts,
                           annotations=_annotations(test.get("annotations")),
                           title=parts[-1], marked_fail=marked_fail)


def _derive(attempts: list[RawAttempt], expected: Any) -> str:
    if not attempts or attempts[-1].status == "skip":
        return "skipped"
    ok = (attempts[-1].status == "pass") == (expected != "failed")
    if ok and any(a.status != attempts[-1].status for a in attempts[:-1]):
        return "flaky"
    return "expected" if ok else "unexpected"


def _attempt(result: dict[str, Any], source: str, line: int,
             warn: Callable[[str], None]) -> RawAttempt:
    raw = result.get("status")
    status = ATTEMPT.get(raw) if isinstance(raw, str) else None
    if status is None:
        warn(f"{source}:{line}: attempt status {raw!r} is not one Playwright documents; "
             f"read as 'error'")
        status = "error"
    errors = [m for m in (_with_snippet(e) for e in result.get("errors") or ()) if m]
    if not errors:
        single = _with_snippet(result.get("error"))
        if single:
            errors = [single]
    duration = result.get("duration")
    steps: list[RawStep] = []
    _flatten(result.get("steps"), steps, 0)
    return RawAttempt(
        status=status, errors=errors,
        duration_ms=max(0, int(round(duration))) if isinstance(duration, int | float)
        and not isinstance(duration, bool) and duration == duration
        and abs(duration) < 2**62 else None,
        steps=steps,
        attachments=[a["path"] for a in result.get("attachments") or ()
                     if isinstance(a, dict) and isinstance(a.get("path"), str)],
        annotations=_annotations(result.get("annotations")))


def _flatten(steps: Any, out: list[RawStep], depth: int) -> None:
    if not isinstance(steps, list) or depth > MAX_STEP_DEPTH:
        return
    for s in steps:
        if not isinstance(s, dict):
            continue
        duration = s.get("duration")
        error = _message(s.get("error")) or None
        out.append(RawStep(title=_str(s.get("title")),
                           duration_ms=max(0, int(duration)) if isinstance(
                               duration, int | float) and not isinstance(duration, bool)
                           and 0 <= duration < 2**62 else None,
                           error=error))
        _flatten(s.get("steps"), out, depth + 1)


def _annotations(value: Any) -> list[tuple[str, str]]:
    out = []
    for a in value or ():
        if isinstance(a, dict) and isinstance(a.get("type"), str):
            desc = a.get("description")
            out.append((a["type"], desc if isinstance(desc, str) else ""))
    return out


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""
