"""The facade's learning methods (issue 11, docs/learning.md): ``runs ingest``, ``runs
import``, ``runs list|show``, ``knowledge diff``, ``knowledge proposals`` and ``knowledge
rollback``. :class:`memidex.app.Memidex` inherits them; they call the library in
:mod:`memidex.runs` and write through the facade's one writer path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memidex.errors import IndexUnavailableError, UsageError

if TYPE_CHECKING:
    from memidex.config import Config
    from memidex.importers import ImportResult
    from memidex.index.db import IndexDB
    from memidex.masking import Masker
    from memidex.records.model import Record
    from memidex.runs.ingest import IngestResult, Proposal
    from memidex.store.files import LoadedRecord, Store
    from memidex.write.writer import Change, WriterSession

__all__ = ["RunsMixin"]


class RunsMixin:
    """Learning from runs, over the facade's index, masker and writer."""

    config: Config
    store: Store
    wait: float
    _checked_at: float | None

    if TYPE_CHECKING:  # provided by memidex.app.Memidex
        def index(self, *, refresh: bool = True) -> IndexDB | None: ...
        def _damaged(self, exc: IndexUnavailableError) -> None: ...
        def _loaded(self) -> Iterator[LoadedRecord]: ...
        def _masker(self) -> Masker: ...
        def _masked(self, record: Record, masker: Masker | None = None) -> Record: ...
        def _apply(self, changes: Sequence[Change], command: str, *,
                   refuse_daemon: bool = False,
                   after: Callable[[WriterSession], None] | None = None) -> list[bool]: ...

    def ordinal_floor(self, product: str) -> int:
        """The highest run ordinal ``product``'s records name (0: none): the index's one
        lookup, or a scan of the records when the index is unavailable."""
        db = self.index()
        if db is not None:
            from memidex.index.query import max_ordinal

            try:
                return max_ordinal(db, product)
            except IndexUnavailableError as exc:
                self._damaged(exc)
        best = 0
        for lr in self._loaded():
            r = lr.record
            if r.product == product:
                best = max(best, r.valid.from_, r.trust.last_confirmed or 0,
                           r.valid.until or 0)
        return best

    def ingest(self, source: Path, *, ci: bool = False, build_tag: str | None = None,
               fmt: str = "auto", product: str | None = None, run_id: str | None = None,
               progress: Callable[[int, int], None] | None = None) -> IngestResult:
        """``memidex runs ingest``: mask, freeze, analyse, curate and write one run
        (:mod:`memidex.runs.ingest`). ``source`` is run evidence or, ``fmt`` ``auto``
        telling them apart, a Playwright JSON / JUnit XML report (read by
        :meth:`import_report` with ``product`` and ``run_id``). ``ci`` (or ``CI=true`` in
        the environment) marks a CI run; ``build_tag`` replaces the run's (``build_tag``
        in the config fills a missing one).
        """
        from memidex.runs.ingest import ingest_run, prepare_run, read_run_bytes

        masker = self._masker()
        if fmt == "evidence" or (fmt == "auto" and _is_run_evidence(source)):
            raw = read_run_bytes(source)
        else:
            imported = self.import_report(source, fmt=fmt, product=product, run_id=run_id,
                                          build_tag=build_tag, ci=ci)
            import json

            raw = json.dumps(imported.evidence, ensure_ascii=False).encode("utf-8")
        run = prepare_run(raw, source=str(source), masker=masker, build_tag=build_tag,
                          ci=ci or _env_ci(), default_build_tag=self.config.build_tag)
        try:
            return ingest_run(self.store, self.config, run, wait=self.wait, masker=masker,
                              progress=progress,
                              floor=lambda: self.ordinal_floor(run.product))
        finally:
            self._checked_at = None

    def import_report(self, source: Path, *, fmt: str = "auto", product: str | None = None,
                      run_id: str | None = None, build_tag: str | None = None,
                      ci: bool = False) -> ImportResult:
        """``memidex runs import``: a Playwright JSON or JUnit XML report as run evidence
        (:mod:`memidex.importers`, docs/import.md), masked; nothing is written."""
        from memidex.importers import import_report

        chosen = product or self.config.product
        if not chosen:
            raise UsageError("no product for the report's run",
                             hint="pass --product or set `product` in memidex.toml")
        return import_report(source, product=chosen, root=self.store.root,
                             fmt="auto" if fmt == "evidence" else fmt, build_tag=build_tag,
                             run_id=run_id, ci=ci or _env_ci(), masker=self._masker())

    def runs(self, product: str | None = None) -> list[dict[str, Any]]:
        """``runs list``: one row per ingested run, in ordinal order."""
        from memidex.runstate.history import list_runs

        return list_runs(self.config, product)

    def run(self, run_id: str) -> dict[str, Any]:
        """``runs show``: the frozen run, its analysis and what its curation did — and
        what the agent knew: per test, the records its briefs gave for that run
        (``briefed``) and the ``served_records`` the run names that no brief recorded
        gave (``not_briefed``); the search ``levels`` its briefs had."""
        from memidex.runstate.history import show_run
        from memidex.runstate.served import levels_by_ordinal, served_at

        data = show_run(self.config, run_id)
        product, ordinal = str(data["product"]), int(data["ordinal"])
        for test in data["tests"]:
            briefed = served_at(self.config, product, str(test["test_id"]), ordinal)
            test["briefed"] = briefed
            test["not_briefed"] = sorted(set(test["served_records"]) - set(briefed)) \
                if briefed else []
        data["levels"] = levels_by_ordinal(self.config, product).get(ordinal, [])
        return self._masker().mask_rows([data])[0]

    def diff(self, tag: str, product: str) -> dict[str, Any]:
        """``knowledge diff TAG``: record ids added, confirmed, superseded, deprecated."""
        from memidex.runstate.history import diff

        return diff(self.config, tag, product)

    def proposals(self) -> list[Proposal]:
        """``knowledge proposals``: the changes the checks held back."""
        from memidex.runs.ingest import Proposals

        return Proposals(self.store).all()

    def decide_proposal(self, pid: str, *, accept: bool) -> dict[str, Any]:
        """Apply (``accept``) or drop a proposal; applying goes through the writer and
        refuses when the record changed since it was proposed."""
        from memidex.records.codec import parse_record_bytes
        from memidex.runs.ingest import Proposals
        from memidex.write.writer import Write

        queue = Proposals(self.store)
        p = queue.get(pid)
        changed = False
        if accept:
            record = parse_record_bytes(p.text.encode("utf-8"), p.path)
            self.store.check_write_folders(record.kind)
            changed = any(self._apply([Write(self._masked(record), p.expected)],
                                      "knowledge proposals accept"))
        queue.remove(pid)
        return {"id": p.id, "record_id": p.record_id, "path": p.path, "op": p.op,
                "decision": "accepted" if accept else "rejected", "changed": changed}

    def rollback(self, run_id: str, *, cascade: bool = False) -> dict[str, Any]:
        """``knowledge rollback``: undo every record change the run made
        (:mod:`memidex.write.rollback`)."""
        from dataclasses import replace as _replace

        from memidex.runs.ingest import Proposals, refold_tests
        from memidex.runstate.store import RunStore
        from memidex.write.rollback import plan_rollback
        from memidex.write.route import refuse_under_daemon

        refuse_under_daemon(self.store, "knowledge rollback")
        runs = RunStore(self.config)
        known = runs.raw(run_id) is not None
        plan = plan_rollback(self.store, run_id, cascade=cascade, known_run=known)
        queue = Proposals(self.store)

        def settle(_session: WriterSession) -> None:
            """Still under the lease: the runs are marked rolled back, their proposals
            dropped, and the tests file folded again without them (their passes and
            misses no longer count)."""
            products = set()
            for rid in plan.runs:
                result = runs.result(rid)
                if result is not None:
                    runs.save_result(_replace(result, rolled_back=True))
                    products.add(result.product)
                    for pid in result.proposals:
                        queue.remove(pid)
            for product in sorted(products):
                refold_tests(self.config, product)

        done = self._apply(list(plan.changes), "knowledge rollback", refuse_daemon=True,
                           after=settle)
        return {"run_id": run_id, "runs": list(plan.runs), "restored": list(plan.restored),
                "removed": list(plan.removed), "changed": sum(1 for d in done if d)}


def _is_run_evidence(path: Path) -> bool:
    """Whether ``path`` looks like run evidence (a JSON object with a top-level
    ``run_id``) rather than a runner's report; unreadable files count as evidence, so
    the evidence reader reports them."""
    import json

    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError:
        return True
    if not head.startswith(b"{"):
        return not head.startswith(b"<")
    if b'"suites"' not in head and b'"config"' not in head:
        return True
    try:
        size = path.stat().st_size
        data = json.loads(path.read_bytes()) if size < (50 << 20) else None
    except (OSError, ValueError):
        return True
    return isinstance(data, dict) and "run_id" in data and "suites" not in data


def _env_ci() -> bool:
    """``CI=true`` (or 1, yes) in the environment: a CI run (SPEC §3.7)."""
    import os

    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
