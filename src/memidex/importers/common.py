"""What the Playwright and JUnit readers share: the errors, the runner-neutral shape of a
test they both produce (:class:`RawTest`), text cleaning and test ids."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from memidex.errors import InvalidInputError
from memidex.evidence import TEST_ID_PATTERN

__all__ = ["EmptyReportError", "RawAttempt", "RawStep", "RawTest", "ReportError",
           "Cleaner", "TestIds", "id_safe", "strip_ansi", "unreadable"]

HINT = "memidex reads Playwright JSON, JUnit XML and CTRF reports (docs/import.md)"


class ReportError(InvalidInputError):
    """A test-runner report that cannot be read at all (exit 4); one line naming the
    file, and the line where it applies."""

    default_hint = HINT


def unreadable(source: str, exc: OSError) -> ReportError:
    """The one line for a report file that cannot be opened or read."""
    if isinstance(exc, FileNotFoundError):
        return ReportError(f"{source}: no such report file")
    if isinstance(exc, PermissionError):
        return ReportError(f"{source}: cannot be read (permission denied)")
    return ReportError(f"{source}: cannot be read ({exc.strerror or exc})")


class EmptyReportError(ReportError):
    """A report that reads but holds no test: there is nothing to import."""

    default_hint = "run evidence needs at least one test; nothing was imported"


@dataclass(slots=True)
class RawStep:
    """A ``test.step`` of the attempt the verdict comes from (flattened, in order)."""

    title: str
    duration_ms: int | None = None
    error: str | None = None


@dataclass(slots=True)
class RawAttempt:
    """One attempt (a Playwright result, a Surefire rerun): its status in the evidence's
    words (``pass``, ``fail``, ``timeout``, ``skip``, ``interrupted``, ``error``)."""

    status: str
    errors: list[str] = field(default_factory=list)
    duration_ms: int | None = None
    steps: list[RawStep] = field(default_factory=list)
    attachments: list[str] = field(default_factory=list)
    annotations: list[tuple[str, str]] = field(default_factory=list)


@dataclass(slots=True)
class RawTest:
    """One runner test, read but not yet turned into evidence."""

    parts: list[str]            # file, describe titles, title (or classname, name)
    project: str | None
    verdict: str                # pass | fail | skip
    flaky: bool
    attempts: list[RawAttempt]
    annotations: list[tuple[str, str]] = field(default_factory=list)
    title: str = ""             # the test's own title (no file, no describe path)
    marked_fail: bool = False   # Playwright test.fail(): its author expects it to fail


_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def strip_ansi(text: str) -> str:
    """``text`` without terminal escapes and control characters (tabs, newlines stay;
    a carriage return is dropped)."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return _CONTROL.sub("", text) if _CONTROL.search(text) else text


class Cleaner:
    """Report text as it may be stored: escapes removed, secrets masked, the report
    machine's paths made relative or redacted, masked again (a path made relative may
    spell a secret), and only then cut to a length — a cut never leaves a piece of a
    secret, whatever the escapes around it."""

    def __init__(self, redact: Callable[[str], str], mask: Callable[[str], str]) -> None:
        self._redact = redact
        self._mask = mask

    def __call__(self, text: str, limit: int = 10_000) -> str:
        text = self._mask(self._redact(self._mask(strip_ansi(text))))
        return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


SECRET_MARK = re.compile(r"\[secret:([^\]\n]{0,100})\]")
"""What the masker writes for a secret (``[secret:<name>]``)."""


def id_safe(text: str, mask: Callable[[str], str]) -> str:
    """``text`` (made of test-id characters) with every secret masked as ``secret-<name>``:
    a mask an id can hold, so masking the id again — as ``runs ingest`` does — changes
    nothing and it stays a valid id."""
    for _ in range(4):
        masked = mask(text)
        if masked == text:
            return text
        text = _OUTSIDE.sub("-", SECRET_MARK.sub(lambda m: "secret-" + m.group(1), masked))
    return text


_OUTSIDE = re.compile(r"[^A-Za-z0-9._:/@-]+")
_TEST_ID_RE = re.compile(TEST_ID_PATTERN[1:-1])
MAX_TEST_ID = 200


def _ascii(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def id_part(text: str) -> str:
    """One part of a test id: accents dropped, each run of characters a test id cannot
    hold one ``-``, trimmed of ``-`` and ``:``."""
    return _OUTSIDE.sub("-", _ascii(text.replace(" › ", ":"))).strip("-:")


class TestIds:
    """Unique, valid test ids, in the order the tests come."""

    __test__ = False  # not a pytest class

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def make(self, parts: list[str], project: str | None,
             mask: Callable[[str], str] | None = None) -> str:
        """The id of a test of ``parts`` in ``project``; ``mask`` (the secrets masker) is
        applied after the last change to the id's text (:func:`id_safe`)."""
        base = ":".join(p for p in (id_part(x) for x in parts) if p)
        suffix = ""
        if project is not None:
            suffix = "@" + (id_part(project).replace(":", "-")[:60].strip("-") or "project")
        if mask is not None:
            base, suffix = id_safe(base, mask), id_safe(suffix, mask).replace(":", "-")
        base = base.lstrip("._:/@-") or "test"
        if suffix:
            suffix = "@" + (suffix.lstrip("@")[:60].strip("-") or "project")
        budget = MAX_TEST_ID - len(suffix) - 8
        if len(base) + len(suffix) > MAX_TEST_ID:
            digest = hashlib.sha256(base.encode()).hexdigest()[:7]
            base = base[: budget - 1].rstrip("._:/@-") + "-" + digest
        candidate, n = base + suffix, 1
        while candidate in self._seen:
            n += 1
            candidate = f"{base}-{n}{suffix}"
        self._seen.add(candidate)
        assert _TEST_ID_RE.fullmatch(candidate), candidate
        return candidate
