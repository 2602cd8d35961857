"""Search by meaning, for the reading service (docs/vectors.md): the embedding model of the
local model cache, the index's vectors kept current, and the ``vector`` and ``hybrid``
strategies over them.

The model is loaded on the first vector search (never for a lexical one) and kept for
the process. Before a model search the records without a vector are embedded, at most
:data:`EMBED_BUDGET_SECONDS` of it per command; when some are still missing the search
uses sparse vectors this time and says so (``memidex models embed`` computes them all,
with progress). With no model in the cache the vector strategy *is* sparse tf·idf.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from memidex.app.arguments import FUSIONS, STRATEGIES
from memidex.config import Config
from memidex.search.ranking import SearchHit, SearchQuery

if TYPE_CHECKING:
    from memidex.index.db import IndexDB
    from memidex.index.vectors import SyncReport, VectorRows
    from memidex.masking import Masker
    from memidex.records.model import Record
    from memidex.vectors import Embedder, LevelReport

__all__ = ["EMBED_BUDGET_SECONDS", "FUSIONS", "STRATEGIES", "Semantic", "SemanticAnswer",
           "VectorsReport", "duplicate_check", "text_id"]

EMBED_BUDGET_SECONDS = 5.0
"""How long one reading command may spend embedding records that have no vector yet."""


@dataclass(frozen=True)
class VectorsReport:
    """``models embed`` (and the vectors part of ``rebuild-index``): the model whose
    vectors the index holds now and what it took — or, with no usable model, why not
    (the vector strategy is then sparse tf·idf, which needs no vectors)."""

    model_id: str | None
    level: str | None  # memidex | static-floor, or None: no model
    records: int = 0  # records that had no vector of the model
    embedded: int = 0
    reused: int = 0  # read from the side cache instead of embedded
    missing: int = 0
    seconds: float = 0.0
    reasons: Mapping[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "level": self.level, "records": self.records,
                "embedded": self.embedded, "reused": self.reused, "missing": self.missing,
                "seconds": round(self.seconds, 3),
                **({"reasons": dict(self.reasons)} if self.reasons else {})}


@dataclass(frozen=True)
class SemanticAnswer:
    hits: list[SearchHit]
    level: str  # the level whose vectors ranked: memidex, static-floor, or lexical-only
    vector_strategy: str  # memidex, static-floor or sparse
    fallback: dict[str, Any] | None  # hybrid: the full-text fallback, as IBEX counts it
    note: str = ""


class Semantic:
    """The model and the vectors of one repository's index."""

    def __init__(self, config: Config, masker: Callable[[], Masker]) -> None:
        self.config = config
        self.masker = masker
        self._loaded = False
        self._embedder: Embedder | None = None
        self.reasons: dict[str, str] = {}
        self._rows: tuple[int, VectorRows] | None = None
        self._complete: tuple[str, ...] | None = None
        """The index's version when every record had a vector of the model."""
        self.fallbacks_fired = 0
        """How many hybrid searches of this process the full-text fallback added to."""

    def embedder(self) -> Embedder | None:
        """The best model of the cache (loaded once), or None (:attr:`reasons` says why)."""
        if not self._loaded:
            from memidex.vectors.cache import cache_dir_of
            from memidex.vectors.levels import try_load

            loaded = try_load(cache_dir_of(self.config))
            self._embedder, self.reasons, self._loaded = loaded.embedder, loaded.reasons, True
        return self._embedder

    def close(self) -> None:
        self._rows = None

    def sync(self, db: IndexDB, *, budget_seconds: float | None = EMBED_BUDGET_SECONDS,
             prune: bool = False, progress: Callable[[int, int], None] | None = None
             ) -> SyncReport | None:
        """Embed the records without a vector of the model (None: no model)."""
        from memidex.index.vectors import SyncReport, side_cache_path, sync_vectors, version
        from memidex.masking import secrets_path

        emb = self.embedder()
        if emb is None:
            return None
        key = (str(db.path), emb.model_id, *version(db))
        if key == self._complete and not prune:  # nothing changed since it was complete
            return SyncReport(emb.model_id, 0, 0, 0, 0, 0.0)
        masker = self.masker()
        report = sync_vectors(db, emb, masker.mask, side_cache_path(db.path),
                              budget_seconds=budget_seconds, prune=prune,
                              text_id=text_id(), secrets=secrets_path(self.config),
                              progress=progress)
        self._complete = (str(db.path), emb.model_id, *version(db)) if report.complete \
            else None
        return report

    def levels(self, db: IndexDB | None, index_problem: str | None, *, load: bool = True
               ) -> LevelReport:
        """Every search level and why it is or is not available (what ``doctor`` says):
        the models are really loaded, so a broken file is found (``load=False``: only
        their manifests are read)."""
        from memidex.vectors.cache import cache_dir_of
        from memidex.vectors.levels import available_levels

        complete: set[str] = set()
        if db is not None:
            from memidex.index.vectors import vector_counts

            with contextlib.suppress(Exception):
                records, by_model = vector_counts(db)
                complete = {m for m, n in by_model.items() if n == records and records}
        return available_levels(cache_dir_of(self.config), complete,
                                index_problem=index_problem, load=load)

    def _vector_rows(self, db: IndexDB, emb: Embedder) -> VectorRows:
        from memidex.index.vectors import generation, load_rows

        gen = generation(db)
        key = hash((str(db.path), emb.model_id, gen))
        if self._rows is None or self._rows[0] != key:
            self._rows = (key, load_rows(db, emb.model_id, int(emb.dim)))
        return self._rows[1]

    def _vector(self, db: IndexDB, q: SearchQuery, floor: bool
                ) -> tuple[list[SearchHit], str, str]:
        """The vector strategy's hits, the strategy that ranked them, and a note."""
        from memidex.index.semantic import model_search, sparse_search
        from memidex.vectors.fusion import THRESHOLDS

        note = ""
        emb = self.embedder()
        if emb is not None:
            report = self.sync(db)
            assert report is not None
            if report.complete:
                rows = self._vector_rows(db, emb)
                cut = THRESHOLDS[emb.level].floor if floor and emb.level in THRESHOLDS \
                    else None
                return (model_search(db, rows, emb.embed_query(q.text), q, emb.level,
                                     min_score=cut), emb.level, "")
            note = (f"{report.missing} record(s) have no vector of {emb.model_id} yet: "
                    "sparse vectors this time; `memidex models embed` computes them")
        hits = sparse_search(db, q)
        if floor:
            hits = [h for h in hits if h.score >= THRESHOLDS["sparse"].floor]
        return hits, "sparse", note

    def search(self, db: IndexDB, q: SearchQuery, strategy: str,
               fusion: Literal["append", "rrf"] = "append") -> SemanticAnswer:
        """``--strategy vector`` or ``hybrid`` on the index (lexical is the caller's)."""
        from memidex.index.query import search as lexical
        from memidex.vectors.fusion import hybrid, needs_fallback

        vec, used, note = self._vector(db, q, floor=strategy == "hybrid" and
                                       fusion == "append")
        level = used if used != "sparse" else "lexical-only"
        if strategy == "vector":
            return SemanticAnswer(vec, level, used, None, note)
        fts = lexical(db, q) if fusion == "rrf" or needs_fallback(vec, q.limit) else []
        fused = hybrid(vec, fts, q.limit, fusion)
        if fused.fallback_fired:
            self.fallbacks_fired += 1
        hits = []
        for h in fused.hits:
            item = h.item
            assert isinstance(item, SearchHit)
            reasons: dict[str, object] = {"source": h.source, "vector_rank": h.vector_rank,
                                          "fts_rank": h.fts_rank}
            if fusion == "rrf":
                reasons["fused"] = h.score
            hits.append(item.replace(reasons=reasons))
        return SemanticAnswer(hits, level, used, {
            "fusion": fusion, "page_unfilled": fused.page_unfilled,
            "fired": fused.fallback_fired, "added": fused.fts_added}, note)


def text_id() -> str:
    """How a record's embedded text is made here — memidex's version and the home folder:
    a vector cached for a file under another is not reused. Not the secrets (a hash of
    them would check a guess): the side cache is emptied when they change
    (:meth:`memidex.index.vectors.SideCache.masked_alike`)."""
    import hashlib
    import os

    from memidex._version import __version__

    made = repr((__version__, os.environ.get("HOME", "")))
    return hashlib.sha256(made.encode()).hexdigest()[:16]


def duplicate_check(config: Config, masker: Masker) -> Callable[[Record], str | None] | None:
    """Curation's near-duplicate check for a run's new records (docs/vectors.md, "Near
    duplicates"): at the ``memidex`` level only — a full model in the cache and the index
    holding its vectors — a new record whose vector is within
    ``DUPLICATE_THRESHOLDS["memidex"]`` of a record of the same product and kind about
    **another** main anchor gets a reason (it becomes a proposal for a person: never a
    merge). None when the level is not there; the model loads on the first new record."""
    from memidex.vectors.cache import ModelCache, cache_dir_of
    from memidex.vectors.errors import ModelCacheError

    try:
        if not any(e.ok for e in ModelCache(cache_dir_of(config)).of_kind("onnx")):
            return None
    except (ModelCacheError, OSError):
        return None
    if not config.index_path.exists():
        return None
    state: dict[str, Any] = {}

    def check(record: Record) -> str | None:
        if "rows" not in state:
            state["rows"] = _duplicate_rows(config)
        loaded = state["rows"]
        if loaded is None:
            return None
        emb, rows, anchors, ids = loaded
        import numpy as np

        from memidex.vectors.dedupe import DUPLICATE_THRESHOLDS, near_duplicates
        from memidex.vectors.text import record_text

        span = rows.products.get(record.product)
        if span is None:
            return None
        keep = np.zeros(len(rows.rowids), dtype=bool)
        keep[span] = rows.kinds[span] == record.kind
        text = masker.mask(record_text(record.title, record.body, record.all_anchors))
        links = near_duplicates(emb.embed([text])[0], record.anchor, rows.matrix, anchors,
                                threshold=DUPLICATE_THRESHOLDS["memidex"], limit=1,
                                mask=keep)
        if not links:
            return None
        top = links[0]
        return (f"looks like {ids[top.id]} (about {top.anchor}; cosine {top.score:.2f}): "
                "the same knowledge under another anchor? accept to keep both, reject to "
                "drop this one")

    return check


def _duplicate_rows(config: Config) -> tuple[Any, VectorRows, dict[str, str], dict[str, str]
                                               ] | None:
    """The full model and the index's vectors of it (every record's), or None."""
    from memidex.errors import IndexUnavailableError
    from memidex.index.db import IndexDB
    from memidex.index.vectors import load_rows, main_anchors, vector_counts
    from memidex.vectors.cache import cache_dir_of
    from memidex.vectors.levels import try_load

    loaded = try_load(cache_dir_of(config))
    emb = loaded.embedder
    if emb is None or loaded.level != "memidex":
        return None
    try:
        db = IndexDB.open(config.index_path)
    except IndexUnavailableError:
        return None
    try:
        records, by_model = vector_counts(db)
        if not records or by_model.get(emb.model_id) != records:
            return None  # vectors incomplete: no check rather than a partial one
        rows = load_rows(db, emb.model_id, int(emb.dim))
        anchors, ids = main_anchors(db)
    except IndexUnavailableError:
        return None
    finally:
        db.close()
    return emb, rows, anchors, ids
