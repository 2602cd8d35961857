"""The canonical row reader (memidex.index.rowread) against the full path.

For a file it accepts, ``canonical_rows`` must give exactly the rows the full path gives
(parse, validate, mask, ``record_row``, ``history_rows``, anchors, edges); for anything
else it must decline, so the full path's rows and problems stand. Held on generated
canonical records (any value, and plain ones the fast path must accept, with comments
too), on mutations of
them (either both agree or it declines), and on whole rebuilds compared table by table,
shadow tables of the FTS index included, with and without the reader, in one process and
through the parser pool.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memidex.config import load_config
from memidex.index import build, rowread
from memidex.index.rowread import canonical_rows
from memidex.index.rows import rows_of
from memidex.masking import Masker
from memidex.records import KINDS, STATUSES, HistoryEntry, Record, Relations, Trust, Valid
from memidex.records.codec import dump_record
from memidex.records.ids import record_id
from memidex.records.model import SOURCES, Evidence
from memidex.store.files import Store
from strategies import YAML_SPECIALS, records

REPO_ROOT = Path(__file__).resolve().parents[1]
PATH = "agent-qa-knowledge/memory/records/fact/x.md"


def full_rows(text: str) -> tuple[Any, ...] | None:
    """What the full path gives: (record row, versions, anchors, edges), or None when the
    file has problems."""
    fr = rows_of(PATH, text.encode("utf-8"), 0, 0, Masker())
    if fr.record is None:
        assert fr.problems
        return None
    return fr.record, fr.versions, fr.anchors, fr.edges


# --- plain records: what the fast path is for ----------------------------------------

_WORD = st.from_regex(r"[A-Za-z][a-z0-9]{0,7}", fullmatch=True).filter(
    lambda w: w not in {"yes", "no", "on", "off", "true", "false", "null", "Yes", "No", "On",
                        "Off", "True", "False", "Null"})
_PLAIN = st.lists(_WORD, min_size=1, max_size=5).map(" ".join)
_ANCHOR = st.builds(lambda t, v: f"{t}:{v}", st.sampled_from(["page", "el:button", "api:get",
                                                              "flow", "test"]),
                    st.from_regex(r"/?[a-z][a-z0-9/_-]{0,12}", fullmatch=True))
_ID = st.from_regex(r"[a-z][a-z0-9]{0,5}-[a-z0-9-]{1,12}", fullmatch=True)
_TEXTY = st.one_of(_PLAIN, st.sampled_from(['Said "hi", then left', "a: b", "x #y", "tab\tin",
                                            "line\nbreak", "é ü 😀", "", "(x)", "50%"]))
_SCALAR = st.one_of(_PLAIN, st.integers(-(10**6), 10**6), st.booleans(), st.none(),
                    st.sampled_from(["a, b", "1e3", "yes", '"q"']))
_ORD = st.integers(0, 10**6)
_YAML_WORDS = {"yes", "no", "on", "off", "true", "false", "null", "y", "n"}
_CHECK = st.from_regex(r"[a-z][a-z0-9-]{0,11}", fullmatch=True).filter(
    lambda w: w not in _YAML_WORDS) | st.sampled_from(["assert-text", "assert-visible"])
_ODD_CHECK = st.sampled_from(["on", "null", "No", "Assert", "a b", "x-", "1x", "assert-text"])
_CLAIM = st.one_of(st.from_regex(r"[0-9a-f]{12}", fullmatch=True),
                   st.sampled_from(["123456789012", "0b1010101010", "1e3456789012",
                                    "000000000000", "302bfccd127f"]))


@st.composite
def plain_records(draw: st.DrawFn, *, texty: bool = False) -> Record:
    """Valid records whose values are mostly of the shapes the fast path reads."""
    text = _TEXTY if texty else _PLAIN
    kind = draw(st.sampled_from(KINDS))
    anchor = draw(_ANCHOR)
    product = draw(st.sampled_from(["shop-web", "shop-ios", "App_2", "api.v2"]))
    scope = draw(st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)
                                 .filter(lambda k: k not in {"yes", "no", "on", "off", "null",
                                                              "true", "false"}),
                                 _SCALAR, max_size=2))
    status = draw(st.sampled_from(STATUSES))
    by = draw(st.none() | _ID) if status in ("superseded", "quarantined") else None
    previous = None
    if status == "quarantined":
        previous = draw(st.none() | st.sampled_from(["superseded"] if by else
                                                    ["active", "candidate", "superseded"]))
    trust = Trust(draw(st.sampled_from(SOURCES)), draw(_ORD), draw(_ORD), draw(st.none() | _ORD))
    at = draw(_ORD)
    history = []
    for _ in range(draw(st.integers(0, 2))):
        until = at + draw(st.integers(1, 50))
        full = draw(st.booleans())
        history.append(HistoryEntry(
            Valid(at, until), draw(_PLAIN), draw(text),
            trust=Trust(draw(st.sampled_from(SOURCES)), draw(_ORD), 0, None) if full else None,
            anchors=tuple(sorted({a for a in draw(st.lists(_ANCHOR, max_size=2))
                                  if a != anchor})) if full else None,
            status=draw(st.sampled_from(STATUSES)) if full else None))
        at = until + draw(st.integers(0, 3))
    evidence = tuple(draw(st.lists(st.builds(
        Evidence, run=st.none() | _WORD, test=st.none() | _WORD,
        step=st.none() | st.integers(0, 99), observed=st.none() | text,
        # as the curator writes them: the check, and the claim's hash (12 hex digits,
        # which YAML may read as a number: "123456789012", "0b1010101010")
        check=st.none() | (_ODD_CHECK | text if texty else _CHECK),
        extra=st.just(()) | _CLAIM.map(lambda c: (("claim", c),))), max_size=3)))
    ids = st.lists(_ID, max_size=2).map(lambda xs: tuple(sorted(set(xs))))
    return Record(
        id=record_id(kind, anchor, product, scope), kind=kind, status=status, product=product,
        anchor=anchor, title=draw(text.filter(lambda t: t and "\n" not in t)),
        scope=tuple(sorted(scope.items())),
        anchors=tuple(sorted({a for a in draw(st.lists(_ANCHOR, max_size=4)) if a != anchor})),
        trust=trust, valid=Valid(at, draw(st.none() | st.integers(at + 1, at + 99))),
        relations=Relations(draw(ids), by, draw(ids), draw(ids)), evidence=evidence,
        history=tuple(history), body=draw(text).strip("\n").rstrip(),
        written_by=draw(st.sampled_from([None, "template", "model"])),
        evidence_total=draw(st.none() | st.integers(len(evidence), 10**6)),
        previous_status=previous,
    )


@settings(max_examples=200, deadline=None)
@given(plain_records())
def test_plain_canonical_records_take_the_fast_path_with_the_same_rows(r: Record) -> None:
    text = dump_record(r)
    got = canonical_rows(text, PATH)
    assert got is not None, text
    assert got == full_rows(text)


@settings(max_examples=150, deadline=None)
@given(plain_records(), st.data())
def test_comments_are_taken_out_as_the_yaml_reader_takes_them_out(r: Record,
                                                                   data: st.DataObject) -> None:
    """The SPEC example's style: a comment after some values, and comment lines."""
    text = dump_record(r)
    end = text.index("\n---\n", 3)
    lines = text[:end].split("\n")
    for i in range(1, len(lines)):
        if data.draw(st.booleans()):
            lines[i] += data.draw(st.sampled_from(["  # note", " # a: b, [c]", " #"]))
    if data.draw(st.booleans()):
        lines.insert(data.draw(st.integers(1, len(lines))), "# a comment line")
    commented = "\n".join(lines) + text[end:]
    got = canonical_rows(commented, PATH)
    assert got is None or got == full_rows(commented) == full_rows(text), commented
    if '"' not in text[:end] and "'" not in text[:end]:
        assert got is not None, commented


@settings(max_examples=200, deadline=None)
@given(plain_records(texty=True))
def test_quoted_and_odd_values_give_the_same_rows_or_are_declined(r: Record) -> None:
    text = dump_record(r)
    got = canonical_rows(text, PATH)
    assert got is None or got == full_rows(text), text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_any_canonical_record_gives_the_same_rows_or_is_declined(r: Record) -> None:
    text = dump_record(r)
    got = canonical_rows(text, PATH)
    assert got is None or got == full_rows(text), text


_NOISE = st.one_of(st.sampled_from(list(" :,-#\"'[]{}\n\\\t?!&*|>%@`~=.0123")),
                   st.sampled_from(YAML_SPECIALS))


@settings(max_examples=250, deadline=None)
@given(plain_records(), st.data())
def test_a_mutated_file_gives_the_full_paths_rows_or_is_declined(r: Record,
                                                                 data: st.DataObject) -> None:
    """Insert, delete or replace something in the front matter (or put a YAML special
    after a separator): the reader either declines or agrees with the full path — it
    never accepts a file the full path refuses, nor reads a value otherwise."""
    text = dump_record(r)
    end = text.index("\n---\n", 3) + 5
    op = data.draw(st.sampled_from(["insert", "delete", "replace", "special", "swap",
                                    "number"]))
    if op in ("special", "number"):  # a whole value (up to the next separator) replaced
        seps = [i + 2 for i in range(end) if text.startswith((": ", ", "), i)]
        if op == "number":
            seps = [i for i in seps if text[i].isdigit()]
            if not seps:
                return
        at = data.draw(st.sampled_from(seps))
        stop = min(j for j in (text.find(c, at) for c in ",]}\n") if j >= 0)
        value = (str(data.draw(st.integers(0, 2000))) if op == "number"
                 else data.draw(st.sampled_from(YAML_SPECIALS)))
        mutated = text[:at] + value + text[stop:]
    elif op == "swap":
        lines = text[:end].split("\n")
        i = data.draw(st.integers(1, len(lines) - 3))
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
        mutated = "\n".join(lines) + text[end:]
    else:
        at = data.draw(st.integers(0, end))
        noise = data.draw(_NOISE)
        n = data.draw(st.integers(1, 4))
        if op == "insert":
            mutated = text[:at] + noise + text[at:]
        elif op == "delete":
            mutated = text[:at] + text[at + n:]
        else:
            mutated = text[:at] + noise + text[at + n:]
    got = canonical_rows(mutated, PATH)
    if got is not None:
        assert got == full_rows(mutated), mutated


def test_what_the_full_path_refuses_or_reads_otherwise_is_declined() -> None:
    scope = {"page": "/p"}
    good = dump_record(Record(
        id=record_id("fact", "page:/a", "shop", scope), kind="fact", status="active",
        product="shop", anchor="page:/a", title="Fine", scope=tuple(scope.items()),
        anchors=("page:/b",), valid=Valid(10, None),
        history=(HistoryEntry(Valid(1, 4), "One"), HistoryEntry(Valid(5, 9), "Two")),
        evidence=(Evidence(run="r-1", step=2),), evidence_total=3))
    assert canonical_rows(good, PATH) == full_rows(good) is not None
    refused = (
        ("title: Fine", "title: yes"),  # a boolean, not a title
        ("title: Fine", 'title: ""'),
        ("title: Fine", 'title: "a\\nb"'),
        ("product: shop", "product: null"),
        ("anchor: page:/a", "anchor: page:/b"),  # the id no longer fits
        ("anchors: [page:/b]", "anchors: [page:/b, nope]"),
        ("scope: {page: /p}", "scope: {page: /p, page: /q}"),
        ("{from: 5, until: 9}", "{from: 3, until: 9}"),  # overlaps the one before
        ("{from: 5, until: 9}", "{from: 5, until: 11}"),  # ends after valid.from
        ("{from: 5, until: 9}", "{from: 5, until: 5}"),
        ("valid: {from: 10, until: null}", "valid: {from: 10, until: 10}"),
        ("evidence_total: 3", "evidence_total: 0"),
        ("superseded_by: null", "superseded_by: fact-a-b"),  # while active
        ("status: active\n", "status: active\nprevious_status: candidate\n"),
        ("supersedes: []", f"supersedes: [fact-{'a' * 200}]"),  # longer than an id may be
        ("step: 2", "step: -2"),
        ("kind: fact\n", "kind: fact\nkind: fact\n"),
        ("title: Fine\n", "title: Fine\nanchros: []\n"),
    )
    for old, new in refused:
        bad = good.replace(old, new, 1)
        assert bad != good, old
        assert full_rows(bad) is None, bad
        assert canonical_rows(bad, PATH) is None, bad
    for comment in ("   # a comment", " #a comment, no: space"):
        commented = good.replace("title: Fine", "title: Fine" + comment)
        assert canonical_rows(commented, PATH) == full_rows(good)
    read_otherwise = (  # valid, but not in the shapes the reader takes
        good.replace("title: Fine", "title: Fine#glued"),  # part of the title
        good.replace("title: Fine", 'title: "Fine" # a comment after a quote'),
        "\ufeff" + good,
        good.replace("\n", "\r\n"),
        good.replace("title: Fine", "title: 'Fine'"),
    )
    for other in read_otherwise:
        assert full_rows(other) is not None, other
        assert canonical_rows(other, PATH) is None, other
    assert canonical_rows(good + "a\x00b\n", PATH) is None
    assert full_rows(good + "a\x00b\n") is None


# --- whole rebuilds, compared table by table -----------------------------------------


def _dump(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(db)
    out: dict[str, list[tuple[Any, ...]]] = {}
    names = [n for (n,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    assert "records_fts_data" in names and "records_fts_docsize" in names
    for name in names:
        try:
            rows = list(conn.execute(f"SELECT rowid, * FROM {name}"))  # noqa: S608
        except sqlite3.OperationalError:  # WITHOUT ROWID
            rows = list(conn.execute(f"SELECT * FROM {name}"))  # noqa: S608
        if name == "meta":
            rows = [r for r in rows if r[0] not in ("built_at", "snapshot", "secrets")]
        out[name] = rows
    for word in ("the", "checkout", "secret", "page", "zzz"):
        out[f"match {word}"] = list(conn.execute(
            "SELECT rowid, bm25(records_fts) FROM records_fts WHERE records_fts MATCH ? "
            "ORDER BY bm25(records_fts), rowid", (f'"{word}"',)))
    conn.close()
    return out


def _corpus(root: Path) -> None:
    """A generated corpus, some files rewritten in the SPEC example's style and in block
    style, bad files of every sort and hand-written odd but valid ones."""
    bench = str(REPO_ROOT / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import yaml

    from gen_corpus import generate
    from restyle import restyle_front

    generate(400, root, seed=11, jobs=1)
    records_dir = root / "agent-qa-knowledge" / "memory" / "records"
    files = sorted(records_dir.rglob("*.md"))
    assert sum("\nhistory:\n" in f.read_text() for f in files) >= 5
    for i, path in enumerate(files[:60]):
        text = path.read_text(encoding="utf-8")
        end = text.index("\n---\n", 3)
        front = yaml.safe_load(text[4 : end + 1])
        style = "spec" if i % 2 else "block"
        path.write_text("---\n" + restyle_front(front, style) + "---\n" + text[end + 5 :],
                        encoding="utf-8")
    fact = records_dir / "fact"
    sample = files[100].read_text(encoding="utf-8")
    (fact / "bad-yaml.md").write_text("---\nid: [unclosed\n---\nbody\n")
    (fact / "bad-key.md").write_text(sample.replace("\ntitle:", "\ntitel:", 1))
    (fact / "bad-id.md").write_text(sample.replace("\nid: ", "\nid: x", 1))
    (fact / "bad-bool.md").write_text(sample.replace("\nstatus: ", "\nstatus: yes\nx: ", 1))
    (fact / "bad-nul.md").write_text(sample + "a\x00b\n")
    (fact / "bad-utf8.md").write_bytes(sample.encode() + b"\xff\xfe\n")
    (fact / "bad-window.md").write_text(sample.replace("valid: {from: ", "valid: {from: 9", 1)
                                        .replace(", until: null}", ", until: 3}", 1))
    (fact / "no-front.md").write_text("just words\n")
    hist = next(t for t in (f.read_text(encoding="utf-8") for f in files[60:])
                if "\nhistory:\n" in t)
    lines = hist.split("\n")
    first = lines.index("history:") + 1
    lines.insert(first + 1, lines[first])  # the same window twice: they overlap
    (fact / "bad-history-overlap.md").write_text("\n".join(lines))
    (fact / "bom.md").write_text("\ufeff" + files[101].read_text(encoding="utf-8"))
    (fact / "crlf.md").write_text(files[102].read_text(encoding="utf-8").replace("\n", "\r\n"))
    for i, (status, prev, by) in enumerate((("quarantined", "superseded", "fact-a-b"),
                                            ("superseded", None, "fact-c-d"),
                                            ("active", None, "fact-e-f"))):  # the last: bad
        anchor = f"page:/odd-{i}"
        scope = {"page": "/p, q", "n": 3, "flag": True, "none": None}
        r = Record(id=record_id("fact", anchor, "shop-web", scope), kind="fact",
                   status=status, product="shop-web", anchor=anchor,
                   title='Saved, then "shown" #1', scope=tuple(sorted(scope.items())),
                   anchors=("el:button:a, b", "page:/café"),
                   relations=Relations(supersedes=("fact-x-y",), superseded_by=by),
                   history=(HistoryEntry(Valid(1, 4), "Was", "line\nbreak"),),
                   valid=Valid(5, None), previous_status=prev,
                   evidence=(Evidence(run="r-1", observed="ok", check="assert-visible"),),
                   body="Body with `code`.")
        (fact / f"{r.id}.md").write_text(dump_record(r), encoding="utf-8")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rowread") / "repo"
    _corpus(root)
    return root


def _rebuild(root: Path, db: Path, *, jobs: int) -> build.BuildReport:
    store = Store(load_config(root))
    return build.rebuild(store, db, jobs=jobs)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_rebuild_with_the_reader_equals_one_without(corpus: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      jobs: int) -> None:
    monkeypatch.setattr(build, "PARALLEL_MIN_FILES", 50)  # jobs=2: through the pool
    calls: list[int] = []
    real = rowread.canonical_rows

    def counted(text: str, relpath: str) -> Any:
        calls.append(1)
        return real(text, relpath)

    monkeypatch.setattr(rowread, "canonical_rows", counted)
    fast = _rebuild(corpus, tmp_path / "fast.sqlite", jobs=jobs)
    monkeypatch.setattr(rowread, "canonical_rows", lambda text, relpath: None)
    slow = _rebuild(corpus, tmp_path / "slow.sqlite", jobs=jobs)
    assert fast.records == slow.records > 300
    assert fast.problems == slow.problems
    reasons = " ".join(p.reason for p in fast.problems)
    for word in ("unknown key", "does not match", "NUL", "UTF-8", "YAML", "superseded_by",
                 "do not overlap"):
        assert word in reasons
    assert _dump(tmp_path / "fast.sqlite") == _dump(tmp_path / "slow.sqlite")
    if jobs == 1:
        assert len(calls) > 300  # (in the pool, the calls are counted in the workers)
    conn = sqlite3.connect(tmp_path / "fast.sqlite")
    (n_fast,) = conn.execute("SELECT count(*) FROM records WHERE path LIKE '%/odd-%' "
                             "OR title LIKE 'Saved, then%'").fetchone()
    assert n_fast == 2
    conn.close()


def test_with_a_secrets_file_the_masked_rows_are_the_full_paths(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    shutil.copytree(corpus, root)
    fact = root / "agent-qa-knowledge" / "memory" / "records" / "fact"
    target = sorted(fact.glob("fact-*.md"))[5]
    text = target.read_text(encoding="utf-8")
    target.write_text(text.rstrip("\n") + " The token is hunter2-topsecret.\n")
    (root / ".agent-qa").mkdir(exist_ok=True)
    (root / ".agent-qa" / "secrets.yaml").write_text("TOKEN: hunter2-topsecret\n")
    fast = _rebuild(root, tmp_path / "fast.sqlite", jobs=1)
    monkeypatch.setattr(rowread, "canonical_rows", lambda text, relpath: None)
    slow = _rebuild(root, tmp_path / "slow.sqlite", jobs=1)
    assert fast.problems == slow.problems
    dumped = _dump(tmp_path / "fast.sqlite")
    assert dumped == _dump(tmp_path / "slow.sqlite")
    assert "hunter2-topsecret" not in json.dumps(dumped["records"], default=str)
    assert "[secret:TOKEN]" in json.dumps(dumped["records"], default=str)


@given(st.dictionaries(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True),
    st.one_of(st.text(), st.integers(min_value=-10**18, max_value=10**18), st.booleans(),
              st.none()), max_size=5))
def test_the_scope_json_written_by_hand_is_jsons(scope: dict[str, Any]) -> None:
    from memidex.records.ids import record_id, scope_json

    assert rowread._scope_json(scope) == scope_json(scope)
    assert rowread._record_id("fact", "el:x:y", "shop-web", scope_json(scope)) == record_id(
        "fact", "el:x:y", "shop-web", scope)
