"""The reading service: the index kept current, and one rule for answering from it.

Every reading method brings the index up to date with the files first (the staleness
check, :mod:`memidex.index.refresh`) and answers through :meth:`Reading.with_fallback`:
the query on the index, or — when the index is missing, locked or damaged — the same
question answered by reading the records directly (the ``bundle-scan`` level, SPEC §4).
Writers tell it when they wrote (:meth:`Reading.after_write`), so the next read sees the
change; the refresh after a write runs here, after the write route released the lease.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

from memidex.app.arguments import MAX_LIMIT, anchors_of, check_limit, kinds_of, statuses_of
from memidex.config import Config
from memidex.errors import (
    AmbiguousIdError,
    IndexUnavailableError,
    LeaseError,
    NotFoundError,
    UsageError,
)
from memidex.search.ranking import SearchQuery
from memidex.store.files import LoadedRecord, Store

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import TypeVar

    from memidex.app.answers import RecordList, SearchResult, ShownRecord
    from memidex.app.results import RecordCounts
    from memidex.app.semantic import Semantic, VectorsReport
    from memidex.index.db import IndexDB
    from memidex.index.refresh import RefreshReport
    from memidex.index.staleness import Watch
    from memidex.masking import Masker
    from memidex.records.shape import RecordSummary
    from memidex.search.ranking import SearchHit
    from memidex.serve.values import Brief


__all__ = ["MAX_LIMIT", "Reading", "check_limit", "kinds_of", "statuses_of"]

if TYPE_CHECKING:
    T = TypeVar("T")
LEXICAL = "lexical-only"
SCAN = "bundle-scan"


class Reading:
    """The index of one repository, kept current, and the reading commands over it."""

    def __init__(self, config: Config, store: Store, masker: Callable[[], Masker]) -> None:
        self.config = config
        self.store = store
        self.masker = masker
        self._db: IndexDB | None = None  # imported lazily
        self.last_refresh: RefreshReport | None = None
        self.note = ""
        """Why the index was not used (or what its refresh found), for the answer's note."""
        # A long-lived process (a server) re-checks at most this often; each CLI command
        # is a new process and always checks. Every write resets it.
        self.recheck_seconds = 1.0
        self._checked_at: float | None = None
        self._semantic: Semantic | None = None

    @property
    def semantic(self) -> Semantic:
        """The model and the vectors (built on first use; loaded only by a vector
        search)."""
        if self._semantic is None:
            from memidex.app.semantic import Semantic

            self._semantic = Semantic(self.config, self.masker)
        return self._semantic

    # --- the index -----------------------------------------------------------------

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        self._checked_at = None
        if self._semantic is not None:
            self._semantic.close()
        from memidex.index.prefetch import discard

        discard(str(self.store.root))

    def prefetch(self) -> None:
        """Start the staleness check's git call now, to overlap it with imports and the
        opening of the index (the CLI does this for reading commands)."""
        from memidex.index.prefetch import prefetch

        prefetch(str(self.store.root), [self.store.records_rel, self.store.policies_rel])

    def watched_folders(self) -> list[str]:
        """The root-relative folders whose files the index is made of."""
        return [self.store.records_rel, self.store.policies_rel]

    def watch(self, watcher: Watch | None) -> None:
        """Let ``watcher`` (a warm server's, :mod:`memidex.warm.watch`) name the files
        changed since the last command, instead of asking git on each one; None: stop."""
        from memidex.index import staleness

        root = str(self.store.root)
        staleness.unwatch(root)
        if watcher is not None:
            staleness.watch(root, self.watched_folders(), watcher)

    def after_write(self) -> None:
        """A write landed: the next read checks the files again."""
        self._checked_at = None

    def settle(self, *, build: bool = False) -> None:
        """After a write (the lease released): bring the index up to date now, so the next
        brief and search see the change — and (``build``: after a run is learned, since
        serving needs the index) build it when there is none. A writer holding the lease
        (a daemon) leaves a missing index to a later rebuild."""
        self.after_write()
        if self.open() is None and build and not self.config.index_path.exists():
            try:
                self.rebuild()
            except LeaseError:
                pass

    def open(self, *, refresh: bool = True) -> IndexDB | None:
        """The open, up-to-date index, or ``None`` (and :attr:`note` says why)."""
        from memidex.index.db import IndexDB, IndexOutdated, IndexSwapped
        from memidex.index.maskmark import MaskChanged
        from memidex.index.refresh import refresh as refresh_index

        upgraded = False
        for _ in range(3):
            if self._db is not None and self._db.swapped():
                self.close()
            if self._db is None:
                try:
                    self._db = IndexDB.open(self.config.index_path, write=True)
                except IndexOutdated as exc:
                    if upgraded or not self._upgrade(exc.pending):
                        self.note = self.note or exc.message
                        return None
                    upgraded = True
                    continue
                except IndexUnavailableError as exc:
                    self.note = exc.message
                    return None
            if not refresh or (self._checked_at is not None and
                               time.monotonic() - self._checked_at < self.recheck_seconds):
                return self._db
            try:
                self.last_refresh = refresh_index(self.store, self._db)
                # A damaged index is never served as an empty one (a few µs).
                self._db.sanity()
                self._checked_at = time.monotonic()
            except IndexSwapped:
                self.close()
                continue
            except MaskChanged:
                self.close()
                if upgraded or not self._upgrade(None):
                    self.note = self.note or "the secrets changed while the index was rebuilt"
                    return None
                upgraded = True
                continue
            except IndexUnavailableError as exc:
                self.note = exc.message
                self.close()
                return None
            interrupted = self.last_refresh.interrupted if self.last_refresh else None
            self.note = "" if interrupted is None else (
                f"a change set ({interrupted}) was interrupted while its files were being "
                "moved into place; the next write finishes it")
            return self._db
        self.note = "the index kept being replaced"
        return None

    def _upgrade(self, pending: list[str] | None) -> bool:
        """An index from an earlier memidex (``pending`` migrations), or masked with other
        secrets (None: :mod:`memidex.index.maskmark`): migrate or rebuild it now, once, so
        the command answers from an up-to-date index. False (and :attr:`note`) when that
        fails; the command then scans the records, masking what it prints."""
        from memidex.index.build import upgrade

        try:
            upgrade(self.store, self.config.index_path, pending)
        except (OSError, IndexUnavailableError) as exc:
            self.note = ("the secrets changed and the index could not be rebuilt" if
                         pending is None else "the index is from an earlier memidex and "
                         "could not be brought up to date") + f" ({exc})"
            return False
        return True

    def damaged(self, exc: IndexUnavailableError) -> None:
        """A query failed on the index: answer from the records this time (bundle-scan)."""
        self.note = exc.message
        self.close()

    def with_fallback(self, query: Callable[[IndexDB], T], scan: Callable[[], T]
                      ) -> tuple[T, str]:
        """``query`` on the up-to-date index, else ``scan`` of the records; and the level
        that answered (``lexical-only`` or ``bundle-scan``). The one index-or-scan rule."""
        db = self.open()
        if db is not None:
            try:
                return query(db), LEXICAL
            except IndexUnavailableError as exc:
                self.damaged(exc)
        return scan(), SCAN

    def rebuild(self, *, progress: Callable[[int, int], None] | None = None,
                jobs: int | None = None) -> object:
        """Rebuild the index (:func:`memidex.index.build.rebuild`). A maintenance command:
        refuses at once (exit 3) while another live process — a daemon, say — holds the
        writer lease, and holds it meanwhile."""
        from memidex.index.build import rebuild
        from memidex.write.writer import writer_session

        self.close()
        with writer_session(self.store, wait=0, ttl=self.config.lease_ttl_seconds,
                            maintenance=True):
            return rebuild(self.store, self.config.index_path, jobs=jobs, progress=progress)

    def embed(self, *, progress: Callable[[int, int], None] | None = None,
              budget_seconds: float | None = None) -> VectorsReport:
        """Give every record a vector of the cache's best model (``models embed``; after
        ``rebuild``), unused cached vectors dropped. No model: nothing to do, and why."""
        from memidex.app.semantic import VectorsReport

        self.after_write()  # look at the files now, whatever the last look found
        db = self.open()
        if db is None:
            raise IndexUnavailableError(self.note or "the index cannot be opened",
                                        hint="run `memidex knowledge rebuild-index`")
        rep = self.semantic.sync(db, budget_seconds=budget_seconds, prune=True,
                                 progress=progress)
        emb = self.semantic.embedder()
        if rep is None or emb is None:
            return VectorsReport(None, None, reasons=self.semantic.reasons)
        return VectorsReport(rep.model_id, emb.level, rep.records, rep.embedded, rep.reused,
                             rep.missing, rep.seconds)

    def loaded(self) -> Iterator[LoadedRecord]:
        """Every record that parses, read holding the visibility lock shared, so a change
        set is seen whole (:mod:`memidex.store.visibility`)."""
        from memidex.store import visibility

        with visibility.shared(self.store.knowledge):
            for item in self.store.iter_records():
                if isinstance(item, LoadedRecord):
                    yield item

    # --- products ------------------------------------------------------------------

    def product(self, product: str | None, all_products: bool = False) -> str | None:
        """The product a command is scoped to: ``--product``, else the configured one;
        ``None`` only for an explicit ``--all-products``. The one place this is decided."""
        if all_products:
            if product:
                raise UsageError("give --product or --all-products, not both")
            return None
        chosen = product or self.config.product
        if not chosen:
            raise UsageError(
                "no product: every command is scoped to one product",
                hint="pass --product NAME, set `product` in memidex.toml, or --all-products",
            )
        return chosen

    def one_product(self, product: str | None) -> str:
        """The one product a command needs (never all of them)."""
        chosen = self.product(product, False)
        assert chosen is not None
        return chosen

    def require_known(self, product: str | None) -> None:
        """A product that no record, run or policy names (nor memidex.toml) is a usage
        error, as in ``brief``: a misspelt ``--product`` must not answer "nothing" with
        exit 0 (docs/cli.md, *Unknown products*). Asked only when an answer came out empty,
        so a search that finds something pays nothing for it."""
        if product is None or product == self.config.product:
            return
        from memidex.runstate.ordinals import Counters
        from memidex.runstate.tests import TestsFile

        ordinals = Counters.load(self.config).products
        if product in ordinals or TestsFile(self.config, product).exists():
            return

        def query(db: IndexDB) -> tuple[bool, set[str]]:
            from memidex.index.briefing import known_product, policies, products

            known = known_product(db, product) or \
                any(product in p.products for p in policies(db))
            return known, set(products(db))

        def scan() -> tuple[bool, set[str]]:
            names = {lr.record.product for lr in self.loaded()}
            files, _problems = self.store.load_policies()
            named = any(product in p.products for _f, _sha, ps in files for p in ps)
            return product in names or named, names

        (known, names), _level = self.with_fallback(query, scan)
        if known:
            return
        names |= set(ordinals) | ({self.config.product} if self.config.product else set())
        hint = ("known products: " + ", ".join(sorted(names))) if names else \
            "no product has records or runs yet: add a record or ingest a run first"
        raise UsageError(f"unknown product {product!r}: no records, runs or policies name it",
                         hint=hint)

    def ordinal_floor(self, product: str) -> int:
        """The highest run ordinal ``product``'s records name (0: none): the index's one
        lookup, or a scan of the records when the index is unavailable."""
        def query(db: IndexDB) -> int:
            from memidex.index.query import max_ordinal

            return max_ordinal(db, product)

        def scan() -> int:
            best = 0
            for lr in self.loaded():
                r = lr.record
                if r.product == product:
                    best = max(best, r.valid.from_, r.trust.last_confirmed or 0,
                               r.valid.until or 0)
            return best

        return self.with_fallback(query, scan)[0]

    # --- the reading commands -----------------------------------------------------

    def search(self, text: str, *, product: str | None = None, all_products: bool = False,
               kinds: Sequence[str] = (), statuses: Sequence[str] | None = None,
               anchors: Sequence[str] = (), limit: int = 10,
               near: Sequence[str] = (), strategy: str = "lexical",
               fusion: str = "append") -> SearchResult:
        from memidex.app.answers import SearchResult
        from memidex.app.arguments import FUSIONS, STRATEGIES

        check_limit(limit)
        if strategy not in STRATEGIES or fusion not in FUSIONS:
            raise UsageError(f"unknown strategy {strategy!r} or fusion {fusion!r}",
                             hint="--strategy lexical|vector|hybrid, --fusion append|rrf")
        if near and strategy != "lexical":
            raise UsageError("--near re-ranks the lexical search",
                             hint="drop --near, or use --strategy lexical")
        q = SearchQuery(text=text, product=self.product(product, all_products),
                        kinds=kinds_of(kinds), statuses=statuses_of(statuses),
                        anchors=anchors_of(anchors, flag="--anchor"), limit=limit,
                        near=anchors_of(near, flag="--near"))

        def query(db: IndexDB) -> list[SearchHit]:
            from memidex.index.query import search

            return search(db, q)

        def scan() -> list[SearchHit]:
            from memidex.search.scan import scan_near, scan_search

            m = self.masker()  # searched as the index would store them: no oracle
            loaded = (lr.replace(record=m.for_index(lr.record)) for lr in self.loaded())
            return scan_near(list(loaded), q) if q.near else scan_search(loaded, q)

        if strategy == "lexical":
            hits, level = self.with_fallback(query, scan)
            if not hits:
                self.require_known(q.product)
            return SearchResult(text, q.product, level, self.masker().mask_hits(hits),
                                note=self.note)
        from memidex.app.semantic import SemanticAnswer

        def semantic(db: IndexDB) -> SemanticAnswer:
            return self.semantic.search(db, q, strategy, "rrf" if fusion == "rrf"
                                        else "append")

        def keywords() -> SemanticAnswer:
            return SemanticAnswer(scan(), SCAN, "", None,
                                  "vectors need the index: answered by keywords")

        ans, _ = self.with_fallback(semantic, keywords)
        if not ans.hits:
            self.require_known(q.product)
        note = "; ".join(n for n in (self.note, ans.note) if n)
        return SearchResult(text, q.product, ans.level, self.masker().mask_hits(ans.hits),
                            note=note, strategy=strategy,
                            vector_strategy=ans.vector_strategy or None,
                            fallback=ans.fallback)

    def find(self, id_or_prefix: str) -> ShownRecord:
        """The record an id or unique prefix names (its text as stored)."""
        from memidex.app.answers import ShownRecord
        from memidex.records.codec import parse_record_bytes

        prefix = id_or_prefix.strip()
        if not prefix:
            raise UsageError("give a record id or a unique prefix of one")

        def query(db: IndexDB) -> list[tuple[str, str]]:
            from memidex.index.query import find_ids

            return [(row.id, row.path) for row in find_ids(db, prefix)]

        def scan() -> list[tuple[str, str]]:
            found = sorted((lr.record.id, lr.relpath) for lr in self.loaded()
                           if lr.record.id.startswith(prefix))
            return [c for c in found if c[0] == prefix] or found

        candidates, _level = self.with_fallback(query, scan)
        ids = sorted({c[0] for c in candidates})
        if not ids:
            raise NotFoundError(f"no record with id or prefix {prefix[:200]!r}")
        if len(ids) > 1:
            shown = ", ".join(ids[:5]) + (" …" if len(ids) > 5 else "")
            raise AmbiguousIdError(f"{prefix!r} matches {len(ids)} records: {shown}")
        paths = [c[1] for c in candidates if c[0] == ids[0]]
        data = self.store.read_bytes(paths[0])
        record = parse_record_bytes(data, paths[0])
        return ShownRecord(record, paths[0], data.decode("utf-8"), tuple(paths[1:]))

    def show(self, id_or_prefix: str) -> ShownRecord:
        """The record an id or unique prefix names, secrets masked in what it shows."""
        return self.masker().mask_shown(self.find(id_or_prefix))

    def list_records(self, *, product: str | None = None, all_products: bool = False,
                     kinds: Sequence[str] = (), statuses: Sequence[str] | None = None,
                     anchors: Sequence[str] = (), limit: int | None = None) -> RecordList:
        from memidex.app.answers import RecordList

        chosen = self.product(product, all_products)
        k, s = kinds_of(kinds), (() if statuses is None else statuses_of(statuses))
        a = anchors_of(anchors, flag="--anchor")
        if limit is not None:
            check_limit(limit)

        def query(db: IndexDB) -> list[RecordSummary]:
            from memidex.index.query import list_records

            return list_records(db, product=chosen, kinds=k, statuses=s, anchors=a,
                                limit=limit)

        def scan() -> list[RecordSummary]:
            from memidex.records.shape import summary_of
            from memidex.search.scan import matches_filters

            out = [summary_of(lr.record, lr.relpath) for lr in
                   sorted(self.loaded(), key=lambda x: (x.record.kind, x.record.id,
                                                        x.relpath))
                   if matches_filters(lr.record, chosen, k, s, a)]
            return out[:limit] if limit is not None else out

        rows, _level = self.with_fallback(query, scan)
        if not rows:
            self.require_known(chosen)
        return RecordList(tuple(self.masker().mask_summaries(rows)))

    def brief(self, test_id: str, *, product: str | None = None,
              anchors: Sequence[str] = (), at: int | None = None,
              budget: int | None = None, limit: int | None = None,
              explain: bool = False, record: bool = True) -> Brief:
        """The brief for ``test_id`` (:func:`memidex.serve.brief.build_brief`)."""
        from memidex.serve.brief import BriefRequest, build_brief

        chosen = self.one_product(product)
        req = BriefRequest(test_id, chosen, tuple(anchors), at, budget, limit, explain)
        masker = self.masker()
        db = self.open()
        if db is not None:
            try:
                return build_brief(self.config, self.store, db, req, masker=masker,
                                   index_note=self.note, record=record)
            except IndexUnavailableError as exc:
                self.damaged(exc)
        return build_brief(self.config, self.store, None, req, masker=masker,
                           index_note=self.note, record=record,
                           floor=self.ordinal_floor(chosen))

    # --- for the dashboard: counts and trust over time ------------------------------

    def counts(self) -> RecordCounts:
        """Records by product, kind and status (one index query, else a scan)."""
        from memidex.app.results import RecordCounts

        def query(db: IndexDB) -> list[tuple[str, str, str, int]]:
            from memidex.index.query import count_records

            return count_records(db)

        def scan() -> list[tuple[str, str, str, int]]:
            from collections import Counter

            seen = Counter((lr.record.product, lr.record.kind, lr.record.status)
                           for lr in self.loaded())
            return [(p, k, s, n) for (p, k, s), n in sorted(seen.items())]

        rows, level = self.with_fallback(query, scan)
        return RecordCounts(tuple(rows), level)
