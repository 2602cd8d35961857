"""The learning service: ``runs ingest|import|list|show``, ``knowledge diff``,
``knowledge proposals`` and ``knowledge rollback`` (docs/learning.md).

What needs no lease happens here, before the write route is asked: a report is read by
the importers, the run masked and validated, the same run again answered, the floor
ordinal read from the index. What needs the lease is a job of the one write route —
``ingest`` (:func:`memidex.app.ingest.ingest_job`), ``rollback`` and ``proposal`` (below)
— run here under the lease, or by ``memidex daemon`` when one holds it. The index is
brought up to date after the job, the lease released.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memidex.app.runprep import env_ci, prepare_run
from memidex.config import Config
from memidex.errors import NotFoundError, UsageError
from memidex.store.files import Store

if TYPE_CHECKING:
    from memidex.app.curation import Curation
    from memidex.app.reading import Reading
    from memidex.app.results import (
        DiffReport,
        IngestPreview,
        IngestResult,
        ProposalDecision,
        ProposalDetail,
        ProposalList,
        RollbackResult,
        RunDetail,
        RunList,
    )
    from memidex.evidence import Run
    from memidex.importers import ImportResult
    from memidex.masking import Masker
    from memidex.write.route import Handler, WriteRoute
    from memidex.write.writer import WriterSession

__all__ = ["DIFF_OPS", "PROPOSAL", "ROLLBACK", "Learning"]

ROLLBACK = "rollback"
PROPOSAL = "proposal"
DIFF_OPS = {"add": "added", "unknown": "added", "confirm": "confirmed",
            "supersede": "superseded", "deprecate": "deprecated", "resolve": "resolved"}
"""How a run's change ops read in ``knowledge diff``: a raised unknown is an addition."""

Progress = Callable[[int, int], None]


class Learning:
    """Learning from runs, over the reading service, the masker and the write route."""

    def __init__(self, config: Config, store: Store, reading: Reading, route: WriteRoute,
                 curation: Curation, masker: Callable[[], Masker],
                 wait: Callable[[], float]) -> None:
        self.config = config
        self.store = store
        self.reading = reading
        self.route = route
        self.curation = curation
        self.masker = masker
        self.wait = wait

    def handlers(self) -> dict[str, Handler]:
        """The write route's jobs this service brings (the daemon is given them too)."""
        from memidex.app.ingest import INGEST, ingest_job

        def ingest(session: WriterSession, job: Mapping[str, Any]) -> dict[str, Any]:
            return ingest_job(session, job, config=self.config, store=self.store,
                              masker=self.masker())

        return {INGEST: ingest, ROLLBACK: self._rollback_job, PROPOSAL: self._proposal_job}

    # --- ingest and import ---------------------------------------------------------

    def ingest(self, source: Path, *, ci: bool = False, build_tag: str | None = None,
               fmt: str = "auto", product: str | None = None, run_id: str | None = None,
               progress: Progress | None = None, no_wait: bool = False) -> IngestResult:
        """``runs ingest``: mask, freeze, analyse, curate and write one run. ``source`` is
        run evidence or, ``fmt`` ``auto`` telling them apart, a Playwright JSON / JUnit
        XML report (read by :meth:`import_report` with ``product`` and ``run_id``). ``ci``
        (or ``CI=true``) marks a CI run; ``build_tag`` replaces the run's (``build_tag``
        in the config fills a missing one). ``no_wait``: with a daemon holding the lease,
        return as soon as the run is queued (``queued`` names the inbox item).

        The cyclic garbage collector is paused meanwhile and resumed after, error or
        not: its ~90 passes over objects that nearly all live to the end cost a 150-test
        ingest ~10 ms of CPU, and the ingest leaves a few dozen cyclic objects behind
        (collected once it is resumed)."""
        import gc

        paused = gc.isenabled()
        gc.disable()
        try:
            return self._ingest(source, ci=ci, build_tag=build_tag, fmt=fmt,
                                product=product, run_id=run_id, progress=progress,
                                no_wait=no_wait)
        finally:
            if paused:
                gc.enable()

    def _ingest(self, source: Path, *, ci: bool, build_tag: str | None, fmt: str,
                product: str | None, run_id: str | None, progress: Progress | None,
                no_wait: bool) -> IngestResult:
        from memidex.app.ingest import INGEST, already, digest_of
        from memidex.app.results import IngestResult
        from memidex.runstate.notes import forget as forget_notes
        from memidex.runstate.store import RunStore
        from memidex.write.route import Job

        run = self._prepared(source, ci=ci, build_tag=build_tag, fmt=fmt, product=product,
                             run_id=run_id)
        self.store.check_write_folders()
        # The same run again, or the same id with other content: answered before the
        # lease, so a no-op writes nothing at all (not even the lease's files).
        digest = digest_of(run)
        early = already(RunStore(self.config), run, digest)
        if early is not None:
            forget_notes(self.config, run.run_id)
            return early
        floor = self.reading.ordinal_floor(run.product)  # before the lease: the index
        job = Job(INGEST, "runs ingest", lambda: {"run": run.as_dict(), "floor": floor},
                  local={"run": run, "floor": floor, "progress": progress, "digest": digest})
        from memidex.index.refresh import fed_by_landed

        with fed_by_landed(self.store):  # the refresh after it: the files it wrote, no git
            try:
                out = self.route.run(job, wait=self.wait(), no_wait=no_wait)
            finally:
                self.reading.after_write()
            result = None if out.queued is not None else IngestResult.from_json(out.result)
            if result is not None and not result.already:
                self.reading.settle(build=True)  # serving needs the index
        if result is None:
            return IngestResult(run.run_id, run.product, 0, run.build_tag, run.ci, (), (),
                                {}, queued=out.queued,
                                notes=("queued for the daemon: `memidex runs show "
                                       f"{run.run_id}` once it is applied",))
        if self.config.product and run.product != self.config.product:
            result = result.replace(notes=(*result.notes, (
                f"{run.run_id} is a run of product {run.product!r}, not memidex.toml's "
                f"{self.config.product!r}: search and brief it with --product "
                f"{run.product}")))
        forget_notes(self.config, run.run_id)  # working memory lives for one run only
        return result

    def preview(self, source: Path, *, ci: bool = False, build_tag: str | None = None,
                fmt: str = "auto", product: str | None = None,
                run_id: str | None = None) -> IngestPreview:
        """``runs ingest --dry-run`` (:func:`memidex.app.preview.preview`): nothing is
        written."""
        from memidex.app.preview import preview

        run = self._prepared(source, ci=ci, build_tag=build_tag, fmt=fmt, product=product,
                             run_id=run_id)
        return preview(run, config=self.config, store=self.store, reading=self.reading,
                       masker=self.masker())

    def _prepared(self, source: Path, *, ci: bool, build_tag: str | None, fmt: str,
                  product: str | None, run_id: str | None) -> Run:
        """The run in ``source`` read, masked and validated, as :meth:`ingest` reads it."""
        from memidex.evidence import check_regular_file, decode_run, read_run_bytes
        from memidex.importers.detect import check_size, probe

        check_regular_file(source)  # a FIFO would block this command (or an MCP worker)
        check_size(source)  # a file too big for either is refused before it is read
        if fmt == "evidence" or (fmt == "auto" and probe(source) == "evidence"):
            data = decode_run(read_run_bytes(source), source=str(source))
            file_product = data.get("product") if isinstance(data, dict) else None
            if product is not None and isinstance(file_product, str) and \
                    product != file_product:
                raise UsageError(f"{source} is a run of product {file_product!r}, not "
                                 f"--product {product!r}",
                                 hint="a run file names its product; leave --product out, "
                                 "or fix the file's `product`")
            masked = False
        else:  # read as a stream, every string masked by the importer already
            data = self.import_report(source, fmt=fmt, product=product, run_id=run_id,
                                      build_tag=build_tag, ci=ci).evidence
            masked = True
        return prepare_run(data, source=str(source), masker=self.masker(),
                           build_tag=build_tag, ci=ci or env_ci(),
                           default_build_tag=self.config.build_tag, masked=masked)

    def import_report(self, source: Path, *, fmt: str = "auto", product: str | None = None,
                      run_id: str | None = None, build_tag: str | None = None,
                      ci: bool = False) -> ImportResult:
        """``runs import``: a Playwright JSON or JUnit XML report as run evidence
        (:mod:`memidex.importers`, docs/import.md), masked; nothing is written."""
        from memidex.evidence import check_regular_file
        from memidex.importers import import_report

        check_regular_file(source)
        chosen = product or self.config.product
        if not chosen:
            raise UsageError("no product for the report's run",
                             hint="pass --product or set `product` in memidex.toml")
        return import_report(source, product=chosen, root=self.store.root,
                             fmt="auto" if fmt == "evidence" else fmt, build_tag=build_tag,
                             run_id=run_id, ci=ci or env_ci(), masker=self.masker())

    # --- what runs taught ----------------------------------------------------------

    def runs(self, product: str | None = None) -> RunList:
        """``runs list``: one row per ingested run (of ``product``), in ordinal order."""
        from memidex.app.results import RunList, RunRow
        from memidex.runstate.store import RunStore

        rows = []
        for r in RunStore(self.config).results(product):
            ops: dict[str, int] = {}
            for op, _rid in r.changes:
                ops[op] = ops.get(op, 0) + 1
            rows.append(RunRow(r.run_id, r.product, r.ordinal, r.build_tag, r.ci,
                               dict(r.verdicts), dict(sorted(ops.items())), len(r.proposals),
                               r.done, r.rolled_back))
        if not rows:
            self.reading.require_known(product)
        return RunList(tuple(rows))

    def run(self, run_id: str) -> RunDetail:
        """``runs show``: the frozen run, its analysis and what its curation did — and
        what the agent knew: per test, the records its briefs gave for that run
        (``briefed``) and the ``served_records`` the run names that no recorded brief
        gave (``not_briefed``); the search ``levels`` its briefs had."""
        from memidex.app.results import RunDetail, RunTest
        from memidex.runstate.served import levels_by_ordinal, served_at
        from memidex.runstate.store import RunStore

        runs = RunStore(self.config)
        run_id = self.run_id(run_id)
        raw = runs.raw(run_id)
        if raw is None:
            raise NotFoundError(f"no run {run_id} has been ingested",
                                hint="`memidex runs list` lists them")
        raw = self.masker().mask_json(raw)
        result = runs.result(run_id)
        product, ordinal = str(raw.get("product")), int(raw.get("ordinal") or 0)
        analysis = raw.get("analysis") or {}
        tests = []
        for t in (raw.get("run") or {}).get("tests") or ():
            failure = t.get("failure") or {}
            served = sorted({rid for s in t.get("steps") or ()
                             for rid in s.get("served_records") or ()})
            test_id = str(t.get("test_id"))
            briefed = served_at(self.config, product, test_id, ordinal)
            tests.append(RunTest(
                test_id, str(t.get("verdict")), analysis.get(test_id),
                (failure.get("message") or "").split("\n", 1)[0] or None,
                len(t.get("steps") or ()), tuple(served), tuple(briefed),
                tuple(sorted(set(served) - set(briefed))) if briefed else ()))
        try:
            path = runs.path(run_id).relative_to(self.config.root).as_posix()
        except ValueError:
            path = str(runs.path(run_id))
        return RunDetail(
            run_id, product, ordinal, raw.get("build_tag"), bool(raw.get("ci")),
            raw.get("digest"), path, tuple(tests),
            tuple(result.changes) if result else (),
            tuple(result.proposals) if result else (), bool(result and result.done),
            bool(result and result.rolled_back), tuple(result.notes) if result else (),
            tuple(levels_by_ordinal(self.config, product).get(ordinal, [])))

    def run_id(self, given: str) -> str:
        """The ingested run ``given`` names: itself, or the one run whose id it is a
        unique prefix of (like record ids). A malformed id is a usage error (exit 2)."""
        from memidex.evidence import RUN_ID_PATTERN
        from memidex.runstate.store import RunStore

        if not isinstance(given, str) or not re.fullmatch(RUN_ID_PATTERN[1:-1], given):
            raise UsageError(f"run id {str(given)[:60]!r} must be letters, digits, . _ - "
                             "(starting with a letter or digit)",
                             hint="`memidex runs list` lists the runs ingested")
        runs = RunStore(self.config)
        if runs.path(given).exists():
            return given
        matches = sorted({r.run_id for r in runs.results() if r.run_id.startswith(given)})
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise UsageError(f"run id prefix {given!r} is ambiguous: "
                             f"{', '.join(matches[:5])}"
                             + (f" and {len(matches) - 5} more" if len(matches) > 5 else ""),
                             hint="give more of the id")
        return given

    def diff(self, tag: str, product: str | None = None) -> DiffReport:
        """``knowledge diff TAG``: what runs added, confirmed, superseded and deprecated
        since build ``tag``'s first ordinal (runs rolled back left out)."""
        from memidex.app.results import DiffReport
        from memidex.runstate.ordinals import Counters
        from memidex.runstate.store import RunStore

        chosen = self.reading.one_product(product)
        pc = Counters.load(self.config).product(chosen)
        if tag not in pc.builds:
            known = ", ".join(pc.build_order()) or "none yet"
            raise UsageError(f"no run of {chosen} used build tag {tag!r}",
                             hint=f"build tags of {chosen}: {known}")
        since = int(pc.builds[tag])
        out: dict[str, set[str]] = {v: set() for v in DIFF_OPS.values()}
        runs = []
        for r in RunStore(self.config).results(chosen):
            if r.ordinal < since or not r.done or r.rolled_back:
                continue
            runs.append(r.run_id)
            for op, rid in r.changes:
                key = DIFF_OPS.get(op)
                if key is not None:
                    out[key].add(rid)
        return DiffReport(tag, chosen, since, tuple(runs),
                          **{k: tuple(sorted(v)) for k, v in out.items()})

    # --- proposals -----------------------------------------------------------------

    def proposals(self) -> ProposalList:
        """``knowledge proposals``: the changes the checks held back."""
        from memidex.app.results import ProposalList
        from memidex.runstate.proposals import Proposals

        listing = Proposals(self.store).all()
        return ProposalList(listing.proposals, listing.damaged)

    def proposal(self, pid: str) -> ProposalDetail:
        """``knowledge proposals show ID``: one proposal (a unique prefix of its id is
        enough), the record as it would be written, and the record's file as it is now
        (None: the proposal adds it), secrets masked."""
        from memidex.app.results import ProposalDetail
        from memidex.runstate.proposals import Proposals

        queue = Proposals(self.store)
        p = queue.get(self._proposal_id(pid))
        masker = self.masker()
        try:
            current: str | None = (self.config.root / p.path).read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            current = None
        except (OSError, UnicodeDecodeError):
            current = ""
        return ProposalDetail(p, masker.mask(p.text),
                              None if current is None else masker.mask(current))

    def _proposal_id(self, given: str) -> str:
        """The proposal id ``given`` names: itself, or the one proposal it is a unique
        prefix of (like record ids)."""
        from memidex.runstate.proposals import Proposals

        queue = Proposals(self.store)
        if len(given) >= 18 or not given.startswith("p-") or len(given) < 3:
            return given
        matches = [p.id for p in queue.all().proposals if p.id.startswith(given)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise UsageError(f"proposal id prefix {given!r} is ambiguous: "
                             f"{', '.join(sorted(matches)[:5])}",
                             hint="give more of the id")
        return given

    def decide_proposal(self, pid: str, *, accept: bool) -> ProposalDecision:
        """Apply (``accept``) or drop a proposal, under the lease; applying refuses when
        the record changed since it was proposed."""
        from memidex.app.results import ProposalDecision
        from memidex.runstate.proposals import Proposals
        from memidex.write.route import Job

        pid = self._proposal_id(pid)
        Proposals(self.store).path(pid)  # a malformed id: a usage error, before the lease
        payload = {"id": pid, "accept": accept}
        command = f"knowledge proposals {'accept' if accept else 'reject'}"
        try:
            out = self.route.run(Job(PROPOSAL, command, lambda: payload), wait=self.wait())
        finally:
            self.reading.after_write()
        if accept:
            self.reading.settle()
        return ProposalDecision.from_json(out.result)

    def _proposal_job(self, session: WriterSession, job: Mapping[str, Any]) -> dict[str, Any]:
        from memidex.records.codec import parse_record_bytes
        from memidex.runstate.proposals import Proposals
        from memidex.write.writer import Write

        queue = Proposals(self.store)
        pid, accept = str(job["id"]), bool(job["accept"])
        p = queue.get(pid)
        changed = False
        if accept:
            record = parse_record_bytes(p.text.encode("utf-8"), p.path)
            self.store.check_write_folders(record.kind)
            changed = any(session.apply([Write(self.curation.masked(record), p.expected)],
                                        command="knowledge proposals accept"))
        queue.remove(pid, session.state)
        return {"id": p.id, "record_id": p.record_id, "path": p.path, "op": p.op,
                "decision": "accepted" if accept else "rejected", "changed": changed}

    # --- rollback ------------------------------------------------------------------

    def rollback(self, run_id: str, *, cascade: bool = False) -> RollbackResult:
        """``knowledge rollback``: undo every record change the run made, planned under the
        lease from the change ledger (:mod:`memidex.write.rollback`)."""
        from memidex.app.results import RollbackResult
        from memidex.write.route import Job

        run_id = self.run_id(run_id)  # a malformed id: refused before the lease
        payload = {"run_id": run_id, "cascade": cascade}
        try:
            out = self.route.run(Job(ROLLBACK, "knowledge rollback", lambda: payload),
                                 wait=self.wait())
        finally:
            self.reading.after_write()
        self.reading.settle()
        return RollbackResult.from_json(out.result)

    def _rollback_job(self, session: WriterSession, job: Mapping[str, Any]) -> dict[str, Any]:
        from memidex.app.ingest import refold
        from memidex.runstate.proposals import Proposals
        from memidex.runstate.store import RunStore
        from memidex.write.rollback import plan_rollback

        run_id, cascade = str(job["run_id"]), bool(job["cascade"])
        runs = RunStore(self.config)
        known = runs.raw(run_id) is not None
        mine = runs.result(run_id)
        rolled_back = {r.run_id for r in runs.results() if r.rolled_back}
        # Planned here, under the lease and after the writer's recovery finished whatever
        # an earlier attempt left in the journal: that attempt's change set is in the
        # ledger by now, named as this run's rollback.
        plan = plan_rollback(self.store, run_id, cascade=cascade, known_run=known,
                             rolled_back=rolled_back,
                             claimed=[rid for _op, rid in mine.changes] if mine else ())
        done = session.apply(list(plan.changes), command="knowledge rollback",
                             rollback_of=plan.runs) if plan.changes else []
        # Still under the lease: the runs are marked rolled back, their proposals
        # dropped, and the tests file folded again without them (their passes and misses
        # no longer count). An earlier attempt cut short is finished the same way.
        queue = Proposals(self.store)
        products = set()
        for rid in plan.runs:
            result = runs.result(rid)
            if result is not None:
                for pid in result.proposals:
                    queue.remove(pid, session.state)
                runs.save_result(result.replace(rolled_back=True), session.state)
                products.add(result.product)
        if plan.already and mine is not None:
            products.add(mine.product)  # the fold may be what an earlier attempt left
        for product in sorted(products):
            refold(self.config, product, session)
        return {"run_id": run_id, "runs": list(plan.runs), "restored": list(plan.restored),
                "removed": list(plan.removed), "changed": sum(1 for d in done if d),
                "already_rolled_back": plan.already}
