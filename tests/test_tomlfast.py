"""The quick TOML reader (memidex.tomlfast) never answers otherwise than tomllib: for a
text it accepts it gives tomllib's table, and it declines (None) the rest."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memidex.tomlfast import loads

# pieces of lines, the subset's and its near misses
_KEYS = st.sampled_from(["product", "a", "b", "x-1", "_k", "1234", "true", "a.b", '"q"',
                         "a b", "", "ключ", "a\u00a0"])
_SCALAR_TEXTS = [
    '"shop-web"', '""', '"a # b"', "'lit\\eral'", "''", '"tab\there"', '"é ü"', '"x\\n"',
    '"""', "'''", '"""x"""', '"unterminated', "0", "-0", "7", "-12", "+3", "01", "1_000",
    "0x1f", "123456789012345678", "1234567890123456789", "0.25", "-0.5", "1.", ".5",
    "00.5", "1e3", "1.5e3", "inf", "nan", "true", "false", "True", "1979-05-27",
    "[]", "[ ]", '["a", "b"]', '["a", "b",]', "[1, 2]", "[1,2 , 3 ]", "[,]", "[[1]]",
    '["a" "b"]', "[true, 1, 'x']", "{}", "{a = 1}", "[1", '"a"b', "1 2", "1#c", '"x"#c',
    "true]", "[1]]", "[1 2]", '"a"]', "-", "--1", "-01", "1.2.3", "0.1_0", "[\"a\",\t'b']",
]
_SCALARS = st.sampled_from(_SCALAR_TEXTS)
_SPACES = st.sampled_from(["", " ", "  ", "\t", " \t"])
_COMMENT = st.sampled_from(["", " # note", "# tight", "\t# tab", " #", " # \"quoted\" [x]"])


@st.composite
def _line(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["kv", "kv", "kv", "table", "blank", "comment", "raw"]))
    lead = draw(_SPACES)
    if kind == "kv":
        return (f"{lead}{draw(_KEYS)}{draw(_SPACES)}={draw(_SPACES)}{draw(_SCALARS)}"
                f"{draw(_SPACES)}{draw(_COMMENT)}")
    if kind == "table":
        name = draw(st.sampled_from(["index", "brief", "a", "a.b", " a ", "[a]", "", "b"]))
        return f"{lead}[{name}]{draw(_COMMENT)}"
    if kind == "blank":
        return lead
    if kind == "comment":
        return f"{lead}#{draw(st.text(max_size=10))}"
    return draw(st.text(max_size=20))


def _agrees(text: str) -> None:
    fast = loads(text)
    if fast is None:
        return
    assert tomllib.loads(text) == fast, text  # raises if tomllib refuses what was accepted
    assert {type(v) for v in fast.values()} == {type(v) for v in tomllib.loads(text).values()}


@settings(max_examples=750, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_line(), max_size=8), st.sampled_from(["\n", "\r\n"]),
       st.booleans())
def test_the_quick_reader_agrees_with_tomllib(lines: list[str], eol: str,
                                             final: bool) -> None:
    _agrees(eol.join(lines) + (eol if final else ""))


@pytest.mark.parametrize("value", _SCALAR_TEXTS)
@pytest.mark.parametrize("around", ["{v}", " {v} ", "\t{v}\t# c", "{v}# c"])
def test_each_value_alone(value: str, around: str) -> None:
    for text in (f"k ={around.format(v=value)}\n", f"[t]\nk={around.format(v=value)}"):
        _agrees(text)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=60))
def test_any_text_is_read_as_tomllib_reads_it_or_declined(text: str) -> None:
    _agrees(text)


@pytest.mark.parametrize("text, table", [
    ("", {}),
    ('product = "shop-web"\n', {"product": "shop-web"}),
    ('# memidex configuration\nproduct = "bench-shop"  # the default product\n'
     '# state_dir = ".agent-qa"\n', {"product": "bench-shop"}),
    ('lease_ttl_seconds = 30\n[brief]\nmax_records = 12\ncandidates = false\n'
     '[secrets]\nallow = ["AKIAEXAMPLE", \'lit\']\n[index]\nurl = ""\n',
     {"lease_ttl_seconds": 30, "brief": {"max_records": 12, "candidates": False},
      "secrets": {"allow": ["AKIAEXAMPLE", "lit"]}, "index": {"url": ""}}),
    ("[promotion]\nmin_success_rate = 0.75\n", {"promotion": {"min_success_rate": 0.75}}),
])
def test_what_memidex_files_hold_is_read(text: str, table: dict[str, object]) -> None:
    assert loads(text) == table == tomllib.loads(text)


@pytest.mark.parametrize("text", [
    'a = "x"\na = "y"\n',  # a key twice: tomllib's error
    "a = 1\n[a]\n",  # a table named like a key
    "[a]\n[a]\n",
    "[a.b]\n", "a.b = 1\n", '"a" = 1\n', "a = {b = 1}\n",  # dotted, quoted, inline
    'a = """\nx\n"""\n', "a = [\n  1,\n]\n",  # multi-line
    'a = "x\\ty"\n', "a = 1979-05-27\n", "a = inf\n", "a = 1e3\n", "a = 0x10\n",
    'a = "x"\r\n', 'a = "\x01"\n', "\ufeffa = 1\n",
])
def test_everything_else_is_left_to_tomllib(text: str) -> None:
    assert loads(text) is None


def test_the_reader_compiles_nothing_and_imports_nothing() -> None:
    import ast
    from pathlib import Path

    import memidex.tomlfast as mod

    tree = ast.parse(Path(mod.__file__).read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported == {"__future__"}


def test_a_configuration_nested_too_deep_is_one_error_not_a_traceback(tmp_path: Path) -> None:
    """tomllib recurses once per nested array: 5,000 deep exhausts Python's stack. The
    file is refused as any bad TOML is (ConfigError: one `error:` line, exit 4), and the
    CLI's first look at it (store.peek) answers "not TOML" instead of raising."""
    from memidex.config import load_config
    from memidex.errors import ConfigError
    from memidex.store.peek import config_keys

    (tmp_path / "memidex.toml").write_text(
        'product = "shop"\nx = ' + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config(tmp_path)
    assert config_keys(str(tmp_path), ("product",)) is None
