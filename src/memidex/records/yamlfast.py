"""The canonical YAML subset memidex writes, and a fast reader for exactly that subset.

The canonical front matter is one ``key: value`` line per top-level key, values in flow
style (``{a: b}``, ``[a, b]``), strings plain when that is unambiguous and JSON-quoted
otherwise, and list-of-mapping keys (``evidence``, ``history``) as block items
``  - {…}``. A mapping key longer than YAML's 1024-character implicit-key limit is
written explicitly (``{? key: value}``). :func:`fast_load` reads that subset and returns
``None`` for anything else, so the caller falls back to PyYAML. Comments are taken out
first; block style (as ``yaml.safe_dump`` writes it) is converted line by line; flow
style is read whole (one regular expression and a few string substitutions to JSON) or,
failing that, line by line. Property tests prove each reader equal to
``yaml.safe_load(text)`` on every text :func:`dump_value` can produce, on
``yaml.safe_dump`` output and on the hand-written variants around them, and that a value
holding two flow nodes on one line (``{a: b}, c: d``, which YAML refuses) is declined.
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
    "strict_loader",
    "yaml_loader",
]

_PLAIN_SHAPE = re.compile(r"[A-Za-z0-9_/(][A-Za-z0-9 _/.:@()+'-]*")
_INT = re.compile(r"0|-?[1-9][0-9]*")
# Characters PyYAML refuses in a stream, plus line breaks a double-quoted scalar would fold.
_MUST_ESCAPE = re.compile(  # (the complement of what PyYAML reads: quick to compile)
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]"
)
_QUOTED = re.compile(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4})*"')
_KEY_LINE = re.compile(r"([a-z_][a-z0-9_]*):(?: (.*))?")

# YAML forgets an implicit ("simple") key longer than 1024 characters: PyYAML and libyaml
# then refuse the flow mapping. Longer keys are written explicitly, as ``? key: value``.
_SIMPLE_KEY_MAX = 1000
# Deeper flow nesting is left to PyYAML (which refuses it) rather than recursing here.
_MAX_DEPTH = 64


def yaml_loader() -> Any:
    """PyYAML's C safe loader when present (8x faster), else the pure-Python one."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@lru_cache(maxsize=1)
def strict_loader() -> Any:
    """:func:`yaml_loader` that refuses a mapping holding the same key twice (PyYAML would
    keep the last value and lose the first silently), marking the second key's line."""
    import yaml

    base = yaml_loader()

    class StrictLoader(base):  # type: ignore[valid-type,misc]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[tuple[str, str]] = set()
                for key_node, _ in node.value:
                    if not isinstance(key_node, yaml.ScalarNode):
                        continue
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        break  # `<<` merges may override keys on purpose
                    key = (key_node.tag, key_node.value)
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key_node.value!r} (a value would "
                            "be lost)", key_node.start_mark)
                    seen.add(key)
            return super().construct_mapping(node, deep)

    StrictLoader.__name__ = f"Strict{base.__name__}"
    return StrictLoader


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("a duplicate key")  # the readers decline: PyYAML's to report
    return out


_strict_loads = json.JSONDecoder(object_pairs_hook=_unique_pairs).decode
"""``json.loads`` that refuses an object holding a key twice (the fast readers then
decline, and :func:`strict_loader` reports the key with its line)."""


def one_line(exc: BaseException) -> str:
    """An error message on one line, short enough for a ``path:line: reason`` report."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


# PyYAML picks implicit resolvers by a scalar's first character; a string starting with
# none of these is a string whatever follows (the property tests hold this to PyYAML).
_RESOLVED_FIRST = frozenset("yYnNtTfFoO-+0123456789.<~=")
_BOOL_OR_NULL = frozenset(
    "yes Yes YES no No NO true True TRUE false False FALSE on On ON off Off OFF "
    "null Null NULL".split()
)
# Numbers as YAML 1.2 reads them (1e3, 0o17, .5): PyYAML reads some as strings, but a
# reader in another language would not, so they are always quoted.
_YAML12_NUMBER = re.compile(
    r"[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?|0o[0-7]+|0x[0-9a-fA-F]+"
)


# What else a YAML 1.1 reader (PyYAML) takes a plain scalar starting with one of the
# characters above for (yaml.org/type/: int in bases 2, 8, 10, 16 and 60; float, with
# base 60, .inf and .nan; timestamp; merge; value; null as "~"): such a string is quoted.
# A property test holds this to PyYAML's own resolver, which is then never imported to
# write a record.
_YAML11_TYPED = re.compile(
    r"[-+]?0b[01_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+"
    r"|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+"
    r"|[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
    r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?"
    r"(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?"
    r"|<<|=|~"
)


@lru_cache(maxsize=65536)
def is_plain_str(value: str) -> bool:
    """True when ``value`` may be written unquoted and still reads back as this string."""
    if not _PLAIN_SHAPE.fullmatch(value) or value.endswith((" ", ":")) or ": " in value:
        return False
    if "  " in value:
        return False
    first = value[0]
    if first not in _RESOLVED_FIRST:
        return True
    if first in "yYnNtTfFoO":
        return value not in _BOOL_OR_NULL
    if _YAML12_NUMBER.fullmatch(value):
        return False
    return not _YAML11_TYPED.fullmatch(value)


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


@lru_cache(maxsize=4096, typed=True)  # typed: the key True is written `true`, 1 `1`
def _dump_key(key: Any) -> str:
    text = dump_scalar(key)
    return text if len(text) <= _SIMPLE_KEY_MAX else "? " + text


def dump_value(value: Any) -> str:
    """Flow-style YAML for a scalar, a mapping (key order kept) or a list."""
    if type(value) is str:  # the usual values first: dump_scalar's answer for them
        return value if is_plain_str(value) else _quote(value)
    if type(value) is int:
        return str(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{_dump_key(k)}: {dump_value(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(dump_value(v) for v in value) + "]"
    return dump_scalar(value)


# --- the fast reader -------------------------------------------------------------------
#
# The canonical subset is translated token by token into JSON, and the C JSON parser
# builds the values: brackets, ", " and ": " pass through, JSON-quoted strings (only the
# escapes YAML reads the same way) pass through, and every plain scalar becomes its JSON
# form — or the whole text is declined. Anything JSON then refuses is declined too.

_TOKEN = re.compile(
    r'("(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4})*")'  # quoted
    r'|([^,\[\]{}":\s\x00-\x1f][^,\[\]{}":\x00-\x1f]*(?::(?! )[^,\[\]{}":\x00-\x1f]*)*)'  # plain
)
_SEPARATORS = re.compile(r"(?:[\[\]{}]|, |: )*")
"""What may stand between tokens: brackets, ``, `` and ``: `` — nothing else."""


@lru_cache(maxsize=65536)
def _plain_json(token: str) -> str | None:
    """The JSON text of a plain scalar, or None when it must be left to PyYAML."""
    if token in ("null", "true", "false"):
        return token
    if _INT.fullmatch(token):
        return token if len(token) <= 4000 else None  # past Python's int digit limit
    if len(token) <= _SIMPLE_KEY_MAX and is_plain_str(token):
        return '"' + token + '"'  # the plain shape has no quote, backslash or control
    return None


def _to_json(text: str) -> str | None:
    """One flow value (or a bare quoted scalar) as JSON text, or None."""
    if text.count("[") + text.count("{") > _MAX_DEPTH:
        return None
    declined = False

    def convert(m: re.Match[str]) -> str:
        nonlocal declined
        quoted, plain = m.groups()
        if quoted is not None:
            if len(quoted) > _SIMPLE_KEY_MAX and text.startswith(": ", m.end()):
                declined = True  # YAML forgets an implicit key this long
            return quoted
        converted = _plain_json(plain)
        if converted is None:
            declined = True
            return plain
        return converted

    out = _TOKEN.sub(convert, text)
    if declined or not _SEPARATORS.fullmatch(_TOKEN.sub("", text)):
        return None
    return out


# The common case without a Python call per token: a value made only of brackets,
# separators and plain tokens that are certainly strings, whole numbers or null/true/false
# is turned into JSON by a few C-level substitutions. Anything else takes `_to_json`.
_R = r"[A-Za-z0-9_/.@()+'-]"
_SIMPLE_TOKEN = rf"[A-Za-z0-9_/(-]{_R}*(?:[: ]{_R}+)*"
# Atomic token, possessive repetition: a token is never re-split, so a line that does
# not match fails in linear time (no backtracking).
_SIMPLE_VALUE = re.compile(rf"(?:[\[\]{{}}]|, |: |(?>{_SIMPLE_TOKEN}))*+")
_QUOTED_INT = re.compile(r'"(0|-?[1-9][0-9]*)"')
_BAD_TOKEN = re.compile(
    r'"(?:[-+.0-9~<=]|(?:yes|Yes|YES|no|No|NO|True|TRUE|False|FALSE|on|On|ON|off|Off|OFF'
    r'|Null|NULL)")'
)
"""After quoting: a token YAML may not read as a string (other than null, true, false
and whole numbers, which are unquoted first)."""
_BAD_WORD = re.compile(
    r'"(?:yes|Yes|YES|no|No|NO|True|TRUE|False|FALSE|on|On|ON|off|Off|OFF|Null|NULL)"')
_NUMBER_LIKE = re.compile(r'"([-+.0-9~<=][^"]*)"')
"""After quoting: a token starting the way a number, a date or a merge key does (an
opening quote, as a closing one is never followed by any of these characters)."""


def _simple_json(text: str) -> str | None:
    """JSON for a value of brackets, separators and plain tokens, by string replacement."""
    if len(text) > _SIMPLE_KEY_MAX or not _SIMPLE_VALUE.fullmatch(text):
        return None
    return _quote_tokens(text)


def _quote_tokens(text: str) -> str | None:
    """JSON for flow text already known to hold only brackets, ``, ``, ``: `` and simple
    tokens (none longer than an implicit key may be), or None.

    Tokens hold no quote, bracket or comma and no ": ", so quoting every token means
    quoting at every boundary; the empty and doubled quotes this makes at bracket
    boundaries are then taken out. No Python call per token. A token glued to a bracket
    (``a[b]``) leaves a stray quote that JSON refuses, so it goes to PyYAML."""
    out = (text.replace("[", '["').replace("{", '{"').replace("]", '"]').replace("}", '"}')
           .replace(", ", '", "').replace(": ", '": "'))
    out = ('"' + out + '"').replace('"[', "[").replace('"{', "{").replace(']"', "]") \
        .replace('}"', "}").replace('[""]', "[]").replace('{""}', "{}")
    if '""' in out:
        return None  # an empty element, such as a trailing comma: leave it to PyYAML
    out = out.replace('"null"', "null").replace('"true"', "true").replace('"false"', "false")
    out = _QUOTED_INT.sub(_unquote_int, out)
    if _BAD_TOKEN.search(out) is None:
        return out
    # A token that starts like a number, such as a claim hash (``3a15e9c719b9``), is a
    # string when the line reader would take it for one (:func:`_plain_json`, the same
    # rules); any other (``1e3``, ``2024-01-01``, ``yes``) is declined as before.
    if _BAD_WORD.search(out) is not None or not all(
            _plain_json(token) == f'"{token}"' for token in _NUMBER_LIKE.findall(out)):
        return None
    return out


def _unquote_int(m: re.Match[str]) -> str:
    return m.group(1)


_ITEM = "\x00item"
_LIST = "\x00list"


@lru_cache(maxsize=8192)
def _line(line: str) -> tuple[str, str] | None:
    """One front-matter line as (key, JSON value), (_LIST, key) or (_ITEM, JSON), or None.

    Cached: lines such as ``status: active`` or an empty ``relations`` repeat across
    thousands of records."""
    if _MUST_ESCAPE.search(line):
        return None  # tabs, control characters, odd line breaks: leave them to PyYAML
    if line.startswith("  - "):
        if line[4:5] not in ("{", "["):
            return None
        item = _simple_json(line[4:]) or _to_json(line[4:])
        return None if item is None else (_ITEM, item)
    m = _KEY_LINE.fullmatch(line)
    if m is None:
        return None
    key, rest = m.group(1), m.group(2)
    if not is_plain_str(key):
        return None
    if rest is None:
        return (_LIST, key)
    if rest[:1] in "{[":
        value = _simple_json(rest) or _to_json(rest)
    elif rest[:1] == '"':
        value = _to_json(rest)
    else:
        value = _plain_json(rest)
    return None if value is None else (key, value)


def fast_load(front_matter: str) -> dict[str, Any] | None:
    """Read front matter in the subset above; ``None`` when it is not (PyYAML's then)."""
    if "#" in front_matter:
        stripped = _without_comments(front_matter)
        if stripped is None:
            return None
        front_matter = stripped
    if _BLOCK_STYLE.search(front_matter):
        return _load_block(front_matter)
    data = _load_whole(front_matter)
    return data if data is not None else _load_lines(front_matter)


_COMMENT = re.compile(r" +#.*")
_COMMENT_LINE = re.compile(r" *#.*")


def _without_comments(front_matter: str) -> str | None:
    """The text with YAML comments taken out: whole comment lines, and a ``#`` after
    a space to the end of its line (PyYAML refuses a tab there). A line holding a quote
    is kept as it is (its ``#`` may be inside the string), and a ``#`` glued to a word
    sends the text to PyYAML."""
    out = []
    for line in front_matter.split("\n"):
        if "#" not in line or '"' in line or "'" in line:
            out.append(line)  # (a quoted line is the readers' to accept or decline)
        elif not _COMMENT_LINE.fullmatch(line):
            cut = _COMMENT.sub("", line, count=1)
            if "#" in cut:
                return None
            out.append(cut)
    return "\n".join(out)


# The whole front matter at once, for the common case: every line is ``key: value``, or
# ``key:`` followed by ``  - item`` lines, and every value is one token or one flow node
# of tokens nested at most three deep. A token is plain, or a JSON string YAML reads the
# same way that holds no separator (so the substitutions cannot cut it): printable
# characters, no brackets, no ", " or ": ", simple escapes. One regular expression checks
# that, the substitutions above turn it into JSON, with no Python call per line or token.
_QSTR = (r'"(?:[^"\\,:\[\]{}\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]|[,:](?! )'
         r'|\\["\\/bfnrt]|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4})*+"')
_TOK = rf"(?>{_SIMPLE_TOKEN}|{_QSTR})"
_INNER = rf"(?:, |: |{_TOK})"
_NODE1 = rf"[\[{{]{_INNER}*+[\]}}]"
_NODE2 = rf"[\[{{](?:{_INNER}|{_NODE1})*+[\]}}]"
_NODE3 = rf"[\[{{](?:{_INNER}|{_NODE2})*+[\]}}]"
_DOC_PATTERN = rf"(?:[a-z_][a-z0-9_]*(?:: (?:{_NODE3}|{_TOK})|:(?:\n  - {_NODE3})++)\n)++"


@lru_cache(maxsize=1)
def _doc() -> re.Pattern[str]:
    """The whole-document pattern, compiled on first use: ~2 ms that a process reading
    only canonical files (:mod:`memidex.records.canonical`) or none never spends."""
    return re.compile(_DOC_PATTERN)


_LONG_TOKEN = re.compile(rf"(?<![^,\[\]{{}}\n])[^,\[\]{{}}\n]{{{_SIMPLE_KEY_MAX}}}")
"""A run between separators as long as a key YAML would forget (declined, to be safe)."""
_BLOCK = re.compile(":\x02([^\n]*)")


def _block(m: re.Match[str]) -> str:
    return ": [" + m.group(1).replace("\x03", ", ") + "]"


def _load_whole(front: str) -> dict[str, Any] | None:
    if _LONG_TOKEN.search(front) or not _doc().fullmatch(front):
        return None  # (no control characters pass the pattern: \x01-\x03 are free)
    # `key:` + item lines -> `key: [item, item]`; then the lines are one flow mapping.
    text = front.replace(":\n  - ", ":\x02").replace("\n  - ", "\x03")
    if "\x02" in text:
        text = _BLOCK.sub(_block, text)
    quoted = '"' in text
    if quoted:  # quoted strings are tokens too: their quotes are set aside, then put back
        text = text.replace('"', "\x01")
    out = _quote_tokens("{" + text[:-1].replace("\n", ", ") + "}")
    if out is None:
        return None
    if quoted:
        out = out.replace('"\x01', '"').replace('\x01"', '"').replace("\x01", '"')
    try:
        data = _strict_loads(out)
    except ValueError:
        return None
    keys = front.count("\n") - front.count("\n  - ")
    # fewer keys than key lines: a key given twice, which the line reader declines too
    return data if isinstance(data, dict) and len(data) == keys else None


def _load_lines(front_matter: str) -> dict[str, Any] | None:
    """Line by line: quoted strings, deeper nesting, blank lines. Each value is wrapped in
    a one-element JSON list and must come back as one element: a line holding two nodes
    (``{a: b}, c: d``) is refused by YAML and so declined here."""
    entries: list[str] = []
    keys: set[str] = set()
    blocks: set[str] = set()  # keys whose value is a block of `  - item` lines
    list_key: str | None = None
    items: list[str] = []
    for line in front_matter.split("\n"):
        if not line:
            continue
        parsed = _line(line)
        if parsed is None:
            return None
        first, second = parsed
        if first == _ITEM:
            if list_key is None:
                return None
            items.append(f"[{second}]")
            continue
        key = second if first == _LIST else first
        if key in keys:
            return None
        keys.add(key)
        if list_key is not None:
            if not items:
                return None  # `key:` with no items is null in YAML; never written that way
            entries.append(f'"{list_key}":[[{",".join(items)}]]')
            list_key, items = None, []
        if first == _LIST:
            list_key = second
            blocks.add(key)
        else:
            entries.append(f'"{key}":[{second}]')
    if list_key is not None:
        if not items:
            return None
        entries.append(f'"{list_key}":[[{",".join(items)}]]')
    if not keys:
        return None  # an empty document is null in YAML, not an empty mapping
    try:
        wrapped = _strict_loads("{" + ",".join(entries) + "}")
    except (ValueError, RecursionError):
        return None
    if not isinstance(wrapped, dict):
        return None
    data: dict[str, Any] = {}
    for key, wrap in wrapped.items():
        if len(wrap) != 1:
            return None
        value = wrap[0]
        if key in blocks:
            if any(len(item) != 1 for item in value):
                return None
            value = [item[0] for item in value]
        data[key] = value
    return data


# --- block style, as ``yaml.safe_dump`` writes it ---------------------------------------
#
# Nested block mappings (``trust:`` then ``  source: ci`` lines) and block sequences
# (``- item``, indented or not) are turned into JSON line by line: every value must be
# one scalar (plain, read by the rules above, or a JSON-compatible double-quoted string)
# or one flow node on its own line. Anything else — wrapped long strings, single quotes,
# ``key:`` with nothing under it, uneven indentation — is left to PyYAML.

_BLOCK_STYLE = re.compile(r":\n(?:- |  [A-Za-z_]|  - (?![\[{]))")
_BLOCK_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?: (.*))?")


@lru_cache(maxsize=1)
def _flow_node() -> re.Pattern[str]:
    """One flow node (the block reader's), compiled on first use (~1 ms)."""
    return re.compile(_NODE3)



def _block_scalar(value: str) -> str | None:
    """The JSON text of one block value on its own line, or None."""
    first = value[:1]
    if first in ("[", "{"):
        if value in ("[]", "{}"):
            return value
        if _flow_node().fullmatch(value) is None:
            return None  # not one node of the plain shapes
        return _simple_json(value) or _to_json(value)
    if first == '"':
        return value if _QUOTED.fullmatch(value) else None
    return _plain_json(value) if value else None


def _block_key(key: str) -> str | None:
    text = _plain_json(key)
    return text if text is not None and text.startswith('"') else None


def _load_block(front: str) -> dict[str, Any] | None:
    if _MUST_ESCAPE.search(front.replace("\n", " ")):
        return None
    lines = front.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    ind = [len(line) - len(line.lstrip(" ")) for line in lines]
    entries, end = _block_map(lines, ind, 0, 0)
    if entries is None or end != len(lines) or not entries:
        return None
    try:
        data = _strict_loads("{" + ",".join(entries) + "}")
    except (ValueError, RecursionError):
        return None
    # a top-level key given twice is declined, as by the other readers
    return data if isinstance(data, dict) and len(data) == len(entries) else None


def _block_value(lines: list[str], ind: list[int], i: int, indent: int
                 ) -> tuple[str | None, int]:
    """The block node under a ``key:`` line at ``indent`` (lines from ``i``), as JSON."""
    if i >= len(lines):
        return None, i
    at = ind[i]
    if at >= indent and lines[i].startswith("- ", at):
        return _block_seq(lines, ind, i, at)
    if at > indent:
        entries, i = _block_map(lines, ind, i, at)
        return (None if entries is None else "{" + ",".join(entries) + "}"), i
    return None, i  # `key:` with nothing under it (null): PyYAML's


def _block_seq(lines: list[str], ind: list[int], i: int, indent: int
               ) -> tuple[str | None, int]:
    items: list[str] = []
    while i < len(lines) and ind[i] == indent and lines[i].startswith("- ", indent):
        rest = lines[i][indent + 2 :]
        if _BLOCK_KEY.fullmatch(rest) is None:  # a scalar or flow item
            item = _block_scalar(rest)
            if item is None:
                return None, i
            items.append(item)
            i += 1
            continue
        entries, i = _block_map(lines, ind, i, indent + 2, first=rest)  # a mapping item
        if entries is None:
            return None, i
        items.append("{" + ",".join(entries) + "}")
    if i < len(lines) and ind[i] > indent:
        return None, i  # a continuation line
    return "[" + ",".join(items) + "]", i


def _block_map(lines: list[str], ind: list[int], i: int, indent: int,
               first: str | None = None) -> tuple[list[str] | None, int]:
    """``"key":value`` JSON entries at ``indent`` (``first``: the entry on a ``- `` line)."""
    entries: list[str] = []
    while i < len(lines):
        if first is not None:
            content, first = first, None
        else:
            if ind[i] < indent:
                break
            if ind[i] > indent:
                return None, i  # a continuation or a stray deeper line
            content = lines[i][indent:]
        m = _BLOCK_KEY.fullmatch(content)
        if m is None:
            return None, i
        key, value = m.groups()
        key_json = _block_key(key)
        i += 1
        if value is None:
            value_json, i = _block_value(lines, ind, i, indent)
        else:
            value_json = _block_scalar(value)
        if key_json is None or value_json is None:
            return None, i
        entries.append(f"{key_json}:{value_json}")
    return entries, i
