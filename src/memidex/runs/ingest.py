"""``memidex runs ingest``: from a run's evidence to reviewed, versioned records (SPEC §3).

The steps, all under the writer lease (``docs/learning.md``):

1. read the run, **mask** every string in it (secrets, home paths) before anything else
   sees it, then validate it; apply ``--build-tag`` / ``--ci``;
2. **freeze** it under ``.agent-qa/runs/<run_id>.json`` with its ordinal and its analysis:
   the same run again is a no-op, the same run id with other content is refused (exit 4).
   The ordinal is allocated once: the frozen file is written first, and the counters in
   ``build-ordinals.json`` are repaired from it on a resume;
3. **analyse** each failing test (``memidex.learning.analysis``; a model only for what the
   rules leave ``unknown``), **project** candidates (``memidex.learning.candidates``),
   **curate** each into one change (``memidex.learning.curator``), find the deprecations
   (``memidex.runstate.store.TestState``), and turn the changes the **checks** catch into
   proposals (``queue/proposals/``);
4. write every other change as ONE journaled change set through the fenced writer
   (the ledger keeps the run id and ordinal); then fold the run into the tests file and
   mark the run done.

Killed at any moment and run again, the ingest finishes with the same bytes an
uninterrupted one writes: the change set is finished by the writer's recovery, the
ledger says whether the run's change set landed, model answers come from the journal.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memidex.config import Config
from memidex.config.tables import LearningSettings, ModelSettings
from memidex.errors import InvalidInputError, RecordError, UsageError
from memidex.evidence import Run, RunEvidenceError, read_run_bytes, validate_run
from memidex.learning.analysis import CAUSES, classify, error_text
from memidex.learning.candidates import Candidate, project
from memidex.learning.curator import Context, Decision, contradicted, decide, subject_id
from memidex.masking import Masker
from memidex.records.codec import content_hash, dump_record, parse_record_bytes
from memidex.records.ids import record_id
from memidex.records.model import Record
from memidex.records.transitions import deprecate
from memidex.runstate.ordinals import ordinals_path, read_ordinals
from memidex.runstate.store import FrozenRun, RunResult, RunStore, TestState
from memidex.store.files import Store
from memidex.store.fsio import atomic_write, dump_json, read_json

__all__ = ["IngestResult", "Proposal", "Proposals", "count_missing", "fold_run", "ingest_run",
           "prepare_run", "refold_tests"]

MAX_PASSED_BUILDS = 20


@dataclass(frozen=True, slots=True)
class IngestResult:
    run_id: str
    product: str
    ordinal: int
    build_tag: str | None
    ci: bool
    changes: tuple[dict[str, Any], ...]
    proposals: tuple[str, ...]
    analysis: Mapping[str, str]
    already: bool = False
    resumed: bool = False
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "product": self.product, "ordinal": self.ordinal,
                "build_tag": self.build_tag, "ci": self.ci,
                "changes": [dict(c) for c in self.changes],
                "proposals": list(self.proposals),
                "analysis": dict(sorted(self.analysis.items())),
                "already_ingested": self.already, "resumed": self.resumed,
                "notes": list(self.notes)}


# --- reading and masking -------------------------------------------------------------

def _mask(value: Any, masker: Masker) -> Any:
    if isinstance(value, str):
        return masker.mask(value)
    if isinstance(value, list):
        return [_mask(v, masker) for v in value]
    if isinstance(value, dict):
        return {masker.mask(k) if isinstance(k, str) else k: _mask(v, masker)
                for k, v in value.items()}
    return value


def prepare_run(raw: bytes, *, source: str, masker: Masker, build_tag: str | None = None,
                ci: bool = False, default_build_tag: str | None = None) -> Run:
    """The run in ``raw``, masked first, then validated; ``build_tag`` (a flag) replaces
    the file's, ``default_build_tag`` (config, environment) fills a missing one, ``ci``
    marks it a CI run."""
    from memidex.evidence import Violation, build_run, decode_run

    data = decode_run(raw, source=source)
    data = _mask(data, masker)
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RunEvidenceError(source, [Violation("(file)", "holds a lone UTF-16 surrogate "
                                                            f"({exc.object[exc.start:exc.end]!r})"
                                                            ", which is not text")]) from None
    if isinstance(data, dict):
        if build_tag is not None:
            data["build_tag"] = masker.mask(build_tag)
        elif data.get("build_tag") is None and default_build_tag:
            data["build_tag"] = masker.mask(default_build_tag)
        if ci:
            data["ci"] = True
    violations = validate_run(data)
    if violations:
        raise RunEvidenceError(source, violations)
    return build_run(data)  # validated once, above


def digest_of(run: Run) -> str:
    return "sha256:" + hashlib.sha256(dump_json(run.as_dict())).hexdigest()


# --- proposals -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Proposal:
    """A change the checks held back for a person (``knowledge proposals``)."""

    id: str
    run_id: str
    ordinal: int
    op: str
    record_id: str
    path: str
    reason: str
    expected: str | None  # the content hash of the file when it was proposed
    text: str  # the record as it would be written

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "run_id": self.run_id, "ordinal": self.ordinal,
                "op": self.op, "record_id": self.record_id, "path": self.path,
                "reason": self.reason, "expected": self.expected, "text": self.text}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Proposal:
        return cls(id=str(data["id"]), run_id=str(data["run_id"]),
                   ordinal=int(data["ordinal"]), op=str(data["op"]),
                   record_id=str(data["record_id"]), path=str(data["path"]),
                   reason=str(data["reason"]), expected=data.get("expected"),
                   text=str(data["text"]))


class Proposals:
    """The curation queue: ``queue/proposals/<id>.json``."""

    def __init__(self, store: Store) -> None:
        self.dir = store.queue_dir / "proposals"

    def path(self, pid: str) -> Path:
        if not pid.startswith("p-") or not pid[2:].isalnum() or len(pid) > 40:
            raise UsageError(f"{pid!r} is not a proposal id",
                             hint="`memidex knowledge proposals` lists them")
        return self.dir / f"{pid}.json"

    def save(self, p: Proposal) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path(p.id), dump_json(p.as_dict(), indent=1))

    def get(self, pid: str) -> Proposal:
        data = read_json(self.path(pid))
        if data is None:
            from memidex.errors import NotFoundError

            raise NotFoundError(f"no proposal {pid}",
                                hint="`memidex knowledge proposals` lists them")
        return Proposal.from_dict(data)

    def all(self) -> list[Proposal]:
        try:
            names = sorted(p for p in self.dir.glob("p-*.json"))
        except OSError:
            return []
        out = []
        for path in names:
            data = read_json(path)
            if data is not None:
                out.append(Proposal.from_dict(data))
        return sorted(out, key=lambda p: (p.ordinal, p.id))

    def remove(self, pid: str) -> None:
        self.path(pid).unlink(missing_ok=True)


def proposal_id(rid: str, record: Record) -> str:
    """A proposal's id: the record and what it would become (its claim), so a change that
    later runs propose again is the same proposal, not a new one each run."""
    from memidex.learning.curator import claim_of

    key = f"{rid}\x1f{record.status}\x1f{claim_of(record)}\x1f{record.valid.until}"
    return "p-" + hashlib.sha256(key.encode()).hexdigest()[:16]


# --- the ingest ------------------------------------------------------------------------

@dataclass
class _Plan:
    decisions: list[Decision] = field(default_factory=list)
    proposals: list[Proposal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tests: dict[str, TestState] = field(default_factory=dict)


Progress = Callable[[int, int], None]


def _read_record(store: Store, kind: str, rid: str) -> tuple[Record | None, str | None,
                                                             str | None]:
    """(record, content hash, problem) of the record file ``rid`` (all None: no file)."""
    path = store.record_path(kind, rid)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, None, None
    rel = store.rel(path)
    try:
        return parse_record_bytes(data, rel), content_hash(data), None
    except RecordError as exc:
        return None, content_hash(data), f"{rel}: cannot be read ({exc.message}); left alone"


class _Ingest:
    def __init__(self, store: Store, config: Config, session: Any, masker: Masker,
                 settings: LearningSettings, model: ModelSettings,
                 progress: Progress | None) -> None:
        self.store = store
        self.config = config
        self.session = session
        self.masker = masker
        self.settings = settings
        self.model = model
        self.progress = progress
        self.runs = RunStore(config)
        self.notes: list[str] = []

    # -- model steps (answers saved in the journal before they are used) --

    def _ask(self, step: str, prompt: str) -> str | None:
        from memidex.learning.adapter import ModelAnswerError, ask

        saved = self.session.load_answer(step)
        if isinstance(saved, str):
            return saved
        self.session.journal.begin_step(step, {"prompt_sha256": hashlib.sha256(
            prompt.encode("utf-8")).hexdigest()})
        try:
            answer = ask(self.model, prompt)
        except ModelAnswerError as exc:
            self.notes.append(f"model: {exc}; templates used")
            return None
        answer = self.masker.mask(answer)
        self.session.save_answer(step, answer)
        return answer

    def _classify_unknowns(self, run: Run, causes: dict[str, str]) -> None:
        from memidex.learning.adapter import ModelAnswerError, classify_prompt, parse_cause

        for test in run.tests:
            if causes.get(test.test_id) != "unknown" or not self.model.enabled:
                continue
            answer = self._ask(f"model:{run.run_id}:classify:{test.test_id}",
                               classify_prompt(test.test_id, error_text(test)))
            if answer is None:
                continue
            try:
                causes[test.test_id] = parse_cause(answer)
            except ModelAnswerError as exc:
                self.notes.append(f"model: {exc} (test {test.test_id})")

    def _reword(self, run_id: str, c: Candidate, record: Record) -> Record:
        from memidex.learning.adapter import ModelAnswerError, parse_wording, wording_prompt

        answer = self._ask(f"model:{run_id}:word:{record.id}", wording_prompt(c.prompt_facts))
        if answer is None:
            return record
        try:
            wording = parse_wording(answer)
        except ModelAnswerError as exc:
            self.notes.append(f"model: {exc} ({record.id})")
            return record
        return replace(record, title=self.masker.mask(wording.title),
                       body=self.masker.mask(wording.body), written_by="model")

    # -- analysis --

    def analyse(self, run: Run, tests: Mapping[str, TestState]) -> dict[str, str]:
        causes: dict[str, str] = {}
        for test in run.tests:
            state = tests.get(test.test_id)
            cause = classify(test, passed_on_build=state.passed_builds if state else (),
                             build_tag=run.build_tag)
            if cause is not None:
                causes[test.test_id] = cause.cause
        self._classify_unknowns(run, causes)
        return causes

    # -- curation --

    def plan(self, frozen: FrozenRun, tests: dict[str, TestState]) -> _Plan:
        run = frozen.run
        n = frozen.ordinal
        ctx = Context(run.run_id, n, run.ci, run.product, self.settings)
        plan = _Plan(tests={k: replace(v, anchors=set(v.anchors),
                                       passed_builds=list(v.passed_builds),
                                       taught=dict(v.taught), missing=dict(v.missing))
                            for k, v in tests.items()})
        candidates = project(run, frozen.analysis)
        total = len(candidates)
        touched: dict[str, Decision] = {}
        held: dict[str, str] = {}  # record id -> why it is a proposal
        for i, c in enumerate(candidates):
            rid = subject_id(c, run.product)
            existing, sha, problem = _read_record(self.store, c.kind, rid)
            if problem is not None:
                plan.notes.append(problem)
                continue
            d = decide(c, existing, ctx)
            if d.record is not None:
                # Normalising app text (spaces collapsed) can rebuild a secret the run's
                # masking split: every string is masked again where it is stored.
                d = replace(d, record=self.masker.mask_record(d.record))
            if d.record is not None and self.model.enabled and (
                    d.op in ("add", "supersede", "unknown") and existing is None
                    or d.op == "supersede"
                    or existing is not None and existing.written_by == "template"):
                d = replace(d, record=self._reword(run.run_id, c, d.record))
            d = replace(d, expected=sha)
            touched[rid] = d
            if c.self_contradiction and d.record is not None:
                held[rid] = ("contradicts its own anchors: the same run both verified and "
                             f"failed `{c.evidence.check}` on {c.anchor}")
            elif d.op == "supersede" and existing is not None:
                if existing.trust.source == "human":
                    held[rid] = "rewrites a record a person wrote"
                elif existing.written_by == "template" and d.record is not None \
                        and d.record.written_by == "template" \
                        and _changed_share(existing.body, c.body) > self.settings.max_body_change:
                    held[rid] = (f"rewrites more than {self.settings.max_body_change:.0%} of "
                                 "the body at once")
            if c.contradicts is not None and d.record is not None:
                self._contradict(c, ctx, touched, d)
            if self.progress is not None:
                self.progress(i + 1, total)
        self._deprecations(run, n, plan, touched)
        rewrites = [rid for rid, d in touched.items() if d.op in ("supersede", "deprecate")]
        if len(rewrites) > self.settings.max_rewrites:
            for rid in rewrites:
                held.setdefault(rid, f"the run rewrites {len(rewrites)} records at once "
                                     f"(more than {self.settings.max_rewrites})")
        self._missing_citations(touched, held)
        for rid, d in list(touched.items()):
            problem = _invalid(self.store, d.record)
            if problem is not None:  # never write (or propose) a record that cannot load
                plan.notes.append(f"{rid}: not written: {problem}")
                touched[rid] = replace(d, op="noop", record=None)
        for rid, d in touched.items():
            if d.record is not None and rid in held:
                path = self.store.rel(self.store.record_path(d.record.kind, rid))
                plan.proposals.append(Proposal(
                    id=proposal_id(rid, d.record), run_id=run.run_id, ordinal=n, op=d.op,
                    record_id=rid, path=path, reason=held[rid], expected=d.expected,
                    text=dump_record(d.record)))
            else:
                plan.decisions.append(d)
        self._fold_tests(run, n, plan, candidates)
        return plan

    def _contradict(self, c: Candidate, ctx: Context, touched: dict[str, Decision],
                    d: Decision) -> None:
        assert c.contradicts is not None and d.record is not None
        kind, anchor, scope = c.contradicts
        fid = record_id(kind, anchor, ctx.product, dict(scope))
        prior = touched.get(fid)
        # the fact as this run leaves it so far, and as it is on disk (with its hash)
        fact, disk, sha = ((prior.record, prior.before, prior.expected) if prior is not None
                           else (None, None, None))
        if fact is None and prior is None:
            disk, sha, _problem = _read_record(self.store, kind, fid)
            fact = disk
        if fact is None:
            return
        hit = contradicted(fact, c, ctx)
        if hit is None:
            return
        op = prior.op if prior is not None else "contradict"  # written, listed with the unknown
        touched[fid] = Decision(op, fid, hit, disk, expected=sha)
        rel = d.record.relations
        touched[d.id] = replace(d, record=replace(d.record, relations=replace(
            rel, contradicts=tuple(sorted({*rel.contradicts, fid})))))

    def _deprecations(self, run: Run, n: int, plan: _Plan,
                      touched: dict[str, Decision]) -> None:
        """Facts a passing test taught whose anchor its latest passing runs no longer
        reach: deprecated after ``deprecate_after_runs`` such runs (:func:`count_missing`)."""
        for rid in count_missing(plan.tests, run, self.settings.deprecate_after_runs,
                                 set(touched)):
            record, sha, _problem = _read_record(self.store, "fact", rid)
            if record is None or record.status not in ("candidate", "active") or \
                    n <= record.valid.from_:
                continue
            touched[rid] = Decision("deprecate", rid, deprecate(record, n), record,
                                    expected=sha)

    def _missing_citations(self, touched: Mapping[str, Decision],
                           held: dict[str, str]) -> None:
        for rid, d in touched.items():
            if d.record is None:
                continue
            rel = d.record.relations
            for other in (*rel.cites, *rel.contradicts, *rel.supersedes,
                          *([rel.superseded_by] if rel.superseded_by else [])):
                if other in touched:
                    continue
                kind = other.split("-", 1)[0]
                try:
                    exists = self.store.record_path(kind, other).exists()
                except (ValueError, InvalidInputError):
                    exists = False
                if not exists:
                    held.setdefault(rid, f"cites a missing record: {other}")

    def _fold_tests(self, run: Run, n: int, plan: _Plan,
                    candidates: Sequence[Candidate]) -> None:
        fold_run(plan.tests, run, n, candidates)


def count_missing(tests: dict[str, TestState], run: Run, after: int,
                  touched: set[str]) -> list[str]:
    """For each passing test of ``run``: the facts it taught whose anchor it no longer
    reached count one more missed run (one it reached is reset); the ids of those that
    reach ``after`` missed runs are returned (and no longer tracked) — unless the run
    itself changes them (``touched``). Pure: updates ``tests`` in place."""
    due: list[str] = []
    for test in run.tests:
        if test.verdict != "pass":
            continue
        state = tests.get(test.test_id)
        if state is None or not state.taught:
            continue
        seen = {f"test:{test.test_id}", *test.anchors}
        for s in test.steps:
            seen.update(s.anchors)
            if s.target:
                seen.add(s.target)
        for rid, anchor in sorted(state.taught.items()):
            if anchor in seen:
                state.missing.pop(rid, None)
                continue
            missed = state.missing.get(rid, 0) + 1
            state.missing[rid] = missed
            if missed < after or rid in touched:
                continue
            state.taught.pop(rid, None)
            state.missing.pop(rid, None)
            due.append(rid)
    return due


def fold_run(tests: dict[str, TestState], run: Run, n: int,
             candidates: Sequence[Candidate]) -> None:
    """Fold run ``n`` into the tests file's state: each test's anchors, last ordinal, run
    count, the builds it passed on, the facts it taught. Pure: updates ``tests``."""
    taught: dict[str, dict[str, str]] = {}
    for c in candidates:
        if c.kind == "fact":
            taught.setdefault(c.test_id, {})[subject_id(c, run.product)] = c.anchor
    for test in run.tests:
        state = tests.setdefault(test.test_id, TestState())
        state.anchors.update(test.anchors)
        for s in test.steps:
            state.anchors.update(s.anchors)
            if s.target:
                state.anchors.add(s.target)
        state.last_ordinal = max(state.last_ordinal, n)
        state.runs += 1
        if test.verdict == "pass" and run.build_tag:
            builds = [b for b in state.passed_builds if b != run.build_tag]
            state.passed_builds = [*builds, run.build_tag][-MAX_PASSED_BUILDS:]
        state.taught.update(taught.get(test.test_id, {}))


def refold_tests(config: Config, product: str) -> int:
    """Rebuild ``product``'s tests file from the runs that stand (done, not rolled back),
    in ordinal order — after a rollback, so a rolled-back run no longer counts as a pass
    on its build or towards a deprecation. Returns how many runs were folded. (A fact a
    run both changed and found missing is counted as if the run had not changed it.)"""
    from memidex.evidence import build_run

    runs = RunStore(config)
    settings = config.learning
    tests: dict[str, TestState] = {}
    last = 0
    folded = 0
    for result in runs.results(product):
        raw = runs.raw(result.run_id)
        if not result.done or result.rolled_back or raw is None:
            continue
        run = build_run(raw["run"])
        analysis = raw.get("analysis") or {}
        count_missing(tests, run, settings.deprecate_after_runs, set())
        fold_run(tests, run, result.ordinal, project(run, analysis))
        last = max(last, result.ordinal)
        folded += 1
    runs.save_tests(product, tests, ordinal=max(last, runs.tests_ordinal(product)))
    return folded


def _invalid(store: Store, record: Record | None) -> str | None:
    """Why ``record`` would not load back from its file (None: it would)."""
    if record is None:
        return None
    from memidex.records.codec import parse_record, remember

    text = dump_record(record)
    try:
        parsed = parse_record(text, record.relpath)
    except RecordError as exc:
        return exc.message
    # The index refresh after the ingest reads these bytes back: it takes this parse.
    remember(content_hash(text.encode("utf-8")), parsed)
    return None


def _changed_share(old: str, new: str) -> float:
    if not old:
        return 0.0
    return 1.0 - difflib.SequenceMatcher(None, old, new, autojunk=False).ratio()


def _already(runs: RunStore, run: Run, digest: str) -> IngestResult | None:
    """The answer for a run ingested before (a no-op), or the refusal of the same run id
    with other content; None for a new (or unfinished) run."""
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


def _reserve_ordinal(config: Config, product: str, run_id: str, floor: int) -> int:
    """The run's ordinal, reserved in ``build-ordinals.json`` before the run is frozen:
    ``next`` moves past it and ``pending`` remembers it for ``run_id``, so a kill before
    the freeze gives the same ordinal back to the same run and never to another."""
    data = read_ordinals(config)
    entry = dict(data.get(product) or {})
    pending = dict(entry.get("pending") or {})
    held = pending.get(run_id)
    if isinstance(held, int) and not isinstance(held, bool):
        return held
    n = max(int(entry.get("next", 1)), floor + 1)
    pending[run_id] = n
    entry["pending"] = pending
    entry["next"] = n + 1
    _write_entry(config, product, entry)
    return n


def _ensure_ordinals(config: Config, product: str, n: int, tag: str | None,
                     run_id: str) -> None:
    """``build-ordinals.json`` knows that ``product``'s run ``n`` happened (with ``tag``):
    ``next`` past it, the tag mapped to its first ordinal, the reservation settled.
    Idempotent."""
    data = read_ordinals(config)
    entry = dict(data.get(product) or {})
    nxt = int(entry.get("next", 1))
    builds = dict(entry.get("builds") or {})
    pending = dict(entry.get("pending") or {})
    changed = False
    if nxt <= n:
        entry["next"] = n + 1
        changed = True
    if tag is not None and (tag not in builds or builds[tag] > n):
        builds[tag] = n
        changed = True
    if run_id in pending:
        del pending[run_id]
        changed = True
    if not changed:
        return
    entry["builds"] = builds
    if pending:
        entry["pending"] = pending
    else:
        entry.pop("pending", None)
    _write_entry(config, product, entry)


def _write_entry(config: Config, product: str, entry: dict[str, Any]) -> None:
    path = ordinals_path(config)
    raw = read_json(path) or {}
    products = dict(raw.get("products") or {})
    products[product] = entry
    raw["products"] = products
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, dump_json(raw, indent=1))


def _result(run: Run, n: int, changes: tuple[tuple[str, str], ...],
            proposals: tuple[str, ...], *, done: bool, notes: tuple[str, ...]) -> RunResult:
    verdicts: dict[str, int] = {}
    for t in run.tests:
        verdicts[t.verdict] = verdicts.get(t.verdict, 0) + 1
    return RunResult(run.run_id, run.product, n, changes, proposals, done=done, notes=notes,
                     build_tag=run.build_tag, ci=run.ci, verdicts=verdicts)


def ingest_run(store: Store, config: Config, run: Run, *, wait: float,
               masker: Masker, progress: Progress | None = None,
               floor: Callable[[], int] = lambda: 0) -> IngestResult:
    """Ingest ``run`` (already masked and validated: :func:`prepare_run`). ``floor()``:
    the highest ordinal the product's records name (asked only for a new run); the run's
    ordinal comes after it even when this clone's counters are missing or behind."""
    from memidex.write.route import refuse_under_daemon
    from memidex.write.writer import Write, writer_session

    settings = config.learning
    model = config.model
    digest = digest_of(run)
    runs = RunStore(config)
    store.check_write_folders()
    # The same run again, or the same id with other content: answered before the lease,
    # so a no-op writes nothing at all (not even the lease's files).
    early = _already(runs, run, digest)
    if early is not None:
        return early
    refuse_under_daemon(store, "runs ingest")
    with writer_session(store, wait=wait, ttl=config.lease_ttl_seconds) as session:
        job = _Ingest(store, config, session, masker, settings, model, progress)
        resumed = False
        early = _already(runs, run, digest)  # again, now that no one else is writing
        if early is not None:
            return early
        frozen_or_none = runs.get(run.run_id)
        if frozen_or_none is not None:
            frozen = frozen_or_none
            resumed = True
        else:
            tests = runs.tests(run.product)
            causes = job.analyse(run, tests)
            n = _reserve_ordinal(config, run.product, run.run_id, floor())
            frozen = FrozenRun(run=run, ordinal=n, digest=digest, analysis=causes,
                               path=runs.path(run.run_id))
            runs.freeze(frozen)
        n = frozen.ordinal
        _ensure_ordinals(config, run.product, n, run.build_tag, run.run_id)
        tests_ordinal = runs.tests_ordinal(run.product)
        tests = runs.tests(run.product)
        landed = resumed and any(e.landed for e in session.ledger.for_run(run.run_id))
        if landed:
            plan_result = runs.result(run.run_id)
            changes = plan_result.changes if plan_result is not None else ()
            proposals = plan_result.proposals if plan_result is not None else ()
            plan = job.plan(frozen, tests) if tests_ordinal < n else None
        else:
            plan = job.plan(frozen, tests)
            changes = tuple((d.op, d.id) for d in plan.decisions if d.op != "contradict")
            proposals = tuple(p.id for p in plan.proposals)
            runs.save_result(_result(run, n, changes, proposals, done=False,
                                     notes=tuple(job.notes + plan.notes)))
            queue = Proposals(store)
            for p in plan.proposals:
                queue.save(p)
            writes = [Write(d.record, d.expected, d.before) for d in plan.decisions
                      if d.record is not None]
            if writes:
                session.apply(writes, command="runs ingest", run_id=run.run_id, ordinal=n)
        if plan is not None and tests_ordinal < n:
            runs.save_tests(run.product, plan.tests, ordinal=n)
        notes = tuple(job.notes + (plan.notes if plan is not None else []))
        runs.save_result(_result(run, n, tuple(changes), tuple(proposals), done=True,
                                 notes=notes))
        steps = [s for s in session.journal.pending_steps() if s.startswith(
            f"model:{run.run_id}:")]
        for s in steps:
            session.journal.mark_step_done(s)
        session.journal.forget_steps(steps)
    contradicted_by: dict[str, list[str]] = {}
    if plan is not None:
        for d in plan.decisions:
            if d.record is not None and d.record.relations.contradicts and d.op == "unknown":
                contradicted_by[d.id] = list(d.record.relations.contradicts)
    out = []
    for op, rid in changes:
        item: dict[str, Any] = {"op": op, "id": rid}
        if rid in contradicted_by:
            item["contradicts"] = contradicted_by[rid]
        out.append(item)
    return IngestResult(run.run_id, run.product, n, run.build_tag, run.ci, tuple(out),
                        tuple(proposals), frozen.analysis, resumed=resumed, notes=notes)


__all__ += ["CAUSES", "read_run_bytes", "digest_of", "proposal_id"]
