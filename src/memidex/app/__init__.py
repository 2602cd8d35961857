"""The composition root: :class:`Memidex`, the library API the CLI, the MCP server and
tests call.

It builds the configuration, the store, the masker, the reading service (the index kept
current, with one index-or-scan rule), the one write route (with the jobs the services
register) and the services — curation, learning, health — and delegates each public
method to one of them in one line. Every method returns a typed value
(:mod:`memidex.app.results`, or the owning layer's value), never ``Any`` or a dictionary.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from memidex.app.reading import Reading
from memidex.app.team import TeamReading
from memidex.config import Config, load_config
from memidex.lazy import exports
from memidex.store.files import Store

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    import threading
    from typing import Any

    from memidex.app.curation import Curation
    from memidex.app.health import Health
    from memidex.app.history import TrustPoint, TrustSeries
    from memidex.app.learning import Learning
    from memidex.app.notes import NoteAdded, NoteList
    from memidex.app.results import (
        AddResult,
        CheckReport,
        CurationResult,
        DiffReport,
        DoctorReport,
        HealthStatus,
        IngestPreview,
        IngestResult,
        ProposalDecision,
        ProposalDetail,
        ProposalList,
        RecordCounts,
        RecordList,
        RollbackResult,
        RunDetail,
        RunList,
        SearchResult,
        ShownRecord,
    )
    from memidex.app.semantic import VectorsReport
    from memidex.importers import ImportResult
    from memidex.index.build import BuildReport
    from memidex.masking import Masker
    from memidex.review.changes import ReviewReport
    from memidex.serve.values import Brief
    from memidex.teamindex.pushing import PushReport
    from memidex.vectors import LevelReport
    from memidex.write.daemon import DaemonReport
    from memidex.write.route import WriteRoute

__all__ = [
    "LEVELS",
    "AddResult",
    "CheckReport",
    "CurationResult",
    "DiffReport",
    "DoctorReport",
    "IngestPreview",
    "HealthStatus",
    "IngestResult",
    "Memidex",
    "NoteAdded",
    "NoteList",
    "ProposalDecision",
    "ProposalDetail",
    "ProposalList",
    "RecordCounts",
    "RecordList",
    "RollbackResult",
    "RunDetail",
    "RunList",
    "SearchResult",
    "ShownRecord",
    "TrustPoint",
    "TrustSeries",
    "VectorsReport",
]

LEVELS = ("memidex", "lexical-only", "static-floor", "bundle-scan")

# The result types are re-exported here but imported on first use: defining a frozen
# dataclass costs ~0.5 ms, and a search needs 1 of these 23 (docs/performance.md).
_LAZY = {name: "memidex.app.results" for name in (
    "AddResult", "CheckReport", "CurationResult", "DiffReport", "DoctorReport",
    "HealthStatus", "IngestPreview", "IngestResult", "ProposalDecision", "ProposalDetail",
    "ProposalList", "RecordCounts", "RollbackResult", "RunDetail", "RunList")}
_LAZY.update({name: "memidex.app.answers" for name in ("RecordList", "SearchResult",
                                                       "ShownRecord")})
_LAZY.update({"TrustPoint": "memidex.app.history", "TrustSeries": "memidex.app.history",
              "NoteAdded": "memidex.app.notes", "NoteList": "memidex.app.notes",
              "VectorsReport": "memidex.app.semantic"})


__getattr__ = exports(__name__, _LAZY, globals())


class Memidex:
    """One repository's knowledge: records, policies, runs and the derived index."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *,
                 config: Config | None = None,
                 overrides: Mapping[str, Any] | None = None, wait: float = 10.0,
                 strict_config: bool = True) -> None:
        """``wait``: seconds a writing command waits for the writer lease (or for a
        running daemon to apply its change). ``strict_config=False``: a bad key of
        ``memidex.toml`` is kept in ``config.problems`` for ``doctor`` and ``check`` to
        report, instead of refusing to start."""
        self.config = config or load_config(None if root is None else Path(root),
                                            overrides=overrides, strict=strict_config)
        self.store = Store(self.config)
        self.wait = wait
        self.reading = Reading(self.config, self.store, self._masker)
        self.team = TeamReading(self.config, self.reading)  # reads: team or local index
        self._route: WriteRoute | None = None
        self._services: dict[str, Any] = {}

    # --- wiring (each service built on first use: a search loads no writer) ----------

    def _masker(self) -> Masker:
        """The secrets file's masker (one ``stat`` when there is none; cached by size and
        mtime)."""
        from memidex.masking import Masker, secrets_path

        return Masker.load(secrets_path(self.config))

    def _wait(self) -> float:
        return self.wait

    @property
    def route(self) -> WriteRoute:
        """The one write route, with every job the services bring."""
        if self._route is None:
            from memidex.app.curation import PURGE
            from memidex.write.route import WriteRoute

            self._route = WriteRoute(self.store, ttl=self.config.lease_ttl_seconds)
            self._route.handlers.update(self._learning.handlers())
            self._route.handlers[PURGE] = self._curation.purge_job
        return self._route

    @property
    def _curation(self) -> Curation:
        if "curation" not in self._services:
            from memidex.app.curation import Curation

            self._services["curation"] = Curation(self.config, self.store, self.reading,
                                                  self.route, self._masker, self._wait)
        service: Curation = self._services["curation"]
        return service

    @property
    def _learning(self) -> Learning:
        if "learning" not in self._services:
            from memidex.app.learning import Learning

            self._services["learning"] = Learning(self.config, self.store, self.reading,
                                                  self.route, self._curation, self._masker,
                                                  self._wait)
        service: Learning = self._services["learning"]
        return service

    @property
    def _health(self) -> Health:
        if "health" not in self._services:
            from memidex.app.health import Health

            self._services["health"] = Health(self.config, self.store, self.reading)
        service: Health = self._services["health"]
        return service

    def close(self) -> None:
        self.team.close()
        self.reading.close()

    def prefetch(self) -> None:
        """Start the staleness check's git call now (the CLI does this for reading
        commands, to overlap it with imports and the opening of the index)."""
        self.reading.prefetch()

    def __enter__(self) -> Memidex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reading -------------------------------------------------------------------

    def search(self, text: str, *, product: str | None = None, all_products: bool = False,
               kinds: Sequence[str] = (), statuses: Sequence[str] | None = None,
               anchors: Sequence[str] = (), limit: int = 10,
               near: Sequence[str] = (), strategy: str = "lexical",
               fusion: str = "append") -> SearchResult:
        """``knowledge search``: one product's records, best first — by BM25
        (``strategy="lexical"``), by the best level's vectors (``"vector"``: the full
        model, the static floor, or sparse tf·idf), or both (``"hybrid"``: vector results
        first, full-text ones appended when the page is unfilled; ``fusion="rrf"``:
        reciprocal-rank fusion instead). From the team index when one is configured and
        fit to answer (:mod:`memidex.app.team`), else the local one."""
        return self.team.search(text, product=product, all_products=all_products,
                                kinds=kinds, statuses=statuses, anchors=anchors,
                                limit=limit, near=near, strategy=strategy, fusion=fusion)

    def show(self, id_or_prefix: str) -> ShownRecord:
        """``knowledge show``: the record an id or unique prefix names."""
        return self.team.show(id_or_prefix)

    def list_records(self, *, product: str | None = None, all_products: bool = False,
                     kinds: Sequence[str] = (), statuses: Sequence[str] | None = None,
                     anchors: Sequence[str] = (), limit: int | None = None) -> RecordList:
        """``knowledge list``: a product's records, by kind then id."""
        return self.team.list_records(product=product, all_products=all_products,
                                      kinds=kinds, statuses=statuses, anchors=anchors,
                                      limit=limit)

    def brief(self, test_id: str, *, product: str | None = None,
              anchors: Sequence[str] = (), at: int | None = None,
              budget: int | None = None, limit: int | None = None,
              explain: bool = False, record: bool = True) -> Brief:
        """``memidex brief``: the policies that apply, then learned records ranked by trust
        × anchor overlap, at run ``at`` (default: the product's next ordinal)."""
        return self.team.brief(test_id, product=product, anchors=anchors, at=at,
                               budget=budget, limit=limit, explain=explain, record=record)

    def record_counts(self) -> RecordCounts:
        """Records by product, kind and status (the dashboard's overview)."""
        return self.reading.counts()

    def trust_series(self, id_or_prefix: str) -> TrustSeries:
        """A record's trust at each run ordinal, every version (the dashboard's chart)."""
        from memidex.app.history import trust_series

        r = self.reading.find(id_or_prefix).record
        return trust_series(self.config, self.store, r, self.reading.ordinal_floor(r.product))

    def ordinal_floor(self, product: str) -> int:
        """The highest run ordinal ``product``'s records name (0: none)."""
        return self.reading.ordinal_floor(product)

    def product(self, product: str | None = None) -> str:
        """The product a command is scoped to (``--product``, else ``memidex.toml``'s)."""
        return self.reading.one_product(product)

    def rebuild_index(self, *, progress: Callable[[int, int], None] | None = None,
                      jobs: int | None = None) -> BuildReport:
        """``knowledge rebuild-index``: a maintenance command (refuses under a daemon)."""
        from memidex.index.build import BuildReport

        report = self.reading.rebuild(progress=progress, jobs=jobs)
        assert isinstance(report, BuildReport)
        return report

    def embed_vectors(self, *, progress: Callable[[int, int], None] | None = None,
                      budget_seconds: float | None = None) -> VectorsReport:
        """``models embed``: a vector of the model cache's best model for every record
        that has none (read from the side cache when an earlier one had the same text).
        A reading command embeds at most a few seconds' worth itself; this does all."""
        return self.reading.embed(progress=progress, budget_seconds=budget_seconds)

    def has_models(self) -> bool:
        """Whether the model cache holds a model folder (none loaded: a look at the
        folder only)."""
        from memidex.vectors.cache import ModelCache, cache_dir_of
        from memidex.vectors.errors import ModelCacheError

        try:
            return bool(ModelCache(cache_dir_of(self.config)).entries())
        except (ModelCacheError, OSError):  # an unreadable cache is doctor's to report
            return False

    def push_index(self, url: str | None = None, *, branch: str | None = None,
                   rewind: bool = False, jobs: int | None = None) -> PushReport:
        """``index push``: bring the team index at ``url`` (default ``[index] url`` or
        ``MEMIDEX_INDEX_URL``) to the records at ``branch``'s HEAD (default ``[index]
        branch``, else the checked-out branch). Reads git, never the work tree; writes
        nothing to the records (docs/team-index.md)."""
        from memidex.errors import ConfigError
        from memidex.teamindex import push

        target = url or self.config.index.url
        if not target:
            raise ConfigError("no team index URL: pass --url, set MEMIDEX_INDEX_URL or "
                              "[index] url in memidex.toml",
                              hint="e.g. --url postgresql://memidex:PASSWORD@db.internal/"
                              "memidex")
        return push(self.config.root, target, branch=branch or self.config.index.branch,
                    rewind=rewind, jobs=jobs, timeout=self.config.index.timeout)

    def search_levels(self) -> LevelReport:
        """Each search level and why it is or is not available (the models loaded)."""
        return self._health.levels()

    def review(self, base: str | None = None, head: str | None = None) -> ReviewReport:
        """``knowledge review``: what ``head`` (default: the working tree) changes in
        knowledge since ``base`` (default: the merge base with the default branch)."""
        from memidex.review.changes import review
        from memidex.review.masked import masked
        from memidex.review.secrets import allow_list

        secrets, allow = self._masker().secrets, allow_list(self.config)
        return masked(review(self.config.root, self.store.records_rel, base, head,
                             secrets=secrets, allow=allow), secrets, allow)

    # --- health --------------------------------------------------------------------

    def check(self) -> CheckReport:
        """``knowledge check``: every record and policy validated from the files."""
        return self._health.check()

    def doctor(self, *, deep: bool = False) -> DoctorReport:
        """``doctor``: the search level, index health, staleness, errors, the lease
        (``deep``: and SQLite's ``quick_check`` of every page of the index)."""
        return self._health.doctor(deep=deep)

    def health_status(self) -> HealthStatus:
        """What ``doctor`` reports at no O(N) cost: level, index as opened, lease."""
        return self._health.status()

    # --- curation ------------------------------------------------------------------

    def add(self, *, kind: str, product: str | None = None, anchors: Sequence[str],
            title: str, body: str = "", scope: Mapping[str, str] | None = None) -> AddResult:
        """``knowledge add``: a human-authored record (active, ``trust.source: human``)."""
        return self._curation.add(kind=kind, product=product, anchors=anchors, title=title,
                                  body=body, scope=scope)

    def confirm(self, id_or_prefix: str, *, run_ordinal: int | None = None) -> CurationResult:
        return self._curation.confirm(id_or_prefix, run_ordinal=run_ordinal)

    def deprecate(self, id_or_prefix: str, *, ordinal: int | None = None) -> CurationResult:
        return self._curation.deprecate(id_or_prefix, ordinal=ordinal)

    def quarantine(self, id_or_prefix: str) -> CurationResult:
        return self._curation.quarantine(id_or_prefix)

    def release(self, id_or_prefix: str) -> CurationResult:
        return self._curation.release(id_or_prefix)

    def supersede(self, id_or_prefix: str, *, title: str | None = None,
                  body: str | None = None, ordinal: int | None = None,
                  by: str | None = None) -> CurationResult:
        return self._curation.supersede(id_or_prefix, title=title, body=body,
                                        ordinal=ordinal, by=by)

    def purge(self, id_or_prefix: str) -> CurationResult:
        return self._curation.purge(id_or_prefix)

    def daemon(self, *, once: bool = False, stop: threading.Event | None = None,
               log: Callable[[str], None] | None = None) -> DaemonReport:
        """``memidex daemon``: hold the lease and apply every queued job (change sets,
        ingests, rollbacks, proposals decided) through the same handlers."""
        from memidex.write.daemon import run_daemon

        return run_daemon(self.store, wait=self.wait, ttl=self.config.lease_ttl_seconds,
                          once=once, stop=stop, log=log, handlers=self.route.handlers)

    # --- learning ------------------------------------------------------------------

    def ingest(self, source: Path, *, ci: bool = False, build_tag: str | None = None,
               fmt: str = "auto", product: str | None = None, run_id: str | None = None,
               progress: Callable[[int, int], None] | None = None,
               no_wait: bool = False) -> IngestResult:
        """``runs ingest``: learn from one run's evidence or one runner's report."""
        return self._learning.ingest(source, ci=ci, build_tag=build_tag, fmt=fmt,
                                     product=product, run_id=run_id, progress=progress,
                                     no_wait=no_wait)

    def import_report(self, source: Path, *, fmt: str = "auto", product: str | None = None,
                      run_id: str | None = None, build_tag: str | None = None,
                      ci: bool = False) -> ImportResult:
        """``runs import``: a runner's report as run evidence; nothing is written."""
        return self._learning.import_report(source, fmt=fmt, product=product,
                                            run_id=run_id, build_tag=build_tag, ci=ci)

    def runs(self, product: str | None = None) -> RunList:
        return self._learning.runs(product)

    def run(self, run_id: str) -> RunDetail:
        return self._learning.run(run_id)

    def diff(self, tag: str, product: str | None = None) -> DiffReport:
        return self._learning.diff(tag, product)

    def proposals(self) -> ProposalList:
        return self._learning.proposals()

    def decide_proposal(self, pid: str, *, accept: bool) -> ProposalDecision:
        return self._learning.decide_proposal(pid, accept=accept)

    def rollback(self, run_id: str, *, cascade: bool = False) -> RollbackResult:
        return self._learning.rollback(run_id, cascade=cascade)

    def preview(self, source: Path, *, ci: bool = False, build_tag: str | None = None,
                fmt: str = "auto", product: str | None = None,
                run_id: str | None = None) -> IngestPreview:
        """``runs ingest --dry-run``: what the run would teach; nothing is written."""
        return self._learning.preview(source, ci=ci, build_tag=build_tag, fmt=fmt,
                                      product=product, run_id=run_id)

    def proposal(self, pid: str) -> ProposalDetail:
        """``knowledge proposals show``: one proposal and the record it would change."""
        return self._learning.proposal(pid)

    # --- working memory ------------------------------------------------------------

    def note_add(self, run_id: str, text: str) -> NoteAdded:
        """``notes add``: one note to self for run ``run_id`` (masked; gone at ingest)."""
        from memidex.app.notes import Notes

        return Notes(self.config, self._masker).add(run_id, text)

    def notes(self, run_id: str) -> NoteList:
        """``notes list``: run ``run_id``'s working memory, oldest first."""
        from memidex.app.notes import Notes

        return Notes(self.config, self._masker).list(run_id)
