"""JUnit XML (pytest ``--junitxml``, Maven Surefire, Playwright's junit reporter, …) →
raw tests, read as a stream with ``defusedxml`` (a DOCTYPE — entities, external
references — is refused, so a billion-laughs file costs nothing and nothing is fetched).

One test is one ``<testcase>``: failed when it holds ``<failure>`` or ``<error>``, flaky
when it holds only ``<flakyFailure>``/``<flakyError>`` (it passed on a rerun), skipped
when it holds ``<skipped>``, else passed. The counts a ``<testsuite>`` claims are checked
against its test cases, and the test cases win (Surefire's counts can disagree).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memidex.importers.common import RawAttempt, RawTest, ReportError

__all__ = ["JunitRead", "read_junit"]

_FAILED = ("failure", "error")
_FLAKY = ("flakyFailure", "flakyError")
_RERUN = ("rerunFailure", "rerunError")
_ATTACHMENT = re.compile(r"\[\[ATTACHMENT\|([^\]\n]+)\]\]")
_LOCATION_ONLY = re.compile(r"^\S+\.\w+:\d+:\d+\s")
_ROOT_PROPERTIES = ("basedir", "user.dir")
_NO_ELEMENTS, _UNCLOSED_TOKEN = 3, 5  # expat's codes for a file that ends too soon


@dataclass(slots=True)
class JunitRead:
    """What the reader found besides the tests: the counts the suites claim."""

    claimed: dict[str, int] = field(default_factory=lambda: {
        "tests": 0, "failures": 0, "errors": 0, "skipped": 0})
    suites: int = 0
    machine_roots: list[str] = field(default_factory=list)


def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _int(value: str | None) -> int:
    try:
        return max(0, int(float(value))) if value else 0
    except (ValueError, OverflowError):
        return 0


def read_junit(path: Path, source: str, warn: Callable[[str], None], info: JunitRead,
               ready: Callable[[JunitRead], None]) -> Iterator[tuple[str, RawTest]]:
    """Yield ``(runner status, raw test)`` per ``<testcase>``, in file order; raises
    :class:`ReportError` for a file that is not XML, declares entities, or is not JUnit."""
    from xml.etree.ElementTree import ParseError

    # defusedxml ships no type hints
    defused: Any = importlib.import_module("defusedxml")
    iterparse = importlib.import_module("defusedxml.ElementTree").iterparse
    refused: type[Exception] = defused.DefusedXmlException

    suites: list[str] = []
    root_seen = False
    announced = False
    try:
        for event, elem in iterparse(str(path), events=("start", "end"), forbid_dtd=True):
            tag = _local(elem.tag)
            if not root_seen:
                root_seen = True
                if tag not in ("testsuites", "testsuite"):
                    raise ReportError(f"{source}: XML, but not a JUnit report (its root "
                                      f"is <{tag}>, not <testsuites> or <testsuite>)")
            if event == "start":
                if tag == "testsuite":
                    suites.append(elem.get("name") or "")
                    info.suites += 1
                    for key in info.claimed:
                        info.claimed[key] += _int(elem.get(key))
                continue
            if tag == "property" and len(suites) > 0:
                if elem.get("name") in _ROOT_PROPERTIES and elem.get("value"):
                    info.machine_roots.append(elem.get("value") or "")
            elif tag == "testcase":
                if not announced:
                    ready(info)
                    announced = True
                yield _testcase(elem, suites[-1] if suites else "")
                elem.clear()
            elif tag == "testsuite":
                suites.pop()
                elem.clear()
    except ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else 0
        reason = str(exc).split(":", 1)[0] if str(exc) else "not XML"
        code = getattr(exc, "code", None)
        if code == _NO_ELEMENTS and not root_seen:
            raise ReportError(f"{source}: the report is empty (it holds no XML element)"
                              ) from None
        if code in (_NO_ELEMENTS, _UNCLOSED_TOKEN):  # the file ends inside an element
            raise ReportError(f"{source}:{line}: unexpected end of the file ({reason})"
                              ) from None
        raise ReportError(f"{source}:{line}: not well-formed XML ({reason})") from None
    except refused as exc:
        raise ReportError(f"{source}: refused: the XML has a DOCTYPE, entities or external "
                          f"references ({type(exc).__name__}); a test report needs none"
                          ) from None
    except OSError as exc:
        raise ReportError(f"{source}: cannot be read ({exc.strerror or exc})") from None
    if not announced:
        ready(info)


def _error_text(elem: Any) -> str:
    """A failure's words: its ``message`` (unless it is only a location, as Playwright's
    junit reporter writes) and its text or ``<stackTrace>``."""
    message = (elem.get("message") or "").strip()
    if _LOCATION_ONLY.match(message):
        message = ""
    stack = next((c for c in elem if _local(c.tag) == "stackTrace"), None)
    body = (stack.text if stack is not None else elem.text) or ""
    kind = elem.get("type") or ""
    if not message and not body.strip() and kind:
        message = kind
    body = body.strip()
    first = body.split("\n", 1)[0]
    if message and (body.startswith(message) or message in first):
        return body
    return "\n".join(p for p in (message, body) if p)


def _testcase(elem: Any, suite: str) -> tuple[str, RawTest]:
    children = list(elem)
    tags = [_local(c.tag) for c in children]
    duration = elem.get("time")
    ms = int(float(duration) * 1000) if duration and re.fullmatch(
        r"\d{1,12}(?:\.\d*)?", duration.strip()) else None
    attachments: list[str] = []
    annotations: list[tuple[str, str]] = []
    for c, tag in zip(children, tags, strict=True):
        if tag in ("system-out", "system-err"):
            attachments.extend(m.group(1).strip() for m in _ATTACHMENT.finditer(c.text or ""))
        elif tag == "properties":
            for p in c:
                name = p.get("name")
                if _local(p.tag) == "property" and name:
                    annotations.append((name, p.get("value") or p.text or ""))
    failures = [c for c, t in zip(children, tags, strict=True) if t in _FAILED]
    flakes = [c for c, t in zip(children, tags, strict=True) if t in _FLAKY]
    reruns = [c for c, t in zip(children, tags, strict=True) if t in _RERUN]
    if failures:
        status, verdict = "failed", "fail"
        attempts = [RawAttempt(status="error" if _local(c.tag).endswith("rror") else "fail",
                               errors=[_error_text(c)]) for c in failures[:1] + reruns]
        for extra in failures[1:]:
            attempts[0].errors.append(_error_text(extra))
    elif "skipped" in tags:
        status, verdict = "skipped", "skip"
        attempts = [RawAttempt(status="skip")]
    elif flakes:
        status, verdict = "flaky", "pass"
        attempts = [RawAttempt(status="error" if _local(c.tag).endswith("rror") else "fail",
                               errors=[_error_text(c)]) for c in flakes]
        attempts.append(RawAttempt(status="pass"))
    else:
        status, verdict = "passed", "pass"
        attempts = [RawAttempt(status="pass")]
    attempts[-1].duration_ms = ms
    attempts[-1].attachments = attachments
    classname = elem.get("classname") or suite
    name = elem.get("name") or ""
    if name.startswith(classname + ".") or not classname:
        parts = [name]
    elif re.search(r"\.(?:[cm]?[jt]sx?|py)$|/", classname):
        parts = [classname, name]  # a file: file:title, as the Playwright JSON reader
    else:
        parts = [f"{classname}.{name}"]
    return status, RawTest(parts=parts, project=None, verdict=verdict,
                           flaky=status == "flaky", attempts=attempts,
                           annotations=annotations, title=name)
