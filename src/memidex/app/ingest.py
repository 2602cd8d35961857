"""The ingest under the lease: one run, from its frozen evidence to the records it taught
(SPEC §3, ``docs/learning.md``).

:func:`ingest_job` is the handler of the write route's ``ingest`` job: it runs inside a
writer session — here, or in ``memidex daemon`` — after the learning service read,
masked and validated the run and read the floor ordinal from the index (both before the
lease). In order:

1. the same run again is a no-op; the same run id with other content is refused (exit 4);
2. a new run: each failing test is analysed (:func:`memidex.learning.plan.analyse`; a
   model only for what the rules leave unknown), its ordinal reserved in the run
   counters (read once, written once) and the run **frozen** with its analysis;
3. the learning core plans the changes (:func:`memidex.learning.plan.plan_run`, pure),
   the run's result is saved (``done: false``), the proposals queued, and every other
   change written as ONE fenced change set (the ledger keeps the run id and ordinal);
4. the run is folded into the tests file (read once, written once) and its result marked
   done.

Every state file goes through the session's fenced writer. Killed at any moment and run
again, the ingest finishes with the same bytes an uninterrupted one writes: the change
set is finished by the writer's recovery, the ledger says whether the run's change set
landed, model answers come from the journal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from memidex.config import Config
from memidex.errors import InvalidInputError, RecordError
from memidex.evidence import Run
from memidex.learning.plan import IngestPlan, Stored
from memidex.masking import Masker
from memidex.runstate.store import FrozenRun, RunResult, RunStore
from memidex.store.files import Store
from memidex.store.fsio import dump_json

if TYPE_CHECKING:
    from pathlib import Path

    from memidex.app.results import IngestResult
    from memidex.write.writer import WriterSession

__all__ = ["INGEST", "StoreSource", "already", "digest_of", "ingest_job", "refold"]

INGEST = "ingest"
"""The write route's job name for a run's ingest."""


def digest_of(run: Run) -> str:
    """``sha256:`` and the SHA-256 of the run's canonical JSON (``dump_json`` of
    :meth:`Run.as_dict`), hashed test by test: the same bytes as one dump of the whole
    run, without a copy of a big run as one dictionary and one string."""
    import json
    from dataclasses import replace

    h = hashlib.sha256()
    head = dump_json(replace(run, tests=()).as_dict())  # b'{..., "tests": []}\n'
    if not head.endswith(b'"tests": []}\n'):  # pragma: no cover - the keys sort so
        return "sha256:" + hashlib.sha256(dump_json(run.as_dict())).hexdigest()
    h.update(head[: -len(b"]}\n")])
    for i, test in enumerate(run.tests):
        one = test.as_dict()  # as Run.as_dict writes it
        h.update((", " if i else "").encode() + json.dumps(
            one, ensure_ascii=False, sort_keys=True).encode("utf-8"))
    h.update(b"]}\n")
    return "sha256:" + h.hexdigest()


class StoreSource:
    """The records the planner reads: the files of the knowledge folder. ``seen``: the
    bytes read, by content hash, for the writer (:attr:`Write.data`). (A plain class: a
    dataclass costs a one-shot ingest a fraction of a millisecond to define.)"""

    __slots__ = ("_records_dir", "_records_rel", "seen", "store")

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seen: dict[str, bytes] = {}
        self._records_rel = store.records_rel
        self._records_dir = str(store.records_dir)

    def read(self, kind: str, rid: str) -> Stored:
        from memidex.records.codec import content_hash, parse_record_bytes, recall
        from memidex.records.ids import ID_RE
        from memidex.records.vocab import KINDS

        if kind in KINDS and ID_RE.fullmatch(rid):  # Store.record_path's checks, as text
            path: str | Path = f"{self._records_dir}/{kind}/{rid}.md"
        else:
            path = self.store.record_path(kind, rid)  # refuses what could escape
        try:
            data = _read_all(path)
        except FileNotFoundError:
            return Stored()
        sha = content_hash(data)
        self.seen[sha] = data
        known = recall(sha)  # bytes this process wrote or parsed (a daemon's last ingest)
        if known is not None:
            return Stored(known, sha)
        rel = f"{self._records_rel}/{kind}/{rid}.md"  # store.rel(path), without pathlib
        try:
            return Stored(parse_record_bytes(data, rel), sha)
        except RecordError as exc:
            return Stored(None, sha,
                          f"{rel}: cannot be read ({exc.message}); left alone")

    def exists(self, rid: str) -> bool:
        kind = rid.split("-", 1)[0]
        try:
            return self.store.record_path(kind, rid).exists()
        except (ValueError, InvalidInputError):
            return False

    def relpath(self, kind: str, rid: str) -> str:
        return self.store.record_rel(kind, rid)


def _read_all(path: str | Path) -> bytes:
    """The file's bytes, to its end, as ``open(path, "rb").read()`` gives them — without
    the buffered file object (half the cost of reading a small record file)."""
    import os

    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, 1 << 16)
        if data:
            more = os.read(fd, 1 << 16)
            while more:
                data += more
                more = os.read(fd, 1 << 16)
        return data
    finally:
        os.close(fd)


def already(runs: RunStore, run: Run, digest: str) -> IngestResult | None:
    """The answer for a run ingested before (a no-op), or the refusal of the same run id
    with other content; None for a new (or unfinished) run."""
    from memidex.app.results import IngestResult

    raw = runs.raw(run.run_id)
    if raw is None:
        return None
    if raw.get("digest") != digest:
        raise InvalidInputError(
            f"run {run.run_id} was ingested before with other content (ordinal "
            f"{raw.get('ordinal')}): a run id names one run",
            hint="give the new run a new run_id")
    done = runs.result(run.run_id)
    if done is None or not done.done:
        return None
    analysis = raw.get("analysis") if isinstance(raw.get("analysis"), dict) else {}
    return IngestResult(run.run_id, run.product, int(raw.get("ordinal") or 0), run.build_tag,
                        run.ci, (), (), dict(analysis or {}), already=True)


def _result(run: Run, n: int, changes: tuple[tuple[str, str], ...],
            proposals: tuple[str, ...], *, done: bool, notes: tuple[str, ...]) -> RunResult:
    verdicts: dict[str, int] = {}
    for t in run.tests:
        verdicts[t.verdict] = verdicts.get(t.verdict, 0) + 1
    return RunResult(run.run_id, run.product, n, changes, proposals, done=done, notes=notes,
                     build_tag=run.build_tag, ci=run.ci, verdicts=verdicts)


class _Asker:
    """The model, asked through the session's journal: an answer is saved before it is
    used, and a saved one is given back after a crash (no second call)."""

    def __init__(self, session: WriterSession, config: Config, masker: Masker,
                 notes: list[str]) -> None:
        self.session = session
        self.config = config
        self.masker = masker
        self.notes = notes

    def __call__(self, step: str, prompt: str) -> str | None:
        from memidex.learning.adapter import ModelAnswerError, ask

        saved = self.session.load_answer(step)
        if isinstance(saved, str):
            return saved
        self.session.journal.begin_step(step, {"prompt_sha256": hashlib.sha256(
            prompt.encode("utf-8")).hexdigest()})
        try:
            answer = ask(self.config.model, prompt)
        except ModelAnswerError as exc:
            self.notes.append(f"model: {exc}; templates used")
            return None
        answer = self.masker.mask(answer)
        self.session.save_answer(step, answer)
        return answer


def ingest_job(session: WriterSession, job: Mapping[str, Any], *, config: Config,
               store: Store, masker: Masker) -> dict[str, Any]:
    """The ``ingest`` job (see the module doc). ``job``: ``run`` (a :class:`Run`, or its
    JSON from the daemon's inbox, validated again), ``floor`` (the highest ordinal the
    product's records name) and, in this process, ``progress``."""
    from memidex.app.results import IngestResult
    from memidex.learning.plan import analyse, plan_run
    from memidex.runstate.ordinals import Counters
    from memidex.runstate.proposals import Proposals
    from memidex.runstate.tests import TestsFile

    run = _run_of(job["run"])
    floor = int(job.get("floor") or 0)
    progress: Callable[[int, int], None] | None = job.get("progress")
    state = session.state
    # in this process the caller hashed the very run object it hands over; a queued one
    # (JSON from the inbox) is hashed again
    given = job.get("digest")
    digest = given if isinstance(job["run"], Run) and isinstance(given, str) else \
        digest_of(run)
    runs = RunStore(config)
    early = already(runs, run, digest)  # again, now that no one else is writing
    if early is not None:
        return early.to_json()
    notes: list[str] = []
    ask = _Asker(session, config, masker, notes) if config.model.enabled else None
    tests_file = TestsFile(config, run.product)
    tests = tests_file.load()
    counters = Counters.load(config)
    frozen = runs.get(run.run_id)
    resumed = frozen is not None
    if frozen is None:
        why: dict[str, str] = {}
        causes = analyse(run, tests.tests, model=config.model, ask=ask, notes=notes, why=why)
        done_runs = {rid for rid in counters.product(run.product).pending
                     if rid != run.run_id and runs.path(rid).exists()}
        counters, n = counters.settle(run.product, done_runs).reserve(
            run.product, run.run_id, floor=floor, build_tag=run.build_tag)
        counters.save(state)  # before the freeze: a kill never hands n to another run
        frozen = FrozenRun(run=run, ordinal=n, digest=digest, analysis=causes,
                           path=runs.path(run.run_id), why=why)
        runs.freeze(frozen, state)
    else:
        pc = counters.product(run.product)
        if pc.next <= frozen.ordinal or (run.build_tag is not None and
                                         run.build_tag not in pc.builds):
            counters, _n = counters.reserve(run.product, run.run_id, floor=floor,
                                            build_tag=run.build_tag)
            counters.save(state)
    n = frozen.ordinal
    source = StoreSource(store)
    newer = _build_order(runs, run, counters.product(run.product).builds)
    duplicate = _duplicate_check(config, masker)

    def plan() -> IngestPlan:
        return plan_run(run, n, frozen.analysis, tests.tests, source, config.learning,
                        mask=masker.mask_record, mask_text=masker.mask, model=config.model,
                        ask=ask, progress=progress, why=frozen.why, newer_build=newer,
                        duplicate=duplicate)

    landed = resumed and any(e.landed for e in session.ledger.for_run(run.run_id))
    the_plan: IngestPlan | None
    if landed:
        saved = runs.result(run.run_id)
        changes = saved.changes if saved is not None else ()
        proposals = saved.proposals if saved is not None else ()
        the_plan = plan() if tests.ordinal < n else None
    else:
        the_plan = plan()
        changes = tuple((d.op, d.id) for d in the_plan.decisions if d.op != "contradict")
        proposals = tuple(p.id for p in the_plan.proposals)
        runs.save_result(_result(run, n, changes, proposals, done=False,
                                 notes=tuple(notes + the_plan.notes)), state)
        queue = Proposals(store)
        for p in the_plan.proposals:
            queue.save(p, state)
        from memidex.write.writer import Write

        writes = [Write(d.record, d.expected, d.before, text,
                        source.seen.get(d.expected) if isinstance(d.expected, str) else None)
                  for d, text in zip(the_plan.decisions, the_plan.texts, strict=True)
                  if d.record is not None]
        if writes:
            wrote = session.apply(writes, command="runs ingest", run_id=run.run_id,
                                  ordinal=n)
            if not session.recovery.replayed:  # what this change set wrote is all there is
                from memidex.index.refresh import landed as refresh_from

                rels = {store.record_rel(w.record.kind, w.record.id): w.text
                        for w, did in zip(writes, wrote, strict=True) if did}
                refresh_from(store, rels, {rel: text.encode("utf-8")
                                           for rel, text in rels.items() if text is not None})
    if the_plan is not None and tests.ordinal < n:
        tests_file.save(state, the_plan.tests, ordinal=n)
    elif resumed and tests.ordinal > n:  # a later run was folded while this one waited
        refold(config, run.product, session, also=run.run_id)
    all_notes = tuple(notes + (the_plan.notes if the_plan is not None else []))
    runs.save_result(_result(run, n, tuple(changes), tuple(proposals), done=True,
                             notes=all_notes), state)
    from memidex.runstate.notes import notes_path

    state.remove(notes_path(config, run.run_id))  # working memory lives for one run only
    steps = [s for s in session.journal.pending_steps() if s.startswith(f"model:{run.run_id}:")]
    for s in steps:
        session.journal.mark_step_done(s)
    session.journal.forget_steps(steps)
    contradicted_by: dict[str, list[str]] = {}
    if the_plan is not None:
        for d in the_plan.decisions:
            if d.record is not None and d.record.relations.contradicts and d.op == "unknown":
                contradicted_by[d.id] = list(d.record.relations.contradicts)
    out = []
    for op, rid in changes:
        item: dict[str, Any] = {"op": op, "id": rid}
        if rid in contradicted_by:
            item["contradicts"] = contradicted_by[rid]
        out.append(item)
    return IngestResult(run.run_id, run.product, n, run.build_tag, run.ci, tuple(out),
                        tuple(proposals), frozen.analysis, resumed=resumed,
                        notes=all_notes).to_json()


def _build_order(runs: RunStore, run: Run, builds: Mapping[str, int]
                 ) -> Callable[[Any], str | None] | None:
    """For a run of an older build than the product's newest (build tags are ordered by
    their first ordinal): which newer build last confirmed a record, if any — so the
    run never rewrites what that build confirmed. None for a run of the newest build
    (the common case: nothing to read)."""
    if run.build_tag is None or run.build_tag not in builds:
        return None
    mine = builds[run.build_tag]
    if mine >= max(builds.values()):
        return None
    tag_of = {r.run_id: r.build_tag for r in runs.results(run.product)
              if r.build_tag is not None and not r.rolled_back}

    def newer(record: Any) -> str | None:
        best: tuple[int, str] | None = None
        for e in record.evidence:
            tag = tag_of.get(e.run) if e.run else None
            rank = builds.get(tag, -1) if tag is not None else -1
            if tag is not None and rank > mine and (best is None or rank > best[0]):
                best = (rank, tag)
        return best[1] if best is not None else None

    return newer


def _duplicate_check(config: Config, masker: Masker) -> Callable[[Any], str | None] | None:
    """:func:`memidex.app.semantic.duplicate_check`, after a look at the model cache
    folder: with no model folder in it (the common case) there is no check, and neither
    the search nor the vectors code is imported (milliseconds of a one-shot ingest). The
    same answer that function gives then: no folder, an unreadable one or a file there."""
    import os

    folder = os.path.expanduser(config.model_cache_dir)
    try:
        names = os.listdir(folder if os.path.isabs(folder) else config.root / folder)
    except OSError:
        return None
    if not any(not name.startswith(".") for name in names):
        return None
    from memidex.app.semantic import duplicate_check

    return duplicate_check(config, masker)


def _run_of(value: Any) -> Run:
    """The run a job carries: the object itself, or its JSON (from the daemon's inbox:
    validated again, it is a file on disk)."""
    if isinstance(value, Run):
        return value
    from memidex.evidence import RunEvidenceError, build_run, validate_run

    violations = validate_run(value)
    if violations:
        raise RunEvidenceError("queued run", violations)
    return build_run(value)


def refold(config: Config, product: str, session: WriterSession, *,
           also: str | None = None) -> int:
    """Rebuild ``product``'s tests file from the runs that stand (done, not rolled back),
    in ordinal order — after a rollback, so a rolled-back run no longer counts as a pass
    on its build or towards a deprecation; and for a resumed ingest (``also``: its run,
    not done yet) that a later run overtook (paused past its lease, say), so its fold
    joins the later one's instead of being lost. Returns how many runs were folded. (A
    fact a run both changed and found missing is counted as if the run had not changed
    it.)"""
    from memidex.evidence import build_run
    from memidex.learning.candidates import project
    from memidex.learning.fold import TestState, count_missing, fold_run
    from memidex.runstate.tests import TestsFile

    runs = RunStore(config)
    tests: dict[str, TestState] = {}
    last = 0
    folded = 0
    for result in runs.results(product):
        raw = runs.raw(result.run_id)
        if not (result.done or result.run_id == also) or result.rolled_back or raw is None:
            continue
        run = build_run(raw["run"])
        analysis = raw.get("analysis") or {}
        count_missing(tests, run, config.learning.deprecate_after_runs, set())
        fold_run(tests, run, result.ordinal, project(run, analysis, raw.get("why")), analysis)
        last = max(last, result.ordinal)
        folded += 1
    tests_file = TestsFile(config, product)
    tests_file.save(session.state, tests, ordinal=max(last, tests_file.load().ordinal))
    return folded
