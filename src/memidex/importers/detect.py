"""Which format a file is in, read from its start: :func:`probe`.

``<`` is XML (JUnit). ``{`` is JSON, and its top-level keys tell which: ``suites`` is a
Playwright report, ``results`` a CTRF report; an object with none of them but with
``run_id`` (or ``product``, ``tests``) is run evidence (docs/runs.md). The keys are read as
a stream of bytes, the values between them skipped without being parsed — the probe
stops at the first ``suites`` or ``results`` and never decodes the file — so it costs a
few kilobytes for a report, one pass without parsing for run evidence, and it does not
mind deep nesting, a byte-order mark or a string holding a lone surrogate.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:  # the readers' common part, ~2 ms to import: on the error paths only
    from memidex.importers.common import ReportError

__all__ = ["FORMATS", "MAX_REPORT_BYTES", "REPORT_FORMATS", "check_size", "probe"]

MAX_REPORT_BYTES = 256 * 1024 * 1024
"""A report this big or bigger is refused before it is read (docs/import.md): its run
evidence, frozen by ``runs ingest``, and the ingest's memory (about 3-4 times the report
at its peak, for a report of steps) stay bounded."""


def _error(message: str, *, hint: str | None = None) -> ReportError:
    from memidex.importers.common import ReportError

    return ReportError(message, hint=hint)


def check_size(path: Path, max_bytes: int = MAX_REPORT_BYTES) -> None:
    """Refuse a report of ``max_bytes`` or more from its size, before reading anything."""
    try:
        size = path.stat().st_size
    except OSError:
        return  # the reading says why
    if size >= max_bytes:
        raise _error(f"{path}: the report is {size:,} bytes; the limit is "
                     f"{max_bytes:,} bytes",
                     hint="split the run (e.g. Playwright's --shard) and import each "
                     "part, or leave inline attachments out of the JSON reporter")

FORMATS = ("auto", "playwright", "junit", "ctrf")
"""What ``--format`` takes for a runner's report."""
REPORT_FORMATS = ("playwright", "junit", "ctrf")
_CHUNK = 1 << 16
_SPACE = b" \t\r\n"
_EVIDENCE_KEYS = frozenset({"run_id", "product", "tests"})
# everything up to the next quote or bracket, strings skipped whole (possessive: no
# backtracking, so a long run costs one C-speed scan)
_SKIP = re.compile(rb'(?:[^"{}\[\]]++|"(?:[^"\\]++|\\.)*+")*+')
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"')
_SCALAR = re.compile(rb"[^,}\]\s]*+")


class _Bytes:
    """A read buffer over a binary file: what the probe has not consumed yet."""

    def __init__(self, fh: BinaryIO, source: str) -> None:
        self.fh = fh
        self.source = source
        self.buf = b""
        self.pos = 0
        self.eof = False
        self.lines = 0  # newlines in what was dropped

    def fill(self) -> bool:
        if self.eof:
            return False
        chunk = self.fh.read(_CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.lines += self.buf.count(b"\n", 0, self.pos)
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def line(self) -> int:
        return self.lines + self.buf.count(b"\n", 0, self.pos) + 1

    def peek(self) -> bytes:
        """The next byte that is not white space (``b""`` at the end)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _SPACE:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos:self.pos + 1]
            if not self.fill():
                return b""

    def cut_off(self) -> ReportError:
        return _error(f"{self.source}:{self.line()}: unexpected end of the file")

    def not_json(self, what: str) -> ReportError:
        return _error(f"{self.source}:{self.line()}: not JSON: {what}")

    def string(self) -> bytes:
        """The string token at the current position (its quotes included)."""
        while True:
            m = _STRING.match(self.buf, self.pos)
            if m is not None and (m.end() < len(self.buf) or self.eof):
                self.pos = m.end()
                return m.group(0)
            if not self.fill():
                raise self.cut_off()

    def skip_value(self) -> None:
        """Past one JSON value, however big or deep, without parsing it."""
        c = self.peek()
        if c == b"":
            raise self.cut_off()
        if c == b'"':
            self.string()
            return
        if c not in b"{[":
            while True:
                m = _SCALAR.match(self.buf, self.pos)
                assert m is not None  # the pattern matches the empty string
                if m.end() < len(self.buf) or self.eof:
                    if m.end() == self.pos:
                        raise self.not_json(f"unexpected {c!r}")
                    self.pos = m.end()
                    return
                if not self.fill():  # pragma: no cover - fill() is true when not at eof
                    raise self.cut_off()
        depth = 0
        while True:
            m = _SKIP.match(self.buf, self.pos)
            assert m is not None
            at = m.end()
            if at >= len(self.buf):
                self.pos = at
                if not self.fill():
                    raise self.cut_off()
                continue
            c = self.buf[at:at + 1]
            if c == b'"':  # a string not complete in the buffer
                self.pos = at
                if not self.fill():
                    raise self.cut_off()
                continue
            self.pos = at + 1
            if c in b"{[":
                depth += 1
            else:
                depth -= 1
                if depth <= 0:
                    return


def _key(raw: bytes) -> str:
    try:
        value = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return ""
    return value if isinstance(value, str) else ""


def probe(path: Path) -> str:
    """``evidence``, ``playwright``, ``junit`` or ``ctrf`` for the file at ``path``.

    Raises :class:`ReportError` (one line naming the file) for a file that cannot be read,
    is empty (``the report is empty``), is cut off before its keys say what it is
    (``unexpected end of the file``), is UTF-16, is neither JSON nor XML, or is a JSON
    value that is none of the four (a list, an object without their keys)."""
    source = str(path)
    try:
        if path.is_dir():
            raise _error(f"{source}: is a folder, not a report")
        fh = path.open("rb")
    except OSError as exc:
        from memidex.importers.common import unreadable

        raise unreadable(source, exc) from None
    with fh:
        try:
            return _probe(_Bytes(fh, source))
        except OSError as exc:
            raise _error(f"{source}: cannot be read ({exc.strerror or exc})") from None


def _probe(r: _Bytes) -> str:
    source = r.source
    r.fill()
    if r.buf.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise _error(f"{source}: the report is UTF-16 text; memidex reads UTF-8")
    if r.buf.startswith(b"\xef\xbb\xbf"):
        r.pos = 3
    c = r.peek()
    if c == b"":
        raise _error(f"{source}: the report is empty")
    if c == b"<":
        return "junit"
    if c == b"[":
        raise _error(f"{source}: a JSON list, not a report (a Playwright report is an "
                     f"object with `suites`, a CTRF report one with `results`) nor run "
                     f"evidence (an object with `run_id`)")
    if c != b"{":
        raise _error(f"{source}: neither JSON nor XML: not a Playwright JSON, JUnit "
                     f"XML or CTRF report, nor run evidence")
    r.pos += 1
    seen: set[str] = set()
    if r.peek() == b"}":
        r.pos += 1
    else:
        while True:
            c = r.peek()
            if c == b"":
                raise r.cut_off()
            if c != b'"':
                raise r.not_json(f"an object key is not a string (found {c!r})")
            key = _key(r.string())
            c = r.peek()
            if c == b"":
                raise r.cut_off()
            if c != b":":
                raise r.not_json(f"expected `:`, found {c!r}")
            r.pos += 1
            if key == "suites":
                return "playwright"
            if key == "results":
                return "ctrf"
            seen.add(key)
            r.skip_value()
            c = r.peek()
            if c == b",":
                r.pos += 1
                continue
            if c == b"}":
                r.pos += 1
                break
            if c == b"":
                raise r.cut_off()
            raise r.not_json(f"expected `,` or `}}`, found {c!r}")
    if seen & _EVIDENCE_KEYS:
        return "evidence"
    raise _error(f"{source}: a JSON object, but not a Playwright JSON report (it has "
                 f"no `suites`), a CTRF report (no `results`) or run evidence (no "
                 f"`run_id`)")
