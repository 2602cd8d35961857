"""memidex.plain's value types behave as the dataclasses they replace: equality, hash,
repr, replace, pickling and copying, assignment refused when frozen — held to a real
dataclass of the same fields by a property test."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memidex.config import load_config
from memidex.config.tables import IndexSettings
from memidex.errors import Problem
from memidex.index.staleness import Snapshot
from memidex.plain import Frozen, Plain, set_field
from memidex.search.ranking import SearchHit


class Point(Frozen):
    __slots__ = ("x", "y", "note")
    _eq_fields = ("x", "y")
    _repr_hidden = ("note",)
    x: int
    y: tuple[str, ...]
    note: str

    def __init__(self, x: int, y: tuple[str, ...] = (), note: str = "") -> None:
        set_field(self, "x", x)
        set_field(self, "y", y)
        set_field(self, "note", note)


@dataclasses.dataclass(frozen=True)
class PointDC:
    x: int
    y: tuple[str, ...] = ()
    note: str = dataclasses.field(default="", compare=False, repr=False)


class Box(Plain):
    __slots__ = ("items", "name")

    def __init__(self, items: list[int] | None = None, name: str = "") -> None:
        self.items: list[int] = [] if items is None else items
        self.name = name


@dataclasses.dataclass
class BoxDC:
    items: list[int] = dataclasses.field(default_factory=list)
    name: str = ""


values = st.tuples(st.integers(), st.lists(st.text(max_size=3), max_size=3).map(tuple),
                   st.text(max_size=5))


@given(values, values)
def test_a_frozen_type_behaves_as_its_frozen_dataclass(a: tuple, b: tuple) -> None:  # type: ignore[type-arg]
    pa, pb, da, db = Point(*a), Point(*b), PointDC(*a), PointDC(*b)
    assert (pa == pb) == (da == db)
    assert (hash(pa) == hash(pb)) == (hash(da) == hash(db)) or pa != pb
    assert repr(pa).replace("Point(", "PointDC(") == repr(da)
    assert pa.replace(x=a[0] + 1) == Point(a[0] + 1, a[1], a[2])
    assert dataclasses.replace(da, note="n") == da  # note is not compared, in both
    assert pa.replace(note="n") == pa
    for copied in (pickle.loads(pickle.dumps(pa)), copy.copy(pa), copy.deepcopy(pa)):
        assert copied == pa and copied.note == pa.note and type(copied) is Point
    assert pa != (a[0], a[1]) and pa.__eq__(da) is NotImplemented


@given(st.lists(st.integers(), max_size=4), st.text(max_size=4))
def test_a_mutable_type_behaves_as_its_dataclass(items: list[int], name: str) -> None:
    b, d = Box(list(items), name), BoxDC(list(items), name)
    assert repr(b).replace("Box(", "BoxDC(") == repr(d)
    assert b == Box(list(items), name) and (b == Box([*items, 1], name)) is False
    b.items.append(7)
    assert b.items == [*items, 7]
    b.name = "renamed"  # mutable, like a plain dataclass
    assert b.replace(name="x").items is b.items  # a shallow copy, as dataclasses.replace
    with pytest.raises(TypeError):
        hash(b)
    with pytest.raises(TypeError):
        hash(d)
    assert Box().items is not Box().items  # a fresh default each time


def test_assignment_to_a_frozen_value_is_refused() -> None:
    p = Point(1)
    with pytest.raises(AttributeError, match="cannot assign to field 'x'"):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError, match="cannot delete field 'x'"):
        del p.x  # type: ignore[misc]
    with pytest.raises(AttributeError):
        p.other = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        p.replace(nope=1)


def test_the_converted_types_keep_their_dataclass_behaviour(tmp_path: object) -> None:
    # reasons is left out of a hit's equality and hash (it was field(compare=False))
    hit = SearchHit("fact-x", "fact", "active", "T", 1.0, "reliable", "s", "p", ("a:b",),
                    "shop")
    assert hit == hit.replace(reasons={"rank": 1}) and hash(hit) == hash(
        hit.replace(reasons={"rank": 1}))
    assert "reasons=None" in repr(hit)
    # a team index URL may hold a password: never in the repr
    settings = IndexSettings("postgresql://u:secret@h/db")
    assert "secret" not in repr(settings) and settings.url is not None
    # the problem a config check reports, hashable and printable as before
    problem = Problem("memidex.toml", 3, "bad key")
    assert {problem, Problem("memidex.toml", 3, "bad key")} == {problem}
    assert str(problem) == "memidex.toml:3: bad key"
    assert repr(problem) == "Problem(path='memidex.toml', line=3, reason='bad key')"
    # snapshots round-trip their JSON, and replace keeps the rest
    snap = Snapshot(method="git", head="abc", dirs={"r": 1}, named=["x"])
    assert Snapshot.from_json(snap.to_json()) == snap
    assert snap.replace(named=["y"]).dirs is snap.dirs


def test_a_config_is_immutable_and_copies_by_value(repo: object) -> None:
    config = load_config(repo)  # type: ignore[arg-type]
    assert pickle.loads(pickle.dumps(config)) == config
    assert config.replace(product="other").product == "other" and config.product == "shop-web"
    with pytest.raises(AttributeError):
        config.product = "x"  # type: ignore[misc]
    assert config.to_json()["learning"] == {
        "evidence_max": 5, "deprecate_after_runs": 3, "max_rewrites": 20,
        "max_body_change": 0.8, "resolve_after_runs": 2, "retire_after_failures": 2}


def test_doctor_names_the_yaml_loader_without_importing_pyyaml() -> None:
    import subprocess
    import sys

    code = ("import sys\nfrom memidex.app.health import _yaml_loader_name\n"
            "name = _yaml_loader_name()\nloaded = 'yaml' in sys.modules\n"
            "from memidex.records.yamlfast import yaml_loader\n"
            "print(name, loaded, yaml_loader().__name__, _yaml_loader_name())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[1] == "False" and out[0] == out[2] == out[3], out


def test_the_named_tuple_stand_in_behaves_as_typings() -> None:
    """memidex.plain.NamedTuple (run time) against typing.NamedTuple (what mypy sees):
    fields, defaults, docstring, methods, equality, repr, _replace."""
    import typing

    from memidex import plain

    def make(base: Any) -> Any:
        class Pair(base):  # type: ignore[misc, valid-type]
            """Two things."""

            first: int
            second: tuple[str, ...]
            third: str | None = None

            def total(self) -> int:
                return self.first + len(self.second)

        return Pair

    ours, theirs = make(plain.NamedTuple), make(typing.NamedTuple)
    for cls in (ours, theirs):
        p = cls(1, ("a", "b"))
        assert cls._fields == ("first", "second", "third")
        assert p.third is None and p.total() == 3 and cls.__doc__ == "Two things."
        assert p == (1, ("a", "b"), None) and tuple(p) == (1, ("a", "b"), None)
        assert p._replace(third="x").third == "x"
        assert repr(p) == "Pair(first=1, second=('a', 'b'), third=None)"
        assert isinstance(p, tuple)
    assert ours(2, ()) == theirs(2, ())


def test_the_index_rows_are_named_tuples_that_pickle() -> None:
    """The rows a parser process sends its parent are the stand-in's, importable by name."""
    from memidex.index.batches import Batch
    from memidex.index.rows import FileRows

    rows = FileRows(("p", "fact", 1, 2, 3, "sha"), None, (), (), (), ())
    batch = Batch([], [], [], [], [], [], 7)
    assert pickle.loads(pickle.dumps(rows)) == rows and batch.fts is None
    assert pickle.loads(pickle.dumps(batch)) == batch
    assert FileRows.__module__ == "memidex.index.rows" and Batch._fields[-1] == "fts"
