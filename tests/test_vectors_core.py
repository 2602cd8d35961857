"""memidex.vectors' pure parts: blobs, the content-hash cache, exact top-k, sparse tf·idf,
the hybrid rule, confidence labels, near duplicates, record text, safetensors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memidex.vectors import (
    THRESHOLDS,
    ModelCacheError,
    SparseModel,
    VectorCache,
    VectorMatrix,
    anchor_words,
    confidence,
    content_key,
    decode_f16,
    decode_i8,
    decode_vector,
    encode_f16,
    encode_i8,
    hybrid,
    near_duplicates,
    needs_fallback,
    rank_postings,
    record_text,
)
from memidex.vectors.sparse import doc_weights, query_weights
from memidex.vectors.tensors import encode_safetensors, read_safetensors

finite = st.floats(-60000, 60000, allow_nan=False, width=32)


# --- blobs ----------------------------------------------------------------------------

@given(st.lists(finite, min_size=1, max_size=64))
def test_float16_round_trip(values: list[float]) -> None:
    v = np.array(values, dtype=np.float32)
    blob = encode_f16(v)
    assert len(blob) == 2 * len(v)
    back = decode_f16(blob, len(v))
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, v.astype(np.float16).astype(np.float32))
    assert encode_f16(back) == blob  # a second round trip changes nothing
    np.testing.assert_array_equal(decode_vector(blob, len(v)), back)


@given(st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=5, max_size=64))
def test_int8_round_trip_is_within_half_a_step(values: list[float]) -> None:
    v = np.array(values, dtype=np.float32)
    blob = encode_i8(v)
    assert len(blob) == len(v) + 4
    back = decode_i8(blob, len(v))
    step = max(np.abs(v).max(), 1e-30) / 127
    assert np.abs(back - v).max() <= step / 2 + 1e-6
    np.testing.assert_array_equal(decode_vector(blob, len(v)), back)


def test_blobs_refuse_bad_input() -> None:
    with pytest.raises(ValueError, match="NaN"):
        encode_f16([1.0, float("nan")])
    with pytest.raises(ValueError, match="8 bytes, got 6"):
        decode_f16(b"\0" * 6, 4)
    with pytest.raises(ValueError, match="neither"):
        decode_vector(b"\0" * 7, 4)


def test_cache_recomputes_only_changed_texts() -> None:
    cache = VectorCache("m@1")
    plan = cache.plan(["a", "b", "b"])
    assert sorted(plan.to_embed.values()) == ["a", "b"] and not plan.unused
    keys = list(plan.to_embed)
    cache.put(keys, np.eye(2, 3))
    assert len(cache) == 2
    again = cache.plan(["a", "b"])
    assert not again.to_embed and not again.unused
    edited = cache.plan(["a", "b2"])
    assert list(edited.to_embed.values()) == ["b2"]
    assert edited.unused == {cache.key("b")}
    cache.drop(edited.unused)
    assert cache.key("b") not in cache and cache.get(cache.key("a")) is not None
    # another model: every text is new
    other = VectorCache("m@2", dict(cache.items()))
    assert sorted(other.plan(["a"]).to_embed.values()) == ["a"]
    assert content_key("m@1", "a") != content_key("m@2", "a")
    assert content_key("m@1", "a").startswith("sha256:")


# --- exact top-k ----------------------------------------------------------------------

@given(st.integers(1, 40), st.integers(1, 12), st.integers(0, 2**32 - 1), st.integers(1, 50))
def test_top_k_equals_a_full_sort(n: int, k: int, seed: int, dim: int) -> None:
    rng = np.random.default_rng(seed)
    m = rng.integers(-3, 4, size=(n, dim)).astype(np.float32)  # small ints: many ties
    ids = [f"r{i:03d}" for i in rng.permutation(n)]
    vm = VectorMatrix(ids, m)
    q = rng.normal(size=dim)
    mask = rng.random(n) < 0.7
    got = vm.top_k(q, k, mask)
    normed = m / np.where(np.linalg.norm(m, axis=1, keepdims=True) > 0,
                          np.linalg.norm(m, axis=1, keepdims=True), 1)
    exact = normed @ (q / np.linalg.norm(q))
    s = vm.scores(q)  # the float32 scores top_k ranks by
    assert np.abs(s - exact).max() < 1e-5
    want = sorted((i for i in range(n) if mask[i]), key=lambda i: (-float(s[i]), ids[i]))[:k]
    assert [h.id for h in got] == [ids[i] for i in want]
    assert all(h.score == round(float(s[h.row]), 6) for h in got)
    # a contiguous range of rows (one product's records) is the same as a mask of it
    lo, hi = sorted(rng.integers(0, n + 1, size=2).tolist())
    in_range = np.zeros(n, dtype=bool)
    in_range[lo:hi] = True
    # (BLAS may round a row's product differently in a slice: scores within 1e-5, and
    # ids equal but where such near-ties swap)
    want_r = vm.top_k(q, k, mask & in_range)
    for got_r in (vm.top_k(q, k, mask, rows=slice(lo, hi)),
                  vm.top_k(q, k, mask[lo:hi], rows=slice(lo, hi))):
        assert len(got_r) == len(want_r)
        for a, b in zip(got_r, want_r, strict=True):
            assert abs(a.score - b.score) <= 1e-5
            assert a.id == b.id or abs(s[a.row] - s[b.row]) <= 1e-5
            assert ids[a.row] == a.id


def test_top_k_min_score_blobs_and_shapes() -> None:
    m = np.array([[1, 0], [0.8, 0.6], [0, 1]], dtype=np.float32)
    vm = VectorMatrix(["a", "b", "c"], m)
    assert [h.id for h in vm.top_k([1, 0], 3, min_score=0.5)] == ["a", "b"]
    blobs = [encode_f16(r) for r in vm.matrix]
    again = VectorMatrix.from_blobs(["a", "b", "c"], blobs, 2)
    assert [h.id for h in again.top_k([0, 1], 2)] == ["c", "b"]
    with pytest.raises(ValueError, match="components"):
        vm.top_k([1, 0, 0], 1)
    with pytest.raises(ValueError, match="not 4"):
        VectorMatrix.from_blobs(["a"], [b"\0" * 6], 2)
    assert VectorMatrix([], np.zeros((0, 4))).top_k([1, 0, 0, 0], 5) == []


# --- sparse tf·idf --------------------------------------------------------------------

docs_strategy = st.dictionaries(
    st.sampled_from([f"d{i}" for i in range(12)]),
    st.lists(st.sampled_from("alpha beta gamma delta order cart login card".split()),
             min_size=1, max_size=8), max_size=12)


@given(docs_strategy, docs_strategy, st.lists(st.sampled_from(
    "alpha beta gamma order zeta".split()), min_size=1, max_size=4))
def test_sparse_incremental_equals_a_fit(first: dict[str, list[str]],
                                         later: dict[str, list[str]], q: list[str]) -> None:
    model = SparseModel.fit(sorted(first.items()))
    for doc in sorted(first):
        if doc not in later:
            model.remove(doc)
    for doc, toks in sorted(later.items()):
        model.add(doc, toks)
    fresh = SparseModel.fit(sorted(later.items()))
    assert model.query(q, 20) == fresh.query(q, 20)
    for hit in fresh.query(q, 20):
        assert 0 < hit.score <= 1.0 + 1e-9


def test_sparse_scores_and_ranks() -> None:
    model = SparseModel.fit([
        ("a", "place order button disabled".split()),
        ("b", "cookie banner covers place order".split()),
        ("c", "login lockout after five attempts".split()),
    ])
    hits = model.query("place order disabled".split(), 5)
    assert [h.id for h in hits] == ["a", "b"]
    assert hits[0].matched == 3 and hits[1].matched == 2
    assert model.query(["nothing"], 5) == []
    assert [h.id for h in model.query(["order"], 5, allowed=lambda d: d != "a")] == ["b"]
    same = SparseModel.fit([("x", ["w", "v"]), ("y", ["w", "v"])])
    assert [h.id for h in same.query(["w"], 2)] == ["x", "y"]  # ties break on id
    assert same.query(["w", "v"], 1)[0].score == pytest.approx(1.0)


def test_sparse_takes_external_document_frequencies() -> None:
    docs = [("a", ["rare", "common"]), ("b", ["common"])]
    own = SparseModel.fit(docs)
    external = SparseModel.fit(docs, df={"rare": 1, "common": 1000}, n_docs=1000)
    assert own.df("common") == 2 and external.df("common") == 1000
    # with `common` in nearly every record, a record matching only `common` scores low
    ext = {h.id: h.score for h in external.query(["rare", "common"], 2)}
    mine = {h.id: h.score for h in own.query(["rare", "common"], 2)}
    assert ext["b"] < 0.15 < mine["b"]
    qw = query_weights(["rare", "common"], {"rare": 1, "common": 1000}, 1000)
    postings = {t: [("a", doc_weights(["rare", "common"])[t])] for t in qw}
    assert rank_postings(qw, postings, 5) == external.query(["rare", "common"], 1)


# --- hybrid ---------------------------------------------------------------------------

class H:
    def __init__(self, id: str, score: float) -> None:
        self.id, self.score = id, score


ids_strategy = st.lists(st.sampled_from([f"r{i}" for i in range(15)]), max_size=15)


@given(ids_strategy, ids_strategy, st.integers(0, 12))
def test_hybrid_append_is_the_ibex_rule(vec_ids: list[str], fts_ids: list[str],
                                        limit: int) -> None:
    vec = [H(i, 1.0 - n / 100) for n, i in enumerate(vec_ids)]
    fts = [H(i, 10.0 - n) for n, i in enumerate(fts_ids)]
    r = hybrid(vec, fts, limit)
    got = r.ids
    uvec = list(dict.fromkeys(vec_ids))
    ufts = [i for i in dict.fromkeys(fts_ids) if i not in uvec]
    assert len(got) == len(set(got)) <= limit
    assert got == (uvec + ufts)[:limit]  # vector first, FTS appended, deduped, capped
    assert r.page_unfilled == (len(uvec) < limit) == needs_fallback(vec, limit)
    assert r.fts_added == sum(1 for h in r.hits if h.source == "full_text")
    assert r.fallback_fired == (r.fts_added > 0)
    if not r.page_unfilled:
        assert all(h.source == "vector" for h in r.hits)
    # min_score: the same as dropping the weak vector hits first
    assert hybrid(vec, fts, limit, min_score=0.95) == hybrid(
        [h for h in vec if h.score >= 0.95], fts, limit)


@given(ids_strategy, ids_strategy, st.integers(0, 12))
def test_hybrid_rrf(vec_ids: list[str], fts_ids: list[str], limit: int) -> None:
    vec = [H(i, 0.5) for i in vec_ids]
    fts = [H(i, 3.0) for i in fts_ids]
    r = hybrid(vec, fts, limit, fusion="rrf")
    assert r.fusion == "rrf" and not r.fallback_fired
    assert len(r.ids) == len(set(r.ids)) == min(limit, len(set(vec_ids) | set(fts_ids)))
    scores = [h.score for h in r.hits]
    assert scores == sorted(scores, reverse=True)
    for h in r.hits:
        assert h.source == ("both" if h.vector_rank and h.fts_rank else
                            "vector" if h.vector_rank else "full_text")
    assert hybrid(vec, fts, limit, fusion="rrf") == r


def test_hybrid_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="fusion"):
        hybrid([], [], 3, fusion="max")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit"):
        hybrid([], [], -1)


def test_confidence_labels_are_monotonic_per_strategy() -> None:
    for strategy, t in THRESHOLDS.items():
        assert t.reliable > t.candidate > 0
        labels = [confidence(strategy, s) for s in np.linspace(0, 1, 101)]
        rank = {"weak": 0, "candidate": 1, "reliable": 2}
        assert [rank[x] for x in labels] == sorted(rank[x] for x in labels)
        assert confidence(strategy, t.reliable) == "reliable"
        assert confidence(strategy, t.candidate) == "candidate"
    with pytest.raises(ValueError, match="lexical"):
        confidence("lexical", 3.0)


# --- near duplicates ------------------------------------------------------------------

def test_near_duplicates_only_across_anchors() -> None:
    m = VectorMatrix(["same", "other", "far"], np.array(
        [[1, 0, 0], [0.99, 0.1, 0], [0, 0, 1]], dtype=np.float32))
    anchors = {"same": "el:button:place-order", "other": "el:button:submit-order",
               "far": "page:/login"}
    links = near_duplicates([1, 0.05, 0], "el:button:place-order", m, anchors,
                            threshold=0.9)
    assert [(x.id, x.anchor) for x in links] == [("other", "el:button:submit-order")]
    assert near_duplicates([1, 0.05, 0], "el:button:place-order", m, anchors,
                           threshold=0.9, mask=[True, False, True]) == []
    assert near_duplicates([0, 0, 1], "x:y", m, anchors, threshold=0.999)[0].id == "far"


# --- record text ----------------------------------------------------------------------

def test_record_text_and_anchor_words() -> None:
    assert anchor_words("el:button:place-order") == ["button", "place", "order"]
    assert anchor_words("api:GET:/api/search") == ["get", "api", "search"]
    assert anchor_words("page:/") == []
    text = record_text(" Place order is disabled ", "Body.",
                       ["el:button:place-order", "page:/checkout", "test:place-order"])
    assert text == "Place order is disabled\nBody.\nbutton place order checkout"


# --- safetensors ----------------------------------------------------------------------

def test_safetensors_agrees_with_the_reference(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    t = {"embeddings": np.arange(12, dtype=np.float32).reshape(4, 3),
         "weights": np.array([0.5, 1, 1.5, 2], dtype=np.float16),
         "mapping": np.array([3, 2, 1, 0], dtype=np.int64)}
    save_file(t, str(tmp_path / "ref.safetensors"))
    mine = read_safetensors(tmp_path / "ref.safetensors")
    assert set(mine) == set(t) and all(np.array_equal(mine[k], t[k]) for k in t)
    (tmp_path / "mine.safetensors").write_bytes(encode_safetensors(t, {"by": "memidex"}))
    ref = load_file(str(tmp_path / "mine.safetensors"))
    assert all(np.array_equal(ref[k], t[k]) and ref[k].dtype == t[k].dtype for k in t)


def test_safetensors_damage_is_an_error_naming_the_file(tmp_path: Path) -> None:
    good = encode_safetensors({"embeddings": np.ones((8, 4), dtype=np.float32)})
    for name, data in (("short", good[:5]), ("cut", good[:-10]),
                       ("garbage", b"\xff" * 64), ("huge", (10**9).to_bytes(8, "little"))):
        p = tmp_path / f"{name}.safetensors"
        p.write_bytes(data)
        with pytest.raises(ModelCacheError, match=f"{name}.safetensors"):
            read_safetensors(p)


def test_importing_the_package_loads_nothing_heavy() -> None:
    code = ("import sys, memidex.vectors as v; v.__all__; "
            "print(','.join(m for m in ('numpy', 'onnxruntime', 'tokenizers', "
            "'memidex.vectors.embedders') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""
