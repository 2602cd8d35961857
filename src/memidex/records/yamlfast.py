"""The canonical YAML subset memidex writes, and a fast reader for exactly that subset.

The canonical front matter is one ``key: value`` line per top-level key, values in flow
style (``{a: b}``, ``[a, b]``), strings plain when that is unambiguous and JSON-quoted
otherwise, and list-of-mapping keys (``evidence``, ``history``) as block items
``  - {…}``. A mapping key longer than YAML's 1024-character implicit-key limit is
written explicitly (``{? key: value}``). :func:`fast_load` reads that subset and returns
``None`` for anything else, so the caller falls back to PyYAML. A property test proves
``fast_load(text) == yaml.safe_load(text)`` on every text :func:`dump_value` can produce
and on the hand-written variants around it.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

__all__ = [
    "dump_scalar",
    "dump_value",
    "fast_load",
    "is_plain_str",
    "one_line",
    "yaml_loader",
]

_PLAIN_SHAPE = re.compile(r"[A-Za-z0-9_/(][A-Za-z0-9 _/.:@()+'-]*")
_INT = re.compile(r"0|-?[1-9][0-9]*")
# Characters PyYAML refuses in a stream, plus line breaks a double-quoted scalar would fold.
_MUST_ESCAPE = re.compile(
    "[^\x09\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
)
_QUOTED = re.compile(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4})*"')
_KEY_LINE = re.compile(r"([a-z_][a-z0-9_]*):(?: (.*))?")

_STR_TAG = "tag:yaml.org,2002:str"
_FAIL = object()
# YAML forgets an implicit ("simple") key longer than 1024 characters: PyYAML and libyaml
# then refuse the flow mapping. Longer keys are written explicitly, as ``? key: value``.
_SIMPLE_KEY_MAX = 1000
# Deeper flow nesting is left to PyYAML (which refuses it) rather than recursing here.
_MAX_DEPTH = 64


@lru_cache(maxsize=1)
def _resolver() -> Any:
    import yaml

    return yaml.resolver.Resolver()


def yaml_loader() -> Any:
    """PyYAML's C safe loader when present (8x faster), else the pure-Python one."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def one_line(exc: BaseException) -> str:
    """An error message on one line, short enough for a ``path:line: reason`` report."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


@lru_cache(maxsize=65536)
def is_plain_str(value: str) -> bool:
    """True when ``value`` may be written unquoted and still reads back as this string."""
    if not _PLAIN_SHAPE.fullmatch(value) or value.endswith((" ", ":")) or ": " in value:
        return False
    if "  " in value:
        return False
    import yaml

    tag = _resolver().resolve(yaml.ScalarNode, value, (True, False))
    return bool(tag == _STR_TAG)


def _quote(value: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return _MUST_ESCAPE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def dump_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value if is_plain_str(value) else _quote(value)
    raise TypeError(f"cannot write {type(value).__name__} in a record")


def _dump_key(key: Any) -> str:
    text = dump_scalar(key)
    return text if len(text) <= _SIMPLE_KEY_MAX else "? " + text


def dump_value(value: Any) -> str:
    """Flow-style YAML for a scalar, a mapping (key order kept) or a list."""
    if isinstance(value, dict):
        inner = ", ".join(f"{_dump_key(k)}: {dump_value(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(dump_value(v) for v in value) + "]"
    return dump_scalar(value)


# --- the fast reader -------------------------------------------------------------------


def _plain(token: str) -> Any:
    if token == "null":
        return None
    if token == "true":
        return True
    if token == "false":
        return False
    if _INT.fullmatch(token):
        try:
            return int(token)
        except ValueError:  # beyond Python's int digit limit: PyYAML reports it
            return _FAIL
    if is_plain_str(token):
        return token
    return _FAIL


def _scan_plain(text: str, i: int, stops: str) -> int:
    n = len(text)
    while i < n and text[i] not in stops:
        i += 1
    return i


def _flow(text: str, i: int, depth: int = 0) -> tuple[Any, int]:
    """Parse one flow value starting at ``text[i]``; returns (value or _FAIL, next index)."""
    if i >= len(text) or depth > _MAX_DEPTH:
        return _FAIL, i
    c = text[i]
    if c == "{":
        out: dict[Any, Any] = {}
        i += 1
        if text.startswith("}", i):
            return out, i + 1
        while True:
            explicit = text.startswith("? ", i)
            if explicit:
                i += 2
            start = i
            if text.startswith('"', i):
                m = _QUOTED.match(text, i)
                if m is None:
                    return _FAIL, i
                key: Any = json.loads(m.group())
                i = m.end()
            else:
                j = text.find(": ", i)
                if j < 0:
                    return _FAIL, i
                key = _plain(text[i:j])
                if not isinstance(key, str) or any(ch in key for ch in ",[]{}"):
                    return _FAIL, i
                i = j
            if not text.startswith(": ", i) or key in out:
                return _FAIL, i
            if not explicit and i - start > _SIMPLE_KEY_MAX:
                return _FAIL, i
            value, i = _flow(text, i + 2, depth + 1)
            if value is _FAIL:
                return _FAIL, i
            out[key] = value
            if text.startswith(", ", i):
                i += 2
            elif text.startswith("}", i):
                return out, i + 1
            else:
                return _FAIL, i
    if c == "[":
        items: list[Any] = []
        i += 1
        if text.startswith("]", i):
            return items, i + 1
        while True:
            value, i = _flow(text, i, depth + 1)
            if value is _FAIL:
                return _FAIL, i
            items.append(value)
            if text.startswith(", ", i):
                i += 2
            elif text.startswith("]", i):
                return items, i + 1
            else:
                return _FAIL, i
    if c == '"':
        m = _QUOTED.match(text, i)
        if m is None:
            return _FAIL, i
        return json.loads(m.group()), m.end()
    j = _scan_plain(text, i, ",[]{}")
    return _plain(text[i:j]), j


def fast_load(front_matter: str) -> dict[str, Any] | None:
    """Read canonical front matter; ``None`` when it is not in the canonical subset."""
    out: dict[str, Any] = {}
    current_list: list[Any] | None = None
    for line in front_matter.split("\n"):
        if not line:
            continue
        if _MUST_ESCAPE.search(line):
            return None  # tabs, control characters, odd line breaks: leave them to PyYAML
        if line.startswith("  - "):
            if current_list is None:
                return None
            value, end = _flow(line, 4)
            if value is _FAIL or end != len(line) or not isinstance(value, dict | list):
                return None
            current_list.append(value)
            continue
        m = _KEY_LINE.fullmatch(line)
        if m is None:
            return None
        key, rest = m.group(1), m.group(2)
        if key in out or not is_plain_str(key):
            return None
        if current_list is not None and not current_list:
            return None  # `key:` with no items is null in YAML; never written that way
        current_list = None
        if rest is None:
            current_list = []
            out[key] = current_list
            continue
        if rest[:1] in "{[\"":
            value, end = _flow(rest, 0)
            if value is _FAIL or end != len(rest):
                return None
        else:
            value = _plain(rest)
            if value is _FAIL:
                return None
        out[key] = value
    if current_list is not None and not current_list:
        return None
    if not out:
        return None  # an empty document is null in YAML, not an empty mapping
    return out
