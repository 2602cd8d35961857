"""Read a JSON report piece by piece, never the whole file at once.

A Playwright report is one object whose ``suites`` nest (suite → ``suites`` and
``specs``); every other value — ``config``, ``stats``, ``errors``, a suite's ``title``, one
spec with its tests — is small and parsed whole by the standard ``json`` decoder.
:func:`events` walks the nesting itself and yields those pieces in file order, so memory
holds one spec and a read buffer (1 MB), whatever the size of the file. A CTRF report is
``{"results": {"tool", "summary", "tests": [...]}}``: :func:`ctrf_events` yields its
pieces and one test at a time.

Suites nest at most :data:`MAX_DEPTH` deep; a string holding a lone UTF-16 surrogate
(``"\\ud800"``, which is not Unicode text and cannot be written as UTF-8) is refused where
it is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = ["MAX_DEPTH", "Malformed", "ctrf_events", "events"]

CHUNK = 1 << 20
MAX_DEPTH = 100
"""How deep suites may nest (a real report nests a few describe blocks)."""
_SPACE = " \t\n\r"
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE = re.compile("[\ud800-\udfff]")
_EOF = "unexpected end of the file"


class Malformed(ValueError):
    """The text is not JSON, or not shaped like a Playwright report, at ``line``."""

    def __init__(self, reason: str, line: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class _Reader:
    def __init__(self, fh: TextIO) -> None:
        self.fh = fh
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.lines_before = 0  # newlines in the text already dropped from the buffer
        self.decoder = json.JSONDecoder(parse_constant=_reject_constant)

    def line(self, pos: int | None = None) -> int:
        return self.lines_before + self.buf.count("\n", 0, self.pos if pos is None else pos) + 1

    def _fill(self, size: int = CHUNK) -> bool:
        if self.eof:
            return False
        chunk = self.fh.read(size)
        if not chunk:
            self.eof = True
            return False
        self.lines_before += self.buf.count("\n", 0, self.pos)
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next character that is not white space ("" at the end)."""
        while True:
            n = len(self.buf)
            while self.pos < n and self.buf[self.pos] in _SPACE:
                self.pos += 1
            if self.pos < n:
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def take(self, expected: str, what: str) -> None:
        c = self.peek()
        if c != expected:
            if c == "":
                raise Malformed(f"{_EOF} (expected {what})", self.line())
            raise Malformed(f"expected {what}, found {c!r}", self.line())
        self.pos += 1

    def value(self) -> Any:
        """One JSON value, parsed whole (more of the file is read until it is complete)."""
        if self.peek() == "":
            raise Malformed(_EOF, self.line())
        size = CHUNK
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                cut_short = exc.msg.startswith("Unterminated string") or \
                    exc.pos >= len(self.buf) - 16
                if cut_short and self._fill(size):
                    size *= 2  # a value longer than the buffer: read more, geometrically
                    continue
                if self.eof and (exc.msg.startswith("Unterminated string") or
                                 exc.pos >= len(self.buf.rstrip())):
                    raise Malformed(_EOF, self.line(exc.pos)) from None
                raise Malformed(f"not JSON: {exc.msg}", self.line(exc.pos)) from None
            except ValueError as exc:  # NaN, Infinity
                raise Malformed(f"not JSON: {exc}", self.line()) from None
            except RecursionError:
                raise Malformed("not JSON: nested too deeply", self.line()) from None
            if end == len(self.buf) and not self.eof and self._fill(size):
                continue  # a number may go on in the next chunk
            if _SURROGATE_ESCAPE.search(self.buf, self.pos, end):
                _refuse_lone_surrogates(value, self.line())
            self.pos = end
            return value

    def key(self) -> str:
        key = self.value()
        if not isinstance(key, str):
            raise Malformed("an object key is not a string", self.line())
        self.take(":", "`:`")
        return key

    def next_item(self, close: str) -> bool:
        """After an item: True when another follows (``,``), False at ``close``."""
        c = self.peek()
        if c == ",":
            self.pos += 1
            return True
        if c == close:
            self.pos += 1
            return False
        if c == "":
            raise Malformed(f"{_EOF} (expected `,` or `{close}`)", self.line())
        raise Malformed(f"expected `,` or `{close}`, found {c!r}", self.line())

    def members(self) -> Iterator[str]:
        """The keys of the object that starts here (``{`` taken), each read with its
        ``:``; the caller reads each member's value before the next key."""
        self.take("{", "`{`")
        if self.peek() == "}":
            self.pos += 1
            return
        while True:
            yield self.key()
            if not self.next_item("}"):
                return

    def items(self) -> Iterator[tuple[int, Any]]:
        """(line, value) of each item of the array that starts here, each parsed whole."""
        self.take("[", "`[`")
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            line = self.line()
            yield line, self.value()
            if not self.next_item("]"):
                return


def _refuse_lone_surrogates(value: Any, line: int) -> None:
    """Raise :class:`Malformed` when a string in ``value`` (keys too) holds a lone
    surrogate: a pair decodes to one character, so any surrogate left is alone."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            m = _LONE.search(v)
            if m is not None:
                raise Malformed(f"not text: a string holds a lone UTF-16 surrogate "
                                f"(\\u{ord(m.group(0)):04x}), which is not Unicode", line)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


Event = tuple[str, Any, Any]


def events(fh: TextIO) -> Iterator[Event]:
    """``("top", key, value)`` for each top-level key but ``suites``;
    ``("suite", None, None)`` / ``("end", None, None)`` around each suite, with
    ``("key", key, value)`` for its scalar keys and ``("spec", line, spec)`` for each spec;
    ``("bad", key, line)`` where ``suites``/``specs`` is not a list (skipped)."""
    r = _Reader(fh)
    _object_start(r)
    for key in r.members():
        if key == "suites" and r.peek() == "[":
            yield ("top", "suites", None)
            yield from _suites(r, 1)
        else:
            yield ("top", key, r.value())
    _object_end(r)


def _object_start(r: _Reader) -> None:
    """A report is one JSON object: say what it is instead when it is not."""
    if r.peek() != "{":
        c = r.peek()
        raise Malformed("not a JSON object" if c in "[\"-0123456789tfn" and c
                        else "not JSON", r.line())


def _object_end(r: _Reader) -> None:
    if r.peek() != "":
        raise Malformed("more text after the JSON object", r.line())


def _suites(r: _Reader, depth: int) -> Iterator[Event]:
    if depth > MAX_DEPTH:
        raise Malformed(f"suites nested more than {MAX_DEPTH} deep; a report nests a few",
                        r.line())
    r.take("[", "`[`")
    if r.peek() == "]":
        r.pos += 1
        return
    while True:
        if r.peek() == "{":
            yield from _suite(r, depth)
        else:
            yield ("bad", "suites", r.line())
            r.value()
        if not r.next_item("]"):
            return


def _suite(r: _Reader, depth: int) -> Iterator[Event]:
    yield ("suite", None, None)
    for key in r.members():
        if key == "suites" and r.peek() == "[":
            yield from _suites(r, depth + 1)
        elif key == "specs" and r.peek() == "[":
            for line, spec in r.items():
                yield ("spec", line, spec)
        elif key in ("suites", "specs"):
            yield ("bad", key, r.line())
            r.value()
        else:
            yield ("key", key, r.value())
    yield ("end", None, None)


def ctrf_events(fh: TextIO) -> Iterator[Event]:
    """A CTRF report: ``("top", key, value)`` for each top-level key but ``results``,
    ``("results", key, value)`` for each key of ``results`` but ``tests``, and
    ``("test", line, test)`` for each test in ``results.tests``; ``("bad", key, line)``
    where ``results`` is not an object or ``tests`` not a list (skipped)."""
    r = _Reader(fh)
    _object_start(r)
    for key in r.members():
        if key == "results" and r.peek() == "{":
            yield ("top", "results", None)
            yield from _results(r)
        elif key == "results":
            yield ("bad", "results", r.line())
            r.value()
        else:
            yield ("top", key, r.value())
    _object_end(r)


def _results(r: _Reader) -> Iterator[Event]:
    for key in r.members():
        if key == "tests" and r.peek() == "[":
            for line, test in r.items():
                yield ("test", line, test)
        elif key == "tests":
            yield ("bad", "tests", r.line())
            r.value()
        else:
            yield ("results", key, r.value())
