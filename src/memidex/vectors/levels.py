"""Which search level this machine is at, and why not a better one (SPEC §4).

Levels, best first: ``memidex`` (the index and a full model: keywords, anchors and
vectors), ``static-floor`` (the full model cannot load; a static model's coarser vectors),
``lexical-only`` (no embedding model: keywords and anchors; the vector strategy is then
sparse tf·idf), and ``bundle-scan`` (the index is missing, locked or damaged: records are
read directly). Every level that is not available says why, in words ``doctor`` prints:
no model in the cache, the runtime missing (``onnxruntime`` not installed), a broken
model file, an index without vectors of that model.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memidex.vectors.cache import ModelCache, ModelEntry
from memidex.vectors.errors import ModelCacheError, ModelUnavailable

if TYPE_CHECKING:
    from memidex.vectors.embedders import Embedder

__all__ = ["LEVELS", "LevelReport", "LevelStatus", "Loaded", "available_levels",
           "load_embedder", "try_load"]

LEVELS = ("memidex", "static-floor", "lexical-only", "bundle-scan")
_KINDS = (("memidex", "onnx", "full model (ONNX)"),
          ("static-floor", "static", "static model (model2vec)"))
_RUNTIMES = {"onnx": ("numpy", "tokenizers", "onnxruntime"), "static": ("numpy", "tokenizers")}


@dataclass(frozen=True)
class Loaded:
    """What :func:`try_load` found: the best embedder (or None), its level, and for each
    model level it could not use, why."""

    embedder: Embedder | None
    level: str | None
    reasons: dict[str, str]


def _cache(cache: ModelCache | Path | str | None) -> ModelCache | None:
    if cache is None:
        return None
    return cache if isinstance(cache, ModelCache) else ModelCache(Path(cache))


def _missing_runtime(kind: str) -> str | None:
    for package in _RUNTIMES[kind]:
        if importlib.util.find_spec(package) is None:
            return (f"runtime missing: {package} is not installed; "
                    "`pip install 'memidex[vectors]'`")
    return None


def _entries(cache: ModelCache | None, kind: str, label: str
             ) -> tuple[list[ModelEntry], str | None]:
    if cache is None:
        return [], "no model cache configured"
    try:
        entries = [e for e in cache.entries() if e.kind == kind or (
            e.manifest is None and kind == "onnx")]
    except ModelCacheError as exc:
        return [], exc.message
    if not entries:
        where = cache.root if cache.root.is_dir() else f"{cache.root} (no such folder)"
        return [], (f"no {label} in the model cache {where}: "
                    "`memidex models import PATH`")
    return entries, None


def try_load(cache: ModelCache | Path | str | None, *, prefer: str | None = None,
             threads: int = 0) -> Loaded:
    """Load the best model the cache holds: a full model, else a static one. Several of
    one kind: ``prefer`` (a name) first, then by name. Never raises for a model that is
    missing or broken: that is a reason, and the next level is tried."""
    mc = _cache(cache)
    reasons: dict[str, str] = {}
    for level, kind, label in _KINDS:
        entries, why = _entries(mc, kind, label)
        if why is not None:
            reasons[level] = why
            continue
        entries = [e for e in entries if e.kind == kind] or entries
        entries.sort(key=lambda e: (e.name != prefer, e.name))
        problems = []
        for e in entries:
            if e.manifest is None or e.problems:
                problems.append(e.problems[0] if e.problems else f"{e.name}: no manifest")
                continue
            try:
                assert mc is not None
                return Loaded(mc.load(e, threads=threads), level, reasons)
            except ModelUnavailable as exc:
                problems.append(exc.message)
        reasons[level] = "; ".join(problems) if problems else f"no {label}"
    return Loaded(None, None, reasons)


def load_embedder(cache: ModelCache | Path | str | None, *, prefer: str | None = None
                  ) -> Embedder | None:
    """The best embedder of the cache (full model, else static floor), or None (the
    vector strategy is then sparse tf·idf)."""
    return try_load(cache, prefer=prefer).embedder


@dataclass(frozen=True)
class LevelStatus:
    name: str
    available: bool
    reason: str | None = None
    model_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "available": self.available, "reason": self.reason,
                "model_id": self.model_id}


@dataclass(frozen=True)
class LevelReport:
    """Every level's availability, and the level search uses (``level``)."""

    level: str
    levels: tuple[LevelStatus, ...]
    vector_strategy: str  # "memidex", "static-floor" (model vectors) or "sparse"

    def status(self, name: str) -> LevelStatus:
        return next(s for s in self.levels if s.name == name)

    @property
    def model_id(self) -> str | None:
        return self.status(self.level).model_id if self.level in ("memidex",
                                                                  "static-floor") else None

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.level, "vector_strategy": self.vector_strategy,
                "model_id": self.model_id, "levels": [s.as_dict() for s in self.levels]}


def available_levels(cache: ModelCache | Path | str | None,
                     index_has_vectors: bool | Collection[str], *,
                     index_problem: str | None = None, load: bool = True,
                     prefer: str | None = None) -> LevelReport:
    """Each level's availability and reason.

    ``index_has_vectors``: whether the index holds vectors — ``True``/``False``, or the
    model ids it holds vectors of (a model level is only available with its own
    vectors). ``index_problem``: why the index cannot be used (missing, locked, damaged),
    or None when it is healthy — then ``bundle-scan`` is the level. ``load``: really
    load the models (what ``doctor`` does, so a broken file is found); ``False`` looks
    only at manifests, file sizes and whether the runtime is installed.
    """
    mc = _cache(cache)
    statuses: dict[str, LevelStatus] = {}
    models: dict[str, str] = {}
    reasons: dict[str, str] = {}
    if load:
        loaded = try_load(mc, prefer=prefer)
        reasons.update(loaded.reasons)
        if loaded.embedder is not None and loaded.level is not None:
            models[loaded.level] = loaded.embedder.model_id
            if loaded.level == "memidex":  # is a static floor there too?
                static = [e for e in (mc.of_kind("static") if mc else ()) if e.ok]
                for e in static:
                    try:
                        assert mc is not None
                        models["static-floor"] = mc.load(e).model_id
                        break
                    except ModelUnavailable as exc:
                        reasons["static-floor"] = exc.message
                else:
                    reasons.setdefault("static-floor", "no static model (model2vec) in "
                                       "the model cache")
    else:
        for level, kind, label in _KINDS:
            entries, why = _entries(mc, kind, label)
            ok = [e for e in entries if e.kind == kind and e.ok]
            ok.sort(key=lambda e: (e.name != prefer, e.name))
            runtime = _missing_runtime(kind)
            if why is not None:
                reasons[level] = why
            elif not ok:
                reasons[level] = "; ".join(p for e in entries for p in e.problems[:1]) or \
                    f"no {label}"
            elif runtime is not None:
                reasons[level] = runtime
            else:
                assert ok[0].manifest is not None
                models[level] = ok[0].manifest.model_id
    for level in ("memidex", "static-floor"):
        if index_problem is not None:
            statuses[level] = LevelStatus(level, False, index_problem, models.get(level))
        elif level not in models:
            statuses[level] = LevelStatus(level, False, reasons.get(level, "unavailable"))
        elif not _has_vectors(index_has_vectors, models[level]):
            statuses[level] = LevelStatus(
                level, False, f"the index holds no vectors of {models[level]}: `memidex "
                "models embed` computes them (of the best model in the cache)", models[level])
        else:
            statuses[level] = LevelStatus(level, True, None, models[level])
    statuses["lexical-only"] = LevelStatus("lexical-only", index_problem is None,
                                           index_problem)
    statuses["bundle-scan"] = LevelStatus("bundle-scan", True, None)
    if index_problem is not None:
        level = "bundle-scan"
    else:
        level = next(x for x in ("memidex", "static-floor", "lexical-only")
                     if statuses[x].available)
    strategy = level if level in ("memidex", "static-floor") else "sparse"
    return LevelReport(level, tuple(statuses[x] for x in LEVELS), strategy)


def _has_vectors(index: bool | Collection[str], model_id: str) -> bool:
    if isinstance(index, bool):
        return index
    return model_id in index
