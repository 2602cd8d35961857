"""Search by meaning, wired: the index's vectors kept current by content key, the
``vector`` and ``hybrid`` strategies, the levels ``doctor`` reports, and curation's
near-duplicate check — with tiny real models the tests build (tests/vectorkit), a real
SQLite index and the real CLI in subprocesses."""

from __future__ import annotations

import json
import math
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest import make_record, run_cli, write_record
from memidex import Memidex
from memidex.vectors.cache import ModelCache
from vectorkit import make_onnx_model, make_static_model

RECORDS = [
    ("fact", "el:button:place-order", "Place order is disabled until terms are ticked",
     "The place order button is disabled on checkout until the terms box is ticked."),
    ("caution", "el:banner:cookie", "The cookie banner covers the place order button",
     "On checkout the cookie banner covers the button; close the banner first."),
    ("fact", "el:input:promo-code", "An expired promo code shows a toast",
     "Entering an expired promo code on the cart shows a toast."),
    ("procedure", "page:/login", "Log in as a guest before checkout",
     "Use the guest email account; login lockout follows three failures."),
    ("caution", "el:input:card", "The payment card sandbox times out",
     "The sandbox payment card form has a flaky timeout on staging."),
    ("fact", "page:/search", "Search suggestions appear after two letters",
     "The search box shows suggestions once two letters are typed."),
]


def _fill(repo: Path) -> list[str]:
    ids = []
    for kind, anchor, title, body in RECORDS:
        r = make_record(kind=kind, anchor=anchor, title=title, body=body)
        write_record(repo, r)
        ids.append(r.id)
    return ids


def _cache(repo: Path, *, onnx: bool = True, static: bool = False, seed: int = 7) -> Path:
    cache = repo.parent / "models"
    src = repo.parent / "src-models"
    mc = ModelCache(cache)
    if onnx:
        make_onnx_model(src / f"tiny-onnx-{seed}", seed=seed)
        mc.import_model(src / f"tiny-onnx-{seed}", name="tiny", replace_existing=True)
    if static:
        make_static_model(src / "tiny-static")
        mc.import_model(src / "tiny-static", name="floor", replace_existing=True)
    (repo / "memidex.toml").write_text(
        f'product = "shop-web"\nmodel_cache_dir = "{cache}"\n', encoding="utf-8")
    return cache


def _vectors(repo: Path) -> list[tuple[int, str, bytes]]:
    conn = sqlite3.connect(repo / "agent-qa-knowledge/memory/index/memidex.sqlite")
    try:
        return conn.execute("SELECT record_rowid, model_id, content_key FROM vectors"
                            " ORDER BY record_rowid").fetchall()
    finally:
        conn.close()


def test_no_model_vector_search_is_sparse_and_matches_the_in_memory_model(repo: Path
                                                                           ) -> None:
    from memidex.index.terms import tokens
    from memidex.vectors.sparse import SparseModel

    ids = _fill(repo)
    m = Memidex(repo)
    m.rebuild_index()
    result = m.search("banner covering the order button", strategy="vector")
    assert result.level == "lexical-only" and result.vector_strategy == "sparse"
    assert result.results[0].id == ids[1]
    # the same scores as the in-memory model over FTS5's own terms of every record
    docs = [(rid, tokens(f"{t}\n{b}\n{a}")) for rid, (_k, a, t, b) in zip(
        ids, [(k, "\n".join(m.show(rid).record.all_anchors), t, b)
              for rid, (k, _a, t, b) in zip(ids, RECORDS, strict=True)], strict=True)]
    model = SparseModel.fit(docs)
    want = model.query(tokens("banner covering order button"), k=10)
    got = {h.id: h.score for h in result.results}
    assert [h.id for h in want] == [h.id for h in result.results]
    for h in want:
        assert math.isclose(got[h.id], h.score, abs_tol=1e-6)
    # a norm computed once is kept
    conn = sqlite3.connect(repo / "agent-qa-knowledge/memory/index/memidex.sqlite")
    assert conn.execute("SELECT count(*) FROM sparse_norms").fetchone()[0] >= 2
    conn.close()
    # doctor: lexical-only, each model level says why not
    report = m.doctor()
    assert report.level == "lexical-only" and report.vector_strategy == "sparse"
    assert "no full model (ONNX) in the model cache" in report.levels["memidex"]
    assert "no static model" in report.levels["static-floor"]
    m.close()


def test_full_model_vectors_are_computed_once_per_text_and_survive_a_rebuild(repo: Path
                                                                             ) -> None:
    ids = _fill(repo)
    _cache(repo)
    m = Memidex(repo)
    m.rebuild_index()
    report = m.embed_vectors()
    assert (report.level, report.embedded, report.reused, report.missing) == (
        "memidex", len(ids), 0, 0)
    assert m.doctor().level == "memidex"
    result = m.search("cookie banner", strategy="vector")
    assert result.level == "memidex" and result.vector_strategy == "memidex"
    assert len(result.results) == len(ids)  # exact top-k: every record has a score
    assert all(-1.0 <= h.score <= 1.0 for h in result.results)
    before = _vectors(repo)
    assert len(before) == len(ids) and {v[1] for v in before} == {report.model_id}
    # a confirmation rewrites the file but not its text: the vector comes from the cache
    m.confirm(ids[0])
    m.search("cookie", strategy="vector")
    again = m.embed_vectors()
    assert again.embedded == 0 and again.missing == 0
    # an edit of the text embeds that record only
    r = m.show(ids[2]).record
    from dataclasses import replace

    write_record(repo, replace(r, body=r.body + " The toast is red."))
    edited = m.embed_vectors()
    assert (edited.records, edited.embedded) == (1, 1)
    m.close()
    # a rebuild starts an empty file: every vector is read from the side cache
    out = run_cli(repo, "knowledge", "rebuild-index", "--json", check=True)
    vectors = json.loads(out.stdout)["vectors"]
    assert vectors["embedded"] == 0 and vectors["reused"] == len(ids), vectors
    assert [k for _r, _m, k in _vectors(repo)] and len(_vectors(repo)) == len(ids)


def test_a_new_model_recomputes_every_vector(repo: Path) -> None:
    ids = _fill(repo)
    _cache(repo, seed=7)
    m = Memidex(repo)
    m.rebuild_index()
    first = m.embed_vectors()
    m.close()
    _cache(repo, seed=8)  # same name, other weights: another model id
    m = Memidex(repo)
    m.rebuild_index()
    second = m.embed_vectors()
    assert second.model_id != first.model_id
    assert second.embedded == len(ids)
    assert {v[1] for v in _vectors(repo)} == {second.model_id}
    m.close()


def test_secrets_are_masked_before_embedding(repo: Path) -> None:
    from memidex.index.vectors import content_key
    from memidex.vectors.text import record_text

    secret = "tok-9f8e7d6c5b4a"
    (repo / ".agent-qa").mkdir(exist_ok=True)
    (repo / ".agent-qa/secrets.yaml").write_text(f"api_token: {secret}\n", encoding="utf-8")
    r = make_record(title="The payment card sandbox", body=f"Use token {secret} on staging.")
    write_record(repo, r)
    _cache(repo)
    m = Memidex(repo)
    m.rebuild_index()
    report = m.embed_vectors()
    [(_rowid, model_id, key)] = _vectors(repo)
    text = record_text(r.title, r.body, r.all_anchors)
    assert key == content_key(model_id, text.replace(secret, "[secret:api_token]"))
    assert key != content_key(model_id, text)
    assert report.embedded == 1
    m.close()


def test_levels_fall_back_with_their_reasons(repo: Path) -> None:
    _fill(repo)
    cache = _cache(repo, onnx=True, static=True)
    m = Memidex(repo)
    m.rebuild_index()
    m.embed_vectors()
    assert m.doctor().level == "memidex"
    m.close()
    # a broken full model: a reason, and the static floor serves once it has vectors
    model = cache / "tiny" / "model.onnx"
    model.write_bytes(model.read_bytes()[:100])
    m = Memidex(repo)
    m.rebuild_index()
    levels = m.search_levels()
    assert levels.level != "memidex"
    assert "model.onnx" in (levels.status("memidex").reason or "")
    # the search embeds the static floor's vectors itself (well within its budget)
    hits = m.search("cookie banner", strategy="hybrid")
    assert hits.results and hits.level == "static-floor" and not hits.note
    report = m.embed_vectors()
    assert (report.level, report.records) == ("static-floor", 0)
    assert m.doctor().level == "static-floor"
    assert m.search("cookie banner", strategy="vector").vector_strategy == "static-floor"
    m.close()
    # the index gone for good (unreadable): bundle-scan, and search still answers
    index = repo / "agent-qa-knowledge/memory/index/memidex.sqlite"
    index.unlink()
    index.mkdir()
    m = Memidex(repo)
    scanned = m.search("cookie banner", strategy="hybrid")
    assert scanned.level == "bundle-scan" and scanned.results
    assert "vectors need the index" in scanned.note
    assert m.doctor().level == "bundle-scan"
    m.close()


def test_hybrid_puts_vector_hits_first_and_appends_full_text_ones(repo: Path) -> None:
    _fill(repo)
    m = Memidex(repo)
    m.rebuild_index()
    for fusion in ("append", "rrf"):
        result = m.search("expired promo toast timeout", strategy="hybrid", fusion=fusion,
                          limit=4)
        data = result.to_json()
        ids = [h["id"] for h in data["results"]]
        assert len(ids) == len(set(ids)) <= 4
        sources = [h["reasons"]["source"] for h in data["results"]]
        assert data["fallback"]["fusion"] == fusion
        if fusion == "append":
            # vector results first, then full-text ones; fired iff one was added
            assert sources == sorted(sources, key=lambda s: s != "vector")
            assert data["fallback"]["fired"] == ("full_text" in sources)
            assert data["fallback"]["added"] == sources.count("full_text")
    m.close()


def test_cli_strategy_json_matches_its_schema_and_bad_values_are_usage_errors(
        repo: Path) -> None:
    import jsonschema

    from conftest import REPO_ROOT

    _fill(repo)
    _cache(repo)
    schema = json.loads((REPO_ROOT / "docs/schemas/search.schema.json").read_text())
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    for strategy in ("lexical", "vector", "hybrid"):
        out = run_cli(repo, "knowledge", "search", "cookie banner", "--strategy", strategy,
                      "--json", check=True)
        doc = json.loads(out.stdout)
        jsonschema.validate(doc, schema)
        assert doc["strategy"] == strategy
        assert doc["level"] == ("lexical-only" if strategy == "lexical" else "memidex")
    text = run_cli(repo, "knowledge", "search", "cookie", "--strategy", "hybrid", check=True)
    assert "(hybrid, memidex)" in text.stdout
    bad = run_cli(repo, "knowledge", "search", "x", "--strategy", "semantic")
    assert bad.returncode == 2 and bad.stderr.startswith("error: unknown strategy")
    near = run_cli(repo, "knowledge", "search", "x", "--strategy", "vector", "--near",
                   "page:/login")
    assert near.returncode == 2 and "--near" in near.stderr
    for name in ("list", "embed"):
        out = run_cli(repo, "models", name, "--json", check=True)
        jsonschema.validate(json.loads(out.stdout), json.loads(
            (REPO_ROOT / f"docs/schemas/models-{name}.schema.json").read_text()))


def test_a_record_changed_while_it_was_embedded_is_not_given_the_old_vector(repo: Path
                                                                            ) -> None:
    from memidex.index.db import IndexDB
    from memidex.index.vectors import sync_vectors
    from memidex.vectors.levels import try_load

    ids = _fill(repo)
    cache = _cache(repo)
    m = Memidex(repo)
    m.rebuild_index()
    m.close()
    index = repo / "agent-qa-knowledge/memory/index/memidex.sqlite"
    emb = try_load(cache).embedder
    assert emb is not None

    class Racing:
        """Another process re-indexes the first record while this one embeds."""

        model_id, dim, level = emb.model_id, emb.dim, emb.level

        def embed(self, texts: list[str]) -> Any:
            other = sqlite3.connect(index)
            other.execute("UPDATE files SET sha256 = 'sha256:changed' WHERE record_rowid ="
                          " (SELECT min(rowid) FROM records)")
            other.commit()
            other.close()
            return emb.embed(texts)

    db = IndexDB.open(index, write=True)
    report = sync_vectors(db, Racing(), lambda t: t, None)  # type: ignore[arg-type]
    assert report.records == len(ids)
    rows = db.conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
    assert rows == len(ids) - 1  # the changed record waits for the next sync
    db.close()


def test_curation_proposes_a_near_duplicate_under_another_anchor(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memidex.app import semantic
    from memidex.vectors import dedupe

    _fill(repo)
    _cache(repo)
    m = Memidex(repo)
    m.rebuild_index()
    m.embed_vectors()
    check = semantic.duplicate_check(m.config, m._masker())
    assert check is not None
    # the same words under a renamed element: a duplicate (the tiny model's threshold)
    monkeypatch.setitem(dedupe.DUPLICATE_THRESHOLDS, "memidex", 0.95)  # type: ignore[index]
    renamed = make_record(anchor="el:button:submit-order",
                          title="Place order is disabled until terms are ticked",
                          body="The place order button is disabled on checkout until the "
                               "terms box is ticked.")
    reason = check(renamed)
    assert reason is not None and "el:button:place-order" in reason, reason
    # another kind, or words far from every record of that kind: no link
    assert check(make_record(kind="unknown", anchor="el:button:submit-order",
                             title=renamed.title, body=renamed.body)) is None
    m.close()


def test_no_duplicate_check_without_a_full_model(repo: Path) -> None:
    from memidex.app import semantic

    _fill(repo)
    _cache(repo, onnx=False, static=True)
    m = Memidex(repo)
    m.rebuild_index()
    m.embed_vectors()
    assert semantic.duplicate_check(m.config, m._masker()) is None
    m.close()


def test_the_sparse_norm_is_the_lnc_norm_of_fts5s_terms(repo: Path) -> None:
    from memidex.index.terms import tokens

    ids = _fill(repo)
    m = Memidex(repo)
    m.rebuild_index()
    m.search("order", strategy="vector")
    conn = sqlite3.connect(repo / "agent-qa-knowledge/memory/index/memidex.sqlite")
    rows = conn.execute("SELECT r.id, r.title, r.body, r.anchors, n.norm FROM sparse_norms n"
                        " JOIN records r ON r.rowid = n.record_rowid").fetchall()
    conn.close()
    assert rows and {r[0] for r in rows} <= set(ids)
    for _rid, title, body, anchors, norm in rows:
        tf = Counter(tokens(title) + tokens(body) + tokens(anchors))
        assert math.isclose(norm, math.sqrt(sum((1 + math.log(c)) ** 2 for c in tf.values())))
    m.close()


def test_an_ingest_proposes_a_renamed_elements_fact_instead_of_a_second_belief(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from learnkit import a_run, a_test, ingest, step
    from memidex.vectors import dedupe

    _cache(repo)

    def run(run_id: str, element: str) -> dict[str, Any]:
        return a_run(run_id, [a_test("checkout", [
            step(0, element, "Place order (disabled)", kind="assert-disabled",
                 anchors=("page:/checkout",))])])

    first = ingest(repo, run("r-1", "el:button:place-order"))
    assert "add" in [c["op"] for c in first["changes"]] and not first["proposals"]
    with Memidex(repo) as m:
        assert m.embed_vectors().missing == 0
    monkeypatch.setitem(dedupe.DUPLICATE_THRESHOLDS, "memidex", 0.9)  # type: ignore[index]
    second = ingest(repo, run("r-2", "el:button:submit-order"))
    assert second["proposals"], second  # held for a person, not a second belief
    with Memidex(repo) as m:
        [p] = m.proposals().proposals
        assert p.reason.startswith("looks like fact-el-button-place-order"), p.reason
    # without the model, the same run adds the fact (nothing to compare with)
    other = repo.parent / "other"
    from learnkit import init_repo

    init_repo(other)
    ingest(other, run("r-1", "el:button:place-order"))
    again = ingest(other, run("r-2", "el:button:submit-order"))
    assert not again["proposals"] and "add" in [c["op"] for c in again["changes"]]


def _side_cache(repo: Path) -> list[tuple[bytes, str]]:
    conn = sqlite3.connect(repo / "agent-qa-knowledge/memory/index/vectors-cache.sqlite")
    try:
        keys = [bytes(k) for (k,) in conn.execute("SELECT content_key FROM cache")]
        ids = [t for (t,) in conn.execute("SELECT DISTINCT text_id FROM by_file")]
        return [(k, "") for k in keys] + [(b"", t) for t in ids]
    finally:
        conn.close()


def test_a_secret_declared_after_embedding_leaves_nothing_of_it_in_the_side_cache(
        repo: Path) -> None:
    """The side cache outlives a rebuild, so it kept the unmasked text's key (a hash a
    guess is checked against) and its vector; and its ``text_id`` was an unsalted hash of
    the secrets — a quick oracle for a short one. Both go when the secrets change."""
    import hashlib
    import os

    from memidex._version import __version__
    from memidex.index.vectors import content_key
    from memidex.vectors.text import record_text

    secret = "tok-9f8e7d6c5b4a"
    r = make_record(title="The payment card sandbox", body=f"Use token {secret} on staging.")
    write_record(repo, r)
    _cache(repo)
    m = Memidex(repo)
    m.rebuild_index()
    m.embed_vectors()
    [(_rowid, model_id, _key)] = _vectors(repo)
    m.close()
    raw = content_key(model_id, record_text(r.title, r.body, r.all_anchors))
    assert raw in {k for k, _t in _side_cache(repo)}  # not yet a secret: kept as it is
    (repo / ".agent-qa").mkdir(exist_ok=True)
    (repo / ".agent-qa/secrets.yaml").write_text(f"api_token: {secret}\n", encoding="utf-8")
    m = Memidex(repo)
    hits = m.search("payment", strategy="vector")  # the index is rebuilt, masked
    assert hits.level == "memidex" and len(hits.results) == 1
    m.close()
    held = _side_cache(repo)
    assert raw not in {k for k, _t in held}
    guess = hashlib.sha256(repr((__version__, (("api_token", secret),), os.environ.get("HOME", "")))
                           .encode()).hexdigest()[:16]
    assert guess not in {t for _k, t in held}
    data = (repo / "agent-qa-knowledge/memory/index/vectors-cache.sqlite").read_bytes()
    assert raw not in data and secret.encode() not in data
    # the same secrets again: the side cache keeps what it has (nothing embedded again)
    out = run_cli(repo, "knowledge", "rebuild-index", "--json", check=True)
    vectors = json.loads(out.stdout)["vectors"]
    assert vectors["embedded"] == 0 and vectors["reused"] == 1, vectors
