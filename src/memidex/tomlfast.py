"""A quick reader for the TOML a ``memidex.toml`` usually holds; ``tomllib`` is the
reference.

Every command reads ``memidex.toml``, and importing ``tomllib`` costs a one-shot command
~2.5 ms (its parser, its regular expressions, ``string``) before it parses a byte.
:func:`loads` reads the small subset such a file is written in — what ``memidex init``
writes and ``docs/configuration.md`` shows — and answers None for anything else, so that
the caller asks ``tomllib`` (which parses it, or says what is wrong with it, by line).
It never gives another answer than ``tomllib.loads`` for a text it accepts: a property
test holds the two together (``tests/test_tomlfast.py``).

The subset, line by line (``\\n`` ends a line; a ``\\r`` or any other control character
but a tab anywhere declines the whole text):

* a blank line, or a comment (``# ...``);
* a table header ``[name]`` (a bare name, nothing inside the brackets but it), each
  table once;
* ``name = value``: a bare key (``A-Za-z0-9_-``), spaces or tabs around ``=``, and a
  value that is a basic string without escapes (``"..."``), a literal string
  (``'...'``), a decimal integer, a decimal fraction (``0.25``), ``true``, ``false``, or
  a one-line array of those.

Either may end in a comment. A key given twice, a table named like a key, dotted or
quoted keys, inline tables, multi-line strings and arrays, dates, ``inf``/``nan`` and
every other form of a number are all declined. The standard library only, nothing
compiled at import.
"""

from __future__ import annotations

__all__ = ["loads"]

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_DIGITS = frozenset("0123456789")
_SPACE = " \t"
_CONTROL = frozenset(chr(c) for c in (*range(0x09), *range(0x0B, 0x20), 0x7F))
"""Control characters but tab and line feed (a text holding one is declined)."""
_LONGEST_INT = 18
"""Digits of the longest integer read here: TOML's are 64-bit (tomllib reads any)."""


class _Decline(Exception):
    """The text is not in the subset (tomllib decides)."""


def loads(text: str) -> dict[str, object] | None:
    """The table ``tomllib.loads(text)`` gives, when ``text`` is in the subset (above);
    None when it is not — then ask ``tomllib``."""
    if not _CONTROL.isdisjoint(text):
        return None
    try:
        return _read(text)
    except _Decline:
        return None


def _read(text: str) -> dict[str, object]:
    root: dict[str, object] = {}
    table = root
    for raw in text.split("\n"):
        line = raw.lstrip(_SPACE)
        if not line or line[0] == "#":
            continue
        if line[0] == "[":
            end = line.find("]")
            name = line[1:end]
            if end < 0 or not _bare(name) or name in root or not _rest_empty(line, end + 1):
                raise _Decline
            table = {}
            root[name] = table
            continue
        eq = line.find("=")
        if eq < 0:
            raise _Decline
        key = line[:eq].rstrip(_SPACE)
        if not _bare(key) or key in table:
            raise _Decline
        value, end = _value(line, _skip(line, eq + 1))
        if not _rest_empty(line, end):
            raise _Decline
        table[key] = value
    return root


def _bare(key: str) -> bool:
    return bool(key) and _BARE.issuperset(key)


def _skip(line: str, i: int) -> int:
    while i < len(line) and line[i] in _SPACE:
        i += 1
    return i


def _rest_empty(line: str, i: int) -> bool:
    """Only blanks, or a comment, from ``i`` on."""
    i = _skip(line, i)
    return i == len(line) or line[i] == "#"


def _value(line: str, i: int) -> tuple[object, int]:
    """The value starting at ``line[i]``, and the index after it."""
    if i < len(line) and line[i] == "[":
        items: list[object] = []
        i = _skip(line, i + 1)
        while i < len(line) and line[i] != "]":
            item, i = _scalar(line, i)
            items.append(item)
            i = _skip(line, i)
            if i < len(line) and line[i] == ",":
                i = _skip(line, i + 1)
            elif i >= len(line) or line[i] != "]":
                raise _Decline
        if i >= len(line):
            raise _Decline
        return items, i + 1
    return _scalar(line, i)


def _scalar(line: str, i: int) -> tuple[object, int]:
    if i >= len(line):
        raise _Decline
    first = line[i]
    if first in "\"'":
        end = line.find(first, i + 1)
        if end < 0 or end == i + 1 and line.startswith(first * 3, i):
            raise _Decline  # unterminated, or a multi-line string's opening
        body = line[i + 1:end]
        if first == '"' and "\\" in body:
            raise _Decline  # escapes: tomllib's to read
        return body, end + 1
    end = i
    while end < len(line) and line[end] not in " \t,]#":
        end += 1
    word = line[i:end]
    if word == "true":
        return True, end
    if word == "false":
        return False, end
    whole, dot, fraction = word.partition(".")
    digits = whole[1:] if whole.startswith("-") else whole
    if not digits or not _DIGITS.issuperset(digits) or len(digits) > _LONGEST_INT \
            or digits[0] == "0" and len(digits) > 1:
        raise _Decline
    if not dot:
        return int(word), end
    if not fraction or not _DIGITS.issuperset(fraction):
        raise _Decline
    return float(word), end
