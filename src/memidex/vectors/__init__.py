"""Search with vectors: the building blocks the index and search use (docs/vectors.md).

Importing this package imports neither numpy nor onnxruntime: every name is loaded on
first use (PEP 562), and the heavy libraries only inside the functions that need them.

* levels — :func:`available_levels` (what ``doctor`` reports), :func:`try_load` /
  :func:`load_embedder` (the best model of the cache, or None and the reasons);
* models — :class:`ModelCache` (``models list|verify|import``), :func:`distill` (a
  static floor from the full model), :class:`OnnxEmbedder`, :class:`StaticEmbedder`;
* vectors — :func:`record_text` (title, body and anchors' words: **already masked**),
  :func:`encode_f16` / :func:`decode_f16` (and the int8 pair), :func:`content_key` and
  :class:`VectorCache` (incremental refresh by content hash), :class:`VectorMatrix`
  (exact top-k by dot product);
* :class:`SparseModel` — tf·idf cosine, the vector strategy with no model;
* :func:`hybrid` (the IBEX rule, or reciprocal-rank fusion), :func:`confidence`
  (per-strategy labels), :func:`near_duplicates` (curation's duplicate check).

docs/vectors.md describes each, with the thresholds measured on bench/retrieval.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memidex.lazy import exports

if TYPE_CHECKING:
    from memidex.vectors.blobs import (
        VectorCache,
        content_key,
        decode_f16,
        decode_i8,
        decode_vector,
        encode_f16,
        encode_i8,
    )
    from memidex.vectors.cache import ModelCache, ModelEntry, cache_dir_of
    from memidex.vectors.dedupe import DUPLICATE_THRESHOLDS, DuplicateLink, near_duplicates
    from memidex.vectors.distillation import DistillReport, distill
    from memidex.vectors.embedders import (
        Embedder,
        OnnxEmbedder,
        StaticEmbedder,
        runtime_reason,
    )
    from memidex.vectors.errors import (
        ModelCacheError,
        ModelUnavailable,
        ModelVerifyFailed,
        UnsafeModelPath,
    )
    from memidex.vectors.fusion import (
        THRESHOLDS,
        FusedHit,
        HybridResult,
        Thresholds,
        confidence,
        hybrid,
        needs_fallback,
    )
    from memidex.vectors.levels import (
        LEVELS,
        LevelReport,
        LevelStatus,
        Loaded,
        available_levels,
        load_embedder,
        try_load,
    )
    from memidex.vectors.manifest import Manifest
    from memidex.vectors.matrix import VectorHit, VectorMatrix
    from memidex.vectors.sparse import SparseHit, SparseModel, rank_postings
    from memidex.vectors.text import anchor_words, record_text, tokens

_WHERE = {
    "VectorCache": "blobs", "content_key": "blobs", "decode_f16": "blobs",
    "decode_i8": "blobs", "decode_vector": "blobs", "encode_f16": "blobs",
    "encode_i8": "blobs",
    "Manifest": "manifest", "ModelCache": "cache", "ModelEntry": "cache",
    "cache_dir_of": "cache",
    "DUPLICATE_THRESHOLDS": "dedupe", "DuplicateLink": "dedupe",
    "near_duplicates": "dedupe",
    "DistillReport": "distillation", "distill": "distillation",
    "Embedder": "embedders", "OnnxEmbedder": "embedders", "StaticEmbedder": "embedders",
    "runtime_reason": "embedders",
    "ModelCacheError": "errors", "ModelUnavailable": "errors",
    "ModelVerifyFailed": "errors", "UnsafeModelPath": "errors",
    "THRESHOLDS": "fusion", "FusedHit": "fusion", "HybridResult": "fusion",
    "Thresholds": "fusion", "confidence": "fusion", "hybrid": "fusion",
    "needs_fallback": "fusion",
    "LEVELS": "levels", "LevelReport": "levels", "LevelStatus": "levels",
    "Loaded": "levels", "available_levels": "levels", "load_embedder": "levels",
    "try_load": "levels",
    "VectorHit": "matrix", "VectorMatrix": "matrix",
    "SparseHit": "sparse", "SparseModel": "sparse", "rank_postings": "sparse",
    "anchor_words": "text", "record_text": "text", "tokens": "text",
}

__all__ = ["DUPLICATE_THRESHOLDS", "DistillReport", "DuplicateLink", "Embedder", "FusedHit",
    "HybridResult", "LEVELS", "LevelReport", "LevelStatus", "Loaded", "Manifest",
    "ModelCache", "ModelCacheError", "ModelEntry", "ModelUnavailable", "ModelVerifyFailed",
    "OnnxEmbedder", "SparseHit", "SparseModel", "StaticEmbedder", "THRESHOLDS", "Thresholds",
    "UnsafeModelPath", "VectorCache", "VectorHit", "VectorMatrix", "anchor_words",
    "available_levels", "cache_dir_of", "confidence", "content_key", "decode_f16",
    "decode_i8", "decode_vector", "distill", "encode_f16", "encode_i8", "hybrid",
    "load_embedder", "near_duplicates", "needs_fallback", "rank_postings", "record_text",
    "runtime_reason", "tokens", "try_load"]


__getattr__ = exports(__name__, _WHERE, globals())


def __dir__() -> list[str]:
    return __all__
