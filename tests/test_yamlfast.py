"""The canonical YAML subset: what ``dump_value`` writes, PyYAML reads back, and
``fast_load`` never reads anything differently from PyYAML (it may only decline)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memidex.records.yamlfast import (
    _load_lines,
    _load_whole,
    dump_scalar,
    dump_value,
    fast_load,
    is_plain_str,
)
from strategies import YAML_SPECIALS, front_matter_dicts, tricky_text, yaml_values

LOADERS = [yaml.CSafeLoader, yaml.SafeLoader]


def same(a: Any, b: Any) -> bool:
    """Equal with the same types throughout (``1 == True`` and ``1 == 1.0`` do not count)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            same(ka, kb) and same(va, vb)
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def load_all(text: str) -> list[Any]:
    return [yaml.load(text, Loader=loader) for loader in LOADERS]  # noqa: S506


def str_keys_only(value: Any) -> bool:
    """String keys that YAML reads as implicit keys (longer ones go to PyYAML)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and len(dump_scalar(k)) <= 1000 and str_keys_only(v)
                   for k, v in value.items())
    if isinstance(value, list):
        return all(str_keys_only(v) for v in value)
    return True


def front_matter(data: dict[str, Any]) -> str:
    """Front matter the way the codec writes it: lists of mappings as block items."""
    lines = []
    for key, value in data.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines.append(f"{key}:")
            lines += [f"  - {dump_value(v)}" for v in value]
        else:
            lines.append(f"{key}: {dump_value(value)}")
    return "\n".join(lines) + "\n"


# --- what dump_value writes, PyYAML reads back, and so does fast_load ----------------------


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(yaml_values())
def test_dump_value_reads_back_identically(value: Any) -> None:
    text = "k: " + dump_value(value) + "\n"
    for loaded in load_all(text):
        assert same(loaded, {"k": value}), text
    fast = fast_load(text)
    assert fast is None or same(fast, {"k": value}), text
    if str_keys_only(value):
        assert fast is not None, f"canonical text left the fast path: {text!r}"


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(front_matter_dicts())
def test_front_matter_fast_load_equals_pyyaml(data: dict[str, Any]) -> None:
    text = front_matter(data)
    for loaded in load_all(text):
        assert same(loaded, data), text
    fast = fast_load(text)
    if str_keys_only(data):
        assert fast is not None, text
        assert _load_lines(text) is not None, text  # the fallback reads all of it too
    for load in READERS.values():
        fast = load(text)
        assert fast is None or same(fast, data), text


# Documents of plain tokens only: the shape the whole-document reader takes at once.
_PLAIN_TOKEN = st.from_regex(
    r"[A-Za-z0-9_/(-][A-Za-z0-9_/.@()+'-]{0,5}(?:[: ][A-Za-z0-9_/.@()+'-]{1,3}){0,2}",
    fullmatch=True)
_QUOTED_TOKEN = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)),
                        max_size=6).map(lambda t: json.dumps(t, ensure_ascii=False))
_SIMPLE_TOKENS = st.one_of(
    *[_PLAIN_TOKEN] * 6,
    _QUOTED_TOKEN,
    st.text(max_size=4).map(json.dumps),
    st.integers(-999, 999).map(str),
    st.sampled_from(["null", "true", "false", "yes", "No", "on", "OFF", "Null", "0", "-7",
                     "012", "1e3", "0x1f", "1_000", "-", "(x", "a:b", "a b", "~", "y"]),
)
_SIMPLE_VALUES = st.recursive(
    _SIMPLE_TOKENS,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.one_of(*[_PLAIN_TOKEN] * 9, _SIMPLE_TOKENS), inner,
                                            max_size=3)),
    max_leaves=8,
)


def _raw_flow(value: Any) -> str:
    """Flow text with every token written as it is (no quoting): YAML decides."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_raw_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_raw_flow(v) for v in value) + "]"
    return str(value)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(
    st.from_regex(r"[a-z_][a-z0-9_]{0,3}|yes|on|null", fullmatch=True),
    st.one_of(_SIMPLE_VALUES.map(lambda v: ("line", v)),
              st.lists(st.dictionaries(_PLAIN_TOKEN, _SIMPLE_VALUES, max_size=3), min_size=1,
                       max_size=3).map(lambda v: ("block", v)))), min_size=1, max_size=6))
def test_whole_document_reader_agrees_with_pyyaml_on_plain_tokens(
        entries: list[tuple[str, tuple[str, Any]]]) -> None:
    lines = []
    for key, (shape, value) in entries:
        if shape == "block":
            lines.append(f"{key}:")
            lines += [f"  - {_raw_flow(item)}" for item in value]
        else:
            lines.append(f"{key}: {_raw_flow(value)}")
    text = "\n".join(lines) + "\n"
    try:
        expected = load_all(text)
    except (yaml.YAMLError, ValueError):
        expected = None
    for load in READERS.values():
        fast = load(text)
        if fast is not None:
            assert expected is not None, f"accepted what PyYAML refuses: {text!r}"
            assert all(same(fast, e) for e in expected), text


def _nested(leaf: st.SearchStrategy[Any], key: st.SearchStrategy[str], depth: int
            ) -> st.SearchStrategy[Any]:
    """Lists and mappings of ``leaf`` nested at most ``depth`` deep."""
    inner = leaf
    for _ in range(depth):
        inner = st.one_of(leaf, st.lists(inner, max_size=3),
                          st.dictionaries(key, inner, max_size=3))
    return inner


# Written plain: also those starting like a number (a claim hash such as 3a15e9c719b9),
# which the whole reader takes after the line reader's own check of each.
_WRITTEN_PLAIN = _PLAIN_TOKEN.filter(is_plain_str)
_PLAIN_LEAF = st.one_of(_WRITTEN_PLAIN, st.integers(-(10**6), 10**6), st.booleans(), st.none())


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(
    st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(is_plain_str),
    st.one_of(
        _nested(_PLAIN_LEAF, _WRITTEN_PLAIN, 3).filter(lambda v: not isinstance(v, list) or
                                                       not v or not isinstance(v[0], dict)),
        st.lists(st.dictionaries(_WRITTEN_PLAIN, _nested(_PLAIN_LEAF, _WRITTEN_PLAIN, 2),
                                 max_size=3), min_size=1, max_size=3),
    ),
    min_size=1, max_size=8))
def test_whole_document_reader_takes_what_memidex_writes_in_plain_tokens(
        data: dict[str, Any]) -> None:
    text = front_matter(data)
    whole = _load_whole(text)
    assert whole is not None, text
    assert same(whole, data), text
    for loaded in load_all(text):
        assert same(loaded, data), text


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(front_matter_dicts(), st.booleans(), st.booleans(), st.sampled_from([None, 1, 0]))
def test_block_style_as_pyyaml_writes_it_reads_as_pyyaml_reads_it(
        data: dict[str, Any], sort_keys: bool, allow_unicode: bool, indent: int | None) -> None:
    # Front matter written by yaml.safe_dump (block style), as other tools write it.
    text = yaml.safe_dump(data, sort_keys=sort_keys, allow_unicode=allow_unicode,
                          default_flow_style=False, indent=2 if indent is None else None,
                          width=60 if indent == 0 else 10**6)
    fast = fast_load(text)
    if fast is not None:
        for loaded in load_all(text):
            assert same(fast, loaded), text


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(
    st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(is_plain_str),
    st.one_of(
        _nested(_PLAIN_LEAF, _WRITTEN_PLAIN, 3),
        st.lists(st.dictionaries(_WRITTEN_PLAIN, _nested(_PLAIN_LEAF, _WRITTEN_PLAIN, 2),
                                 min_size=1, max_size=3), min_size=1, max_size=3),
    ),
    min_size=1, max_size=8), st.booleans())
def test_block_style_of_plain_tokens_takes_the_fast_path(data: dict[str, Any],
                                                         sort_keys: bool) -> None:
    text = yaml.safe_dump(data, sort_keys=sort_keys, default_flow_style=False,
                          width=10**6)
    fast = fast_load(text)
    if _depth(data) <= 4 and _block_shaped(data):
        assert fast is not None, text
    if fast is not None:
        for loaded in load_all(text):
            assert same(fast, loaded), text


def _depth(value: Any) -> int:
    if isinstance(value, dict | list):
        inner = value.values() if isinstance(value, dict) else value
        return 1 + max((_depth(v) for v in inner), default=0)
    return 0


def _block_shaped(value: Any, in_list: bool = False) -> bool:
    """Keys of letters, digits, '_' and '-', and no non-empty list right inside a list:
    the shapes the block reader promises to take."""
    if isinstance(value, dict):
        return all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", k) and _block_shaped(v)
                   for k, v in value.items())
    if isinstance(value, list):
        return not (in_list and value) and all(_block_shaped(v, True) for v in value)
    return True


def test_whole_document_reader_takes_a_canonical_record() -> None:
    text = (
        "id: fact-el-button-x-0123456789abcdef\nkind: fact\nstatus: active\n"
        "product: shop-web\nscope: {page: /checkout}\nanchor: el:button:x\n"
        "anchors: [page:/checkout, test:checkout-happy-path]\ntitle: Place order is disabled\n"
        "trust: {source: human, confirmations: 3, contradictions: 0, last_confirmed: 41}\n"
        "valid: {from: 36, until: null}\n"
        "relations: {supersedes: [], superseded_by: null, cites: [], contradicts: []}\n"
        "evidence:\n  - {run: r-0041, test: checkout-happy-path, step: 3, observed: x (y)}\n"
        "history:\n  - {valid: {from: 1, until: 36}, title: Was enabled, body: It was}\n"
    )
    whole = _load_whole(text)
    assert whole is not None
    for loaded in load_all(text):
        assert same(whole, loaded)
    assert same(whole, _load_lines(text))


@pytest.mark.parametrize("token", ["3a15e9c719b9", "0abc", "1 pressed", "9/10", "2024-01-01x"])
def test_whole_document_reader_takes_a_claim_starting_with_a_digit(token: str) -> None:
    # a claim hash starts with a digit in 10 cases out of 16: such a token, a string by
    # the line reader's rules, used to send the whole file to the line reader
    text = f"id: x\nevidence:\n  - {{run: r-1, step: 1, claim: {token}}}\n"
    whole = _load_whole(text)
    assert whole is not None
    assert whole["evidence"][0]["claim"] == token
    for loaded in load_all(text):
        assert same(whole, loaded)


@pytest.mark.parametrize("token", ["1e3", "0x1f", "2024-01-01", "1:30", "012", ".5", "~"])
def test_whole_document_reader_declines_what_yaml_reads_as_another_type(token: str) -> None:
    text = f"id: x\nevidence:\n  - {{run: r-1, claim: {token}}}\n"
    assert _load_whole(text) is None


@pytest.mark.parametrize("special", YAML_SPECIALS)
def test_every_yaml_special_round_trips(special: str) -> None:
    for value in (special, [special], {special: special}, {"k": [special, {"x": special}]}):
        text = "k: " + dump_value(value) + "\n"
        for loaded in load_all(text):
            assert same(loaded, {"k": value}), text
        assert same(fast_load(text), {"k": value}), text


# --- is_plain_str: an unquoted string reads back as itself, in block and flow context ------

_PLAIN_TEMPLATES: list[tuple[str, Callable[[str], Any]]] = [
    ("k: {s}\n", lambda s: s),
    ("k: {{a: {s}}}\n", lambda s: {"a": s}),
    ("k: {{{s}: a}}\n", lambda s: {s: "a"}),
    ("k: {{{s}: {s}, z: 1}}\n", lambda s: {s: s, "z": 1}),
    ("k: [{s}]\n", lambda s: [s]),
    ("k: [{s}, x]\n", lambda s: [s, "x"]),
    ("k: [x, {s}, [{s}]]\n", lambda s: ["x", s, [s]]),
    ("k:\n  - {{a: {s}}}\n", lambda s: [{"a": s}]),
]


@settings(max_examples=500)
@given(st.one_of(tricky_text(), st.from_regex(r"[A-Za-z0-9_/(][A-Za-z0-9 _/.:@()+'-]{0,12}",
                                              fullmatch=True)))
def test_plain_strings_read_back_as_themselves(s: str) -> None:
    if not is_plain_str(s):
        assert dump_scalar(s).startswith('"')
        return
    assert dump_scalar(s) == s
    for template, expected in _PLAIN_TEMPLATES:
        text = template.format(s=s)
        for loaded in load_all(text):
            assert same(loaded, {"k": expected(s)}), text


@pytest.mark.parametrize(
    "s",
    ["yes", "No", "on", "OFF", "null", "Null", "~", "", "true", "False", "0x1f", "1_000", "012",
     "1.5", "1.", "1:20", "2024-01-01", ".inf", "-1", "0", "a: b", "a:", "#a", "a #b", "- a",
     " a", "a ", "a  b", "a\tb", "a,b", "[a]", "{a}", "?a", "&a", "*a", "!a", "'a", '"a"', "é",
     "<<", "=", "%a", "@a", "`a", "|", ">",
     # YAML 1.2 readers (other languages) take these for numbers, so they are quoted
     "1e3", "1E-5", ".5", "0o17", "12"],
)
def test_not_plain(s: str) -> None:
    assert not is_plain_str(s)
    assert dump_scalar(s).startswith('"')


@pytest.mark.parametrize(
    "s", ["shop-web", "el:button:place-order", "page:/checkout", "Place order (disabled)",
          "r-0041", "it's", "a:b", "a/b.c@d+e", "_x", "(x)"],
)
def test_plain(s: str) -> None:
    assert is_plain_str(s)
    assert dump_scalar(s) == s


def test_dump_scalar_refuses_floats_and_other_types() -> None:
    for value in (1.5, b"x", object()):
        with pytest.raises(TypeError):
            dump_scalar(value)


# --- hand-written variants: fast_load declines or agrees, never differs --------------------

_SIGNIFICANT = ":,[]{}#&*!|>'\"%@-?~ \t\n\r\\"


def _pos(data: st.DataObject, text: str) -> int:
    return data.draw(st.integers(0, len(text)))


def _line_op(op: Callable[[list[str], int], None]) -> Callable[[str, st.DataObject], str]:
    def mutate(text: str, data: st.DataObject) -> str:
        lines = text.split("\n")
        op(lines, data.draw(st.integers(0, len(lines) - 1)))
        return "\n".join(lines)

    return mutate


def _sub_nth(pattern: str, repl: Callable[[re.Match[str]], str]) -> Callable[..., str]:
    def mutate(text: str, data: st.DataObject) -> str:
        matches = list(re.finditer(pattern, text))
        if not matches:
            return text
        m = matches[data.draw(st.integers(0, len(matches) - 1))]
        return text[: m.start()] + repl(m) + text[m.end() :]

    return mutate


def _insert(text: str, data: st.DataObject) -> str:
    i = _pos(data, text)
    return text[:i] + data.draw(st.sampled_from(_SIGNIFICANT)) + text[i:]


def _delete(text: str, data: st.DataObject) -> str:
    i = _pos(data, text)
    return text[:i] + text[i + 1 :]


def _to_block(lines: list[str], i: int) -> None:
    m = re.fullmatch(r"([a-z_][a-z0-9_]*): \{(.*)\}", lines[i])
    if m:
        lines[i] = m.group(1) + ":\n" + "\n".join("  " + p for p in m.group(2).split(", "))


MUTATIONS: dict[str, Callable[[str, st.DataObject], str]] = {
    "extra space": lambda t, d: (lambda i: t[:i] + " " + t[i:])(_pos(d, t)),
    "significant char": _insert,
    "delete char": _delete,
    "comment at end of line": _line_op(lambda ls, i: ls.__setitem__(i, ls[i] + " # note")),
    "comment line": _line_op(lambda ls, i: ls.insert(i, "# note")),
    "hash glued to value": _line_op(lambda ls, i: ls.__setitem__(i, ls[i] + "#x")),
    "duplicate key": _line_op(lambda ls, i: ls.insert(i, ls[i])),
    "indent line": _line_op(lambda ls, i: ls.__setitem__(i, " " + ls[i])),
    "block style": _line_op(_to_block),
    "document marker": _line_op(lambda ls, i: ls.insert(i, "---")),
    "tab for space": _sub_nth(r" ", lambda m: "\t"),
    "tab after colon": _sub_nth(r": ", lambda m: ":\t"),
    "single quotes": _sub_nth(r'"([^"\\]*)"', lambda m: "'" + m.group(1) + "'"),
    "unquote": _sub_nth(r'"([^"\\]*)"', lambda m: m.group(1)),
    "no space after comma": _sub_nth(r", ", lambda m: ","),
    "no space after colon": _sub_nth(r": ", lambda m: ":"),
    "trailing comma": _sub_nth(r"[}\]]", lambda m: ", " + m.group()),
    "change case": _sub_nth(r"\b(true|false|null)\b", lambda m: m.group().capitalize()),
    "to float": _sub_nth(r"\b[0-9]+\b", lambda m: m.group() + ".0"),
    "escape": _sub_nth(r'"([^"\\]*)"', lambda m: '"\\x41' + m.group(1) + '"'),
    "CRLF": lambda t, d: t.replace("\n", "\r\n"),
    "bare key": _line_op(lambda ls, i: ls.__setitem__(i, ls[i].split(":")[0] + ":")),
    "second node on a line": _sub_nth(r"[}\]]$", lambda m: m.group() + ", x: [y]"),
    "second list on a line": _sub_nth(r"[}\]]$", lambda m: m.group() + ", [y]"),
}

READERS = {"fast_load": fast_load, "whole": _load_whole, "lines": _load_lines}


def _mutated_agree_or_decline(text: str, draw: st.DataObject,
                              readers: dict[str, Callable[[str], Any]]) -> None:
    """Apply 1-3 hand-written-style mutations; each reader declines or reads as PyYAML."""
    names = draw.draw(st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=3))
    for name in names:
        text = MUTATIONS[name](text, draw)
    for reader, load in readers.items():
        fast = load(text)
        if fast is None:
            continue
        for loader in LOADERS:
            try:
                loaded = yaml.load(text, Loader=loader)  # noqa: S506
            except yaml.YAMLError as exc:
                pytest.fail(f"{reader} accepted {text!r} ({names}) that PyYAML refuses: {exc}")
            assert same(fast, loaded), (reader, names, text)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(front_matter_dicts(), st.data())
def test_fast_load_never_disagrees_on_hand_written_variants(
    data: dict[str, Any], draw: st.DataObject
) -> None:
    _mutated_agree_or_decline(front_matter(data), draw, READERS)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(front_matter_dicts(), st.data())
def test_block_style_variants_never_disagree(data: dict[str, Any], draw: st.DataObject
                                            ) -> None:
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True,
                          default_flow_style=False)
    _mutated_agree_or_decline(text, draw, {"fast_load": fast_load})


@settings(max_examples=300)
@given(st.lists(st.text(st.sampled_from("ab01 :,[]{}#-\"'?\\ntx"), max_size=20), max_size=4))
def test_fast_load_on_arbitrary_lines(lines: list[str]) -> None:
    text = "\n".join(lines)
    for load in READERS.values():
        fast = load(text)
        if fast is not None:
            for loaded in load_all(text):
                assert same(fast, loaded), text


@pytest.mark.parametrize(
    "text",
    [
        "a: b\t# a tab before a comment: PyYAML refuses it\n",
        "a: b#glued\n",
        "a:  b\n",
        "a: {x:  1}\n",
        "a: {x: 1,  y: 2}\n",
        "a: b\na: c\n",
        "a:\tb\n",
        "a: [b,\tc]\n",
        "a: 'b'\n",
        "a: b\r\nc: d\r\n",
        "a: [b,c]\n",
        "a: [b, ]\n",
        "a: ~\n",
        "a: Null\n",
        "a: yes\n",
        "a: 1.5\n",
        "a: 0x1f\n",
        "a: 2024-01-01\n",
        "a: !!str 1\n",
        "a: &x b\n",
        "a: |\n  b\n",
        "a:\n",
        "---\na: b\n",
        "null: b\n",
        "yes: b\n",
        "a: \"\\ud83d\\ude00\"\n",
        "a: [[b]]]\n",
        "a: {b: 1} c\n",
        "a: {b: 1}, c: d\n",
        "a: [b], [c]\n",
        "a:\n  - {x: 1}, {y: 2}\n",
        "a:\n  - {a: [b\n  - [c]]}, {d: e}\n",
        "a: \n",
    ],
)
def test_hand_written_yaml_goes_to_pyyaml(text: str) -> None:
    for load in READERS.values():
        assert load(text) is None
    try:
        load_all(text)  # the fallback answers, or reports the error with its line
    except yaml.MarkedYAMLError as exc:
        assert exc.problem_mark is not None


@pytest.mark.parametrize("text", [
    "a: b # comment\n",
    "# comment\na: b\n",
    "  # indented comment line\na: [x, y]   # after a list\n",
    "kind: fact                  # fact | caution\nevidence:   # items follow\n"
    "  - {run: r-1, observed: \"x # not a comment\"} # but this is\n",
    'title: "a # b"\n',
])
def test_comments_are_read_as_pyyaml_reads_them(text: str) -> None:
    expected = load_all(text)
    fast = fast_load(text)
    if "but this is" in text:
        assert fast is None  # a comment after a quoted string: left to PyYAML
        return
    assert fast is not None
    assert all(same(fast, e) for e in expected)


@pytest.mark.parametrize("text", [
    "a:\n  x: 1\n",
    "a:\n- {b: 1}\n",
    "a:\n- b\n- c\nd: e\n",
    "a:\n  - b\n  - c\n",
    "ev:\n- run: r-1\n  step: 3\n- run: r-2\n  step: null\n",
    "h:\n- valid:\n    from: 0\n    until: 3\n  title: T\n",
    "r:\n  sup:\n  - x\n  by: null\n  cites: []\n",
    'a:\n  t: "q: \\"x\\", y"\n  f: [b, "c d", {e: 1}]\n  n: -7\n  s: "012"\n',
])
def test_block_style_is_read_as_pyyaml_reads_it(text: str) -> None:
    fast = fast_load(text)
    assert fast is not None, text
    for loaded in load_all(text):
        assert same(fast, loaded), text


@pytest.mark.parametrize("text", [
    "a:\n  x: 1\n y: 2\n",  # uneven indentation
    "a:\n  x: long words\n    wrapped on\n",  # a wrapped scalar
    "a:\n- 'quoted'\n",
    "a:\n- - x\n",
    "a:\n  x:\nb: 1\n",  # `x:` with nothing under it
    "a:\n  x: 1, y: 2\n",
    "a:\n- b: 1, c: 2\n",
    "a:\n  x: 1\n  x: 2\n",  # a repeated key: PyYAML's strict loader reports it
])
def test_block_style_outside_the_subset_goes_to_pyyaml(text: str) -> None:
    assert fast_load(text) is None, text


def test_duplicate_flow_keys_read_as_pyyaml_reads_them() -> None:
    # PyYAML keeps the last value of a repeated flow-mapping key, and so does fast_load.
    text = "a: {x: 1, x: 2}\n"
    fast = fast_load(text)
    for loaded in load_all(text):
        assert fast is None or same(fast, loaded)


def test_fast_load_reads_the_canonical_subset() -> None:
    text = (
        'a: b\nn: -12\nz: null\nt: true\nq: "yes"\ne: []\nm: {}\n'
        'f: {x: [1, "2", {y: null}], "k y": z}\nl:\n  - {r: r-1}\n  - [c]\n'
    )
    expected = {"a": "b", "n": -12, "z": None, "t": True, "q": "yes", "e": [], "m": {},
                "f": {"x": [1, "2", {"y": None}], "k y": "z"}, "l": [{"r": "r-1"}, ["c"]]}
    assert same(fast_load(text), expected)
    for loaded in load_all(text):
        assert same(loaded, expected)


# --- regressions -------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["k" * 1100, "\x00" * 200, "é" * 1030])
def test_regression_keys_past_yaml_implicit_key_limit(key: str) -> None:
    # YAML forgets an implicit key longer than 1024 characters: PyYAML and libyaml refuse
    # `{<long key>: 1}`. fast_load used to accept it, and dump_value used to write it.
    implicit = "k: {" + dump_scalar(key) + ": 1}\n"
    for loader in LOADERS:
        with pytest.raises(yaml.YAMLError):
            yaml.load(implicit, Loader=loader)  # noqa: S506
    assert fast_load(implicit) is None
    text = "k: " + dump_value({"a": 0, key: 1}) + "\n"
    assert "{a: 0, ? " in text
    for loaded in load_all(text):
        assert same(loaded, {"k": {"a": 0, key: 1}})
    assert fast_load(text) is None  # explicit keys are left to PyYAML


def test_short_keys_stay_implicit() -> None:
    key = "k" * 1000
    assert dump_value({key: 1}) == "{" + key + ": 1}"


def test_regression_deep_nesting_declines_instead_of_recursing() -> None:
    text = "a: " + "[" * 5000 + "]" * 5000 + "\n"
    assert fast_load(text) is None  # used to raise RecursionError
    shallow = "a: " + "[" * 60 + "]" * 60 + "\n"
    assert fast_load(shallow) == load_all(shallow)[0]


def test_regression_int_past_python_digit_limit_declines() -> None:
    assert fast_load("a: " + "1" * 5000 + "\n") is None  # used to raise ValueError
    assert fast_load("a: [" + "9" * 5000 + "]\n") is None


@pytest.mark.parametrize("text", ["", "\n", "\n\n"])
def test_regression_empty_document_is_not_an_empty_mapping(text: str) -> None:
    # PyYAML reads an empty document as None; fast_load used to answer {}.
    assert load_all(text) == [None, None]
    assert fast_load(text) is None


def test_regression_no_catastrophic_backtracking_on_near_canonical_lines() -> None:
    # An ambiguous pattern once made this take exponential time; it must answer at once.
    for text in ("k: [" + "ab " * 40 + ",]\n", "k: {" + "a:b c" * 60 + ": ,}\n",
                 "k: [" + "x" * 5000 + " ]\n"):
        fast = fast_load(text)
        assert fast is None or any(same(fast, loaded) for loaded in load_all(text))


# --- the YAML 1.1 implicit types, without PyYAML: held to its resolver ----------------------
_RESOLVER = yaml.resolver.Resolver()


def _pyyaml_plain_str(s: str) -> bool:
    tag = _RESOLVER.resolve(yaml.ScalarNode, s, (True, False))
    return bool(tag == "tag:yaml.org,2002:str")


@settings(max_examples=1500)
@given(st.one_of(
    st.from_regex(r"[-+0-9.<=~][-+0-9._:eEbBxXoOaAfF<=~ TtZinfINFaNn]{0,24}", fullmatch=True),
    st.from_regex(r"[-+]?[0-9]{1,4}(?:[-:._][0-9]{1,3}){0,4}(?:[Tt ][0-9:. ]{0,12})?"
                  r"(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?)?", fullmatch=True),
    st.from_regex(r"[0-9]{3,5}-[0-9]{1,3}-[0-9]{1,3}", fullmatch=True),
    st.from_regex(r"[-+]?[0-9]{1,3}(?::[0-9]{1,2}){1,3}(?:\.[0-9]{0,2})?", fullmatch=True),
    st.from_regex(r"[-+]?0[bx0-9][0-9a-fA-F_]{0,6}", fullmatch=True),
    st.from_regex(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]{1,2})[0-9]{1,2}:[0-9]{2}:"
                  r"[0-9]{2}(?:\.[0-9]{0,3})?[ \t]?(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?)?",
                  fullmatch=True),
))
@example("0b2")
@example("0b")
@example("09")
@example("0x")
@example("0xg")
@example("1:60")
@example("1:5.")
@example("-.inf")
@example(".NaN")
@example("2024-01-01T1:00:00")
@example("2024-01-01 10:00:00 +5")
@example("<<")
@example("~")
@example("=")
def test_is_plain_str_agrees_with_pyyamls_resolver(s: str) -> None:
    from memidex.records.yamlfast import _YAML11_TYPED

    assert (not _YAML11_TYPED.fullmatch(s)) == _pyyaml_plain_str(s), s


@pytest.mark.parametrize("s", ["120 ms", "3 items", "-x", "+1 more", "1.2.3", "10:75",
                               "2024-1-1", "0b12", "08", "0x", ".", "..", "<", "==", "~x",
                               "1_000 ms", "2024-01-01 x"])
def test_strings_a_yaml_11_reader_keeps_as_strings(s: str) -> None:
    from memidex.records.yamlfast import _YAML11_TYPED

    assert not _YAML11_TYPED.fullmatch(s)
    assert _pyyaml_plain_str(s)


def test_writing_a_record_imports_no_pyyaml() -> None:
    import subprocess
    import sys

    code = ("import sys; from memidex.records.yamlfast import is_plain_str; "
            "assert is_plain_str('120 ms') and not is_plain_str('1:20'); "
            "print('yaml' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
