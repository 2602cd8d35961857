"""Embedding models on tiny real models the tests make (tests/vectorkit): the ONNX full
model through onnxruntime, the model2vec static floor through numpy, the model cache
(import, checksums, symlinks), the levels and their reasons, the fallback order, the
runtime missing, distillation."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from memidex.vectors import (
    ModelCache,
    ModelCacheError,
    ModelUnavailable,
    OnnxEmbedder,
    StaticEmbedder,
    UnsafeModelPath,
    available_levels,
    distill,
    load_embedder,
    runtime_reason,
    try_load,
)
from memidex.vectors.cache import MANIFEST
from vectorkit import (
    make_onnx_model,
    make_static_model,
    make_tokenizer,
    onnx_reference,
    vocab,
)

TEXTS = ["Place order button disabled", "the cookie banner covers the payment card",
         "login", "guest email promo code expired until the terms are ticked"]


@pytest.fixture
def cache(tmp_path: Path) -> ModelCache:
    return ModelCache(tmp_path / "cache")


def _ids(folder: Path, texts: list[str]) -> list[list[int]]:
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    return [tok.encode(t).ids for t in texts]


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("token_types", [True, False])
def test_onnx_model_pools_and_normalises_like_the_reference(
        tmp_path: Path, cache: ModelCache, pooling: str, token_types: bool) -> None:
    src = tmp_path / "tiny"
    w = make_onnx_model(src, pooling=pooling, token_types=token_types)
    result = cache.import_model(src, name="tiny")
    assert result.change == "added" and result.entry.level == "memidex"
    assert result.entry.manifest is not None and result.entry.manifest.pooling == pooling
    emb = cache.load("tiny")
    assert isinstance(emb, OnnxEmbedder) and emb.dim == 8
    got = emb.embed(TEXTS)  # different lengths: padded in one batch, masked
    want = onnx_reference(w, _ids(src, TEXTS), pooling, token_types)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(emb.embed_query(TEXTS[1]), want[1], atol=1e-5)
    assert emb.embed([]).shape == (0, 8)


def test_cls_and_mean_pooling_differ(tmp_path: Path, cache: ModelCache) -> None:
    make_onnx_model(tmp_path / "a", pooling="cls")
    make_onnx_model(tmp_path / "b", pooling="mean")
    cls = cache.import_model(tmp_path / "a", name="a")
    mean = cache.import_model(tmp_path / "b", name="b")
    assert cls.entry.manifest and mean.entry.manifest
    assert cls.entry.manifest.model_id != mean.entry.manifest.model_id
    a, b = cache.load("a").embed(TEXTS), cache.load("b").embed(TEXTS)
    assert np.abs(a - b).max() > 0.05


def test_pooling_flag_and_its_absence(tmp_path: Path, cache: ModelCache) -> None:
    make_onnx_model(tmp_path / "m", pooling=None)
    with pytest.raises(ModelCacheError, match="pooling"):
        cache.import_model(tmp_path / "m")
    entry = cache.import_model(tmp_path / "m", pooling="cls", query_prefix="query: ").entry
    assert entry.name == "m" and entry.manifest is not None
    assert entry.manifest.query_prefix == "query: "
    emb = cache.load("m")
    np.testing.assert_allclose(emb.embed_query("login"), emb.embed(["query: login"])[0])


def test_onnx_export_in_an_onnx_subfolder(tmp_path: Path, cache: ModelCache) -> None:
    src = tmp_path / "bge-like"
    make_onnx_model(src / "onnx", pooling=None)
    (src / "onnx" / "tokenizer.json").rename(src / "tokenizer.json")
    (src / "LICENSE").write_text("MIT\n")
    result = cache.import_model(src, pooling="cls")
    assert result.entry.name == "bge-like"
    assert set(result.files) == {"LICENSE", "model.onnx", "tokenizer.json"}


@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_static_model_is_the_mean_of_its_token_vectors(
        tmp_path: Path, cache: ModelCache, weights: bool, dtype: type) -> None:
    src = tmp_path / "static"
    table = make_static_model(src, weights=weights, dtype=dtype).astype(np.float32)
    entry = cache.import_model(src).entry
    assert entry.kind == "static" and entry.level == "static-floor"
    emb = cache.load(entry)
    assert isinstance(emb, StaticEmbedder) and emb.dim == 6
    tok = Tokenizer.from_file(str(src / "tokenizer.json"))
    unk = vocab()["[UNK]"]
    texts = [*TEXTS, "zzzz qqqq", ""]
    got = emb.embed(texts)
    w = np.linspace(0.5, 1.5, len(table)).astype(np.float32)
    for row, text in zip(got, texts, strict=True):
        ids = [i for i in tok.encode(text, add_special_tokens=False).ids if i != unk]
        if not ids:
            assert not row.any()  # no known token: a zero vector, never NaN
            continue
        v = (table[ids] * (w[ids][:, None] if weights else 1)).mean(axis=0)
        np.testing.assert_allclose(row, v / np.linalg.norm(v), atol=1e-6)


def test_static_model_refuses_a_table_too_small_for_its_tokenizer(
        tmp_path: Path, cache: ModelCache) -> None:
    from safetensors.numpy import save_file

    src = tmp_path / "static"
    make_static_model(src)
    save_file({"embeddings": np.ones((3, 6), dtype=np.float32)}, str(src / "model.safetensors"))
    with pytest.raises(ModelCacheError, match="tokenizer.json has ids up to"):
        cache.import_model(src)


def test_import_writes_a_checksum_manifest_and_verify_rehashes(
        tmp_path: Path, cache: ModelCache) -> None:
    make_onnx_model(tmp_path / "m")
    entry = cache.import_model(tmp_path / "m").entry
    manifest = json.loads((entry.path / MANIFEST).read_text())
    for name, info in manifest["files"].items():
        data = (entry.path / name).read_bytes()
        assert info == {"sha256": "sha256:" + hashlib.sha256(data).hexdigest(),
                        "size": len(data)}
    assert manifest["model_id"] == entry.manifest.model_id if entry.manifest else False
    assert [r.ok for r in cache.verify()] == [True]
    # same size, other bytes: only the checksum tells
    model = entry.path / "model.onnx"
    data = bytearray(model.read_bytes())
    data[-1] ^= 0xFF
    model.write_bytes(bytes(data))
    assert cache.entry("m").ok  # the quick look (sizes) cannot see it
    (bad,) = cache.verify("m")
    assert not bad.ok and "model.onnx does not match its checksum" in bad.problems[0]
    (entry.path / "stray.bin").write_bytes(b"x")
    assert any("stray.bin is not in the manifest" in p for p in cache.verify("m")[0].problems)
    model.write_bytes(bytes(data[:100]))  # truncated: the quick look sees the size
    assert "is 100 bytes" in cache.entry("m").problems[0]
    with pytest.raises(ModelUnavailable, match="is 100 bytes"):
        cache.load("m")


def test_import_again_replace_and_name_clash(tmp_path: Path, cache: ModelCache) -> None:
    make_onnx_model(tmp_path / "m", seed=1)
    assert cache.import_model(tmp_path / "m").change == "added"
    assert cache.import_model(tmp_path / "m").change == "unchanged"
    make_onnx_model(tmp_path / "m", seed=2)
    with pytest.raises(ModelCacheError, match="already in the model cache"):
        cache.import_model(tmp_path / "m")
    assert cache.import_model(tmp_path / "m", replace_existing=True).change == "replaced"
    assert [e.name for e in cache.entries()] == ["m"]
    assert not [p for p in cache.root.iterdir() if p.name.startswith(".")]  # no leftovers


def test_import_refuses_broken_or_unknown_folders(tmp_path: Path, cache: ModelCache) -> None:
    src = tmp_path / "broken"
    make_onnx_model(src)
    (src / "model.onnx").write_bytes(b"this is not a protobuf")
    with pytest.raises(ModelCacheError, match=r"does not load: model broken: model.onnx "
                                              r"is broken"):
        cache.import_model(src)
    assert cache.entries() == []
    assert not [p for p in cache.root.iterdir() if p.name.startswith(".")]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelCacheError, match="neither an ONNX model"):
        cache.import_model(empty)
    with pytest.raises(ModelCacheError, match="is not a folder"):
        cache.import_model(tmp_path / "nope")
    only = tmp_path / "only-onnx"
    make_onnx_model(only)
    (only / "tokenizer.json").unlink()
    with pytest.raises(ModelCacheError, match="no tokenizer.json"):
        cache.import_model(only)
    bert = tmp_path / "bert"
    make_tokenizer(bert)
    from safetensors.numpy import save_file

    save_file({"encoder.layer.0.output.dense.weight": np.ones((2, 2), dtype=np.float32)},
              str(bert / "model.safetensors"))
    (bert / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ModelCacheError, match="holds a transformer") as info:
        cache.import_model(bert)
    assert "export it to ONNX first" in info.value.hint


def test_names_and_symlinks_never_leave_the_cache(tmp_path: Path, cache: ModelCache) -> None:
    make_onnx_model(tmp_path / "m")
    for name in ("../outside", "a/b", ".hidden", "..", ""):
        with pytest.raises(UnsafeModelPath):
            cache.import_model(tmp_path / "m", name=name)
    assert not (tmp_path / "outside").exists()
    cache.import_model(tmp_path / "m", name="real")
    # a model folder that is a symlink (to a model elsewhere) is refused
    elsewhere = tmp_path / "elsewhere"
    cache.root.joinpath("real").rename(elsewhere)
    os.symlink(elsewhere, cache.root / "real")
    (entry,) = cache.entries()
    assert not entry.ok and "is a symlink" in entry.problems[0]
    with pytest.raises(UnsafeModelPath):
        cache.load("real")
    os.unlink(cache.root / "real")
    elsewhere.rename(cache.root / "real")
    # a file inside it that is a symlink is refused too
    target = cache.root / "real" / "model.onnx"
    moved = tmp_path / "model.onnx"
    target.rename(moved)
    os.symlink(moved, target)
    assert "is a symlink" in cache.entry("real").problems[0]
    with pytest.raises(ModelUnavailable, match="symlink"):
        cache.load("real")
    # a manifest naming a file outside the folder
    target.unlink()
    moved.rename(target)
    mpath = cache.root / "real" / MANIFEST
    data = json.loads(mpath.read_text())
    data["files"]["../../escape"] = data["files"].pop("model.onnx")
    mpath.write_text(json.dumps(data))
    assert "not a plain file name" in cache.entry("real").problems[0]


def _two_models(tmp_path: Path, cache: ModelCache) -> None:
    make_onnx_model(tmp_path / "full")
    make_static_model(tmp_path / "static")
    cache.import_model(tmp_path / "full", name="full")
    cache.import_model(tmp_path / "static", name="floor")


def test_fallback_order_full_then_static_then_none(tmp_path: Path,
                                                   cache: ModelCache) -> None:
    assert try_load(cache).embedder is None  # an empty cache: sparse
    _two_models(tmp_path, cache)
    loaded = try_load(cache)
    assert loaded.level == "memidex" and loaded.embedder is not None
    assert loaded.embedder.name == "full" and loaded.reasons == {}
    # a broken full model (same size, so only the runtime sees it): the static floor
    model = cache.root / "full" / "model.onnx"
    model.write_bytes(b"\0" * model.stat().st_size)
    loaded = try_load(cache)
    assert loaded.level == "static-floor" and loaded.embedder is not None
    assert loaded.embedder.name == "floor"
    assert "model full: model.onnx is broken" in loaded.reasons["memidex"]
    # a broken static model too: no embedder, two reasons
    (cache.root / "floor" / "model.safetensors").write_bytes(
        b"\xff" * (cache.root / "floor" / "model.safetensors").stat().st_size)
    loaded = try_load(cache)
    assert loaded.embedder is None and set(loaded.reasons) == {"memidex", "static-floor"}
    assert "not a valid safetensors file" in loaded.reasons["static-floor"]
    assert load_embedder(cache) is None


def test_level_report(tmp_path: Path, cache: ModelCache) -> None:
    report = available_levels(cache, False)
    assert report.level == "lexical-only" and report.vector_strategy == "sparse"
    assert "no full model (ONNX) in the model cache" in str(report.status("memidex").reason)
    assert report.status("bundle-scan").available
    _two_models(tmp_path, cache)
    report = available_levels(cache, True)
    assert report.level == "memidex" and report.vector_strategy == "memidex"
    assert report.status("static-floor").available
    full_id = report.status("memidex").model_id
    static_id = report.status("static-floor").model_id
    assert full_id and full_id.startswith("full@") and static_id
    # the index holds only the static floor's vectors
    report = available_levels(cache, [static_id])
    assert report.level == "static-floor"
    assert f"holds no vectors of {full_id}" in str(report.status("memidex").reason)
    report = available_levels(cache, False)
    assert report.level == "lexical-only" and not report.status("memidex").available
    report = available_levels(cache, True, index_problem="the index is damaged")
    assert report.level == "bundle-scan"
    assert report.status("lexical-only").reason == "the index is damaged"
    assert report.as_dict()["levels"][3] == {"name": "bundle-scan", "available": True,
                                             "reason": None, "model_id": None}
    # the quick look agrees while the files are sound, and cannot see a broken one
    assert available_levels(cache, True, load=False).level == "memidex"
    model = cache.root / "full" / "model.onnx"
    model.write_bytes(b"\0" * model.stat().st_size)
    assert available_levels(cache, True, load=False).level == "memidex"
    loaded = available_levels(cache, True)
    assert loaded.level == "static-floor"
    assert "model.onnx is broken" in str(loaded.status("memidex").reason)


def test_runtime_reason_from_the_import_error_python_raises() -> None:
    try:
        import onnxruntime_not_installed_here  # type: ignore[import-not-found]  # noqa: F401
    except ImportError as exc:
        text = runtime_reason(exc, "onnxruntime_not_installed_here")
    assert text.startswith("runtime missing: onnxruntime_not_installed_here is not "
                           "installed (No module named 'onnxruntime_not_installed_here')")
    assert "pip install 'memidex[vectors]'" in text
    inner = ImportError("libonnxruntime.so: cannot open shared object file", name="x")
    assert "onnxruntime cannot be imported" in runtime_reason(inner, "onnxruntime")


def test_runtime_missing_falls_to_the_static_floor(tmp_path: Path,
                                                   cache: ModelCache) -> None:
    """A real interpreter in which `import onnxruntime` fails (as where it is not
    installed): the full model is a reason, the static floor loads."""
    _two_models(tmp_path, cache)
    code = ("import sys, json; sys.modules['onnxruntime'] = None\n"
            "from memidex.vectors import try_load, available_levels\n"
            f"r = try_load({str(cache.root)!r})\n"
            f"q = available_levels({str(cache.root)!r}, True)\n"
            "print(json.dumps([r.level, r.reasons, q.level, q.status('memidex').reason]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    level, reasons, report_level, reason = json.loads(out.stdout)
    assert level == report_level == "static-floor"
    assert reasons["memidex"].startswith("runtime missing: onnxruntime is not installed")
    assert reason == reasons["memidex"]


def test_distill_a_static_floor_from_the_full_model(tmp_path: Path,
                                                    cache: ModelCache) -> None:
    make_onnx_model(tmp_path / "full", dim=8)
    cache.import_model(tmp_path / "full", name="full")
    with pytest.raises(ModelCacheError, match="below 1.01: not imported"):
        distill(cache, dims=4, min_fidelity=1.01)
    assert [e.name for e in cache.entries()] == ["full"]
    report = distill(cache, dims=4, min_fidelity=-1.0)
    assert report.entry.name == "full-static" and report.entry.level == "static-floor"
    assert report.dims == 4 and report.tokens == len(vocab()) - 4  # specials skipped
    assert report.entry.manifest and report.entry.manifest.derived_from == \
        cache.load("full").model_id
    assert -1.0 <= report.fidelity <= 1.0 and 0 < report.explained_variance <= 1.0
    static = cache.load("full-static")
    assert static.dim == 4
    v = static.embed(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert [r.ok for r in cache.verify()] == [True, True]
    with pytest.raises(ModelUnavailable, match="no full model"):
        distill(ModelCache(tmp_path / "empty"))
