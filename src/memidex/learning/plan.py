"""From one analysed run to a plan: the record changes, proposals, notes and test states
an ingest will write (SPEC §3.3–3.6, ``docs/learning.md``).

Pure over what it is handed: the run, the tests' states, a :class:`RecordSource` that
reads the records the candidates name, and an optional :data:`Asker` for the model (the
caller journals its answers). It never takes the lease, writes a file or touches the
index — :mod:`memidex.app.ingest` runs it under the lease and writes the plan through the
one write route. In order: :func:`analyse` gives each failing test a root cause (a
model only for what the rules leave ``unknown``); :func:`plan_run` projects candidates,
lets the curator decide one change per candidate, finds the facts a contradiction hits
and the deprecations due, and lets :mod:`memidex.learning.checks` turn some changes into
proposals.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from memidex.config.tables import LearningSettings, ModelSettings
from memidex.evidence import Run
from memidex.learning import checks
from memidex.learning.analysis import classify_run, error_text
from memidex.learning.candidates import Candidate, project
from memidex.learning.curator import Context, Decision, claim_of, contradicted, decide, subject_id
from memidex.learning.fold import (
    TestState,
    copy_states,
    count_missing,
    count_resolved,
    fold_run,
)
from memidex.plain import Frozen, Plain, set_field
from memidex.records.ids import record_id
from memidex.records.model import Record
from memidex.records.transitions import deprecate

__all__ = ["Asker", "IngestPlan", "Proposal", "RecordSource", "Stored", "analyse",
           "plan_run", "proposal_id"]


Asker = Callable[[str, str], "str | None"]
"""``ask(step, prompt)``: the model's answer for a named step (the caller saves it in the
journal before it is used, and gives a saved one back after a crash), None when the model
could not answer."""
Progress = Callable[[int, int], None]
_NO_MODEL = ModelSettings()


class Stored(Frozen):
    """A record file as the store holds it: the record, its content hash, and why it
    cannot be read (all None: no such file)."""

    record: Record | None
    sha: str | None
    problem: str | None

    __slots__ = ("record", "sha", "problem")

    def __init__(self, record: Record | None = None, sha: str | None = None,
                 problem: str | None = None) -> None:
        set_field(self, "record", record)
        set_field(self, "sha", sha)
        set_field(self, "problem", problem)


class RecordSource(Protocol):
    """Where the planner reads the records its candidates name."""

    def read(self, kind: str, rid: str) -> Stored: ...

    def exists(self, rid: str) -> bool: ...

    def relpath(self, kind: str, rid: str) -> str: ...


class Proposal(Frozen):
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

    __slots__ = ("id", "run_id", "ordinal", "op", "record_id", "path", "reason", "expected",
                 "text")

    def __init__(self, id: str, run_id: str, ordinal: int, op: str, record_id: str,
                 path: str, reason: str, expected: str | None, text: str) -> None:
        set_field(self, "id", id)
        set_field(self, "run_id", run_id)
        set_field(self, "ordinal", ordinal)
        set_field(self, "op", op)
        set_field(self, "record_id", record_id)
        set_field(self, "path", path)
        set_field(self, "reason", reason)
        set_field(self, "expected", expected)
        set_field(self, "text", text)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "run_id": self.run_id, "ordinal": self.ordinal,
                "op": self.op, "record_id": self.record_id, "path": self.path,
                "reason": self.reason, "expected": self.expected, "text": self.text}

    def summary(self) -> dict[str, Any]:
        """What ``knowledge proposals --json`` lists (the record's text left out)."""
        return {k: v for k, v in self.to_json().items() if k not in ("text", "expected")}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Proposal:
        expected = data.get("expected")
        if expected is not None and not isinstance(expected, str):
            raise TypeError("`expected` is not a content hash")
        return cls(id=str(data["id"]), run_id=str(data["run_id"]),
                   ordinal=int(data["ordinal"]), op=str(data["op"]),
                   record_id=str(data["record_id"]), path=str(data["path"]),
                   reason=str(data["reason"]), expected=expected, text=str(data["text"]))


def proposal_id(rid: str, record: Record) -> str:
    """A proposal's id: the record and what it would become (its claim), so a change that
    later runs propose again is the same proposal, not a new one each run."""
    key = f"{rid}\x1f{record.status}\x1f{claim_of(record)}\x1f{record.valid.until}"
    return "p-" + hashlib.sha256(key.encode()).hexdigest()[:16]


class IngestPlan(Plain):
    """What an ingest writes: the changes, the proposals, notes, and the tests' states
    with the run folded in; ``texts``: beside each decision, its record's canonical text
    (:func:`memidex.records.codec.dump_record`, checked to load back; None: no record),
    so the writer need not encode it again."""
    __slots__ = ("decisions", "proposals", "notes", "tests", "texts")

    decisions: list[Decision]
    proposals: list[Proposal]
    notes: list[str]
    tests: dict[str, TestState]
    texts: list[str | None]

    def __init__(self, decisions: list[Decision] | None = None,
                 proposals: list[Proposal] | None = None, notes: list[str] | None = None,
                 tests: dict[str, TestState] | None = None,
                 texts: list[str | None] | None = None) -> None:
        self.decisions = decisions if decisions is not None else list()
        self.proposals = proposals if proposals is not None else list()
        self.notes = notes if notes is not None else list()
        self.tests = tests if tests is not None else dict()
        self.texts = texts if texts is not None else list()


# --- analysis --------------------------------------------------------------------------

def analyse(run: Run, tests: Mapping[str, TestState], *, model: ModelSettings,
            ask: Asker | None = None, notes: list[str] | None = None,
            why: dict[str, str] | None = None) -> dict[str, str]:
    """Each failing test's root cause: the rules (:func:`memidex.learning.analysis
    .classify_run`, with each test's history and the run's own environmental failures),
    then the model for what they leave ``unknown`` (when one is configured and ``ask`` is
    given). ``why``: filled with the reason of each correlated cause."""
    history = {t: s.passed_builds for t, s in tests.items()}
    endpoints = {t: s.anchors for t, s in tests.items()}
    causes: dict[str, str] = {}
    for test_id, cause in classify_run(run, history, endpoints).items():
        causes[test_id] = cause.cause
        if cause.why and why is not None:
            why[test_id] = cause.why
    if not model.enabled or ask is None:
        return causes
    from memidex.learning.adapter import ModelAnswerError, classify_prompt, parse_cause

    for test in run.tests:
        if causes.get(test.test_id) != "unknown":
            continue
        answer = ask(f"model:{run.run_id}:classify:{test.test_id}",
                     classify_prompt(test.test_id, error_text(test)))
        if answer is None:
            continue
        try:
            causes[test.test_id] = parse_cause(answer)
        except ModelAnswerError as exc:
            if notes is not None:
                notes.append(f"model: {exc} (test {test.test_id})")
    return causes


# --- the plan --------------------------------------------------------------------------

def plan_run(run: Run, ordinal: int, analysis: Mapping[str, str],
             tests: Mapping[str, TestState], source: RecordSource,
             settings: LearningSettings, *, mask: Callable[[Record], Record],
             mask_text: Callable[[str], str] = lambda t: t,
             model: ModelSettings = _NO_MODEL, ask: Asker | None = None,
             progress: Progress | None = None,
             why: Mapping[str, str] | None = None,
             newer_build: Callable[[Record], str | None] | None = None,
             duplicate: Callable[[Record], str | None] | None = None) -> IngestPlan:
    """The plan for run ``run`` at ``ordinal`` (its ``analysis`` frozen with it).

    ``mask`` masks every string a record stores (normalising app text can rebuild a
    secret the run's masking split); ``mask_text`` masks a model's wording.
    ``duplicate``: for a new record, why it looks like an existing record about another
    anchor (the vectors' near-duplicate check), or None — then it is a proposal."""
    n = ordinal
    ctx = Context(run.run_id, n, run.ci, run.product, settings, newer_build)
    plan = IngestPlan(tests=copy_states(tests))
    candidates = project(run, analysis, why)
    total = len(candidates)
    touched: dict[str, Decision] = {}
    held: dict[str, str] = {}  # record id -> why it is a proposal
    for i, c in enumerate(candidates):
        rid = subject_id(c, run.product)
        stored = source.read(c.kind, rid)
        if stored.problem is not None:
            plan.notes.append(stored.problem)
            continue
        existing = stored.record
        d = decide(c, existing, ctx)
        if d.note and (c.held or d.note.startswith("build ")):
            plan.notes.append(f"{rid}: {d.note}")
        record = d.record
        if record is not None:
            record = mask(record)
            if model.enabled and ask is not None and (
                    d.op in ("add", "supersede", "unknown") and existing is None
                    or d.op == "supersede"
                    or existing is not None and existing.written_by == "template"):
                record = _reword(run.run_id, c, record, ask, mask_text, plan.notes)
        # one new decision (not a copy per change): the masked record, the hash read
        d = Decision(d.op, d.id, record, d.before, d.note, stored.sha)
        touched[rid] = d
        reason = checks.self_contradiction(c, d) or checks.rewrite(c, d, existing, settings)
        if reason is None and duplicate is not None and existing is None \
                and d.op == "add" and d.record is not None:
            reason = duplicate(d.record)
        if reason is not None:
            held[rid] = reason
        if c.contradicts is not None and d.record is not None:
            _contradict(c, ctx, touched, d, source)
        if progress is not None:
            progress(i + 1, total)
    _deprecations(run, n, plan, touched, source, settings, newer_build)
    _resolutions(run, n, plan, touched, source, settings)
    for rid, reason in checks.too_many_rewrites(touched, settings).items():
        held.setdefault(rid, reason)
    for rid, reason in checks.missing_citations(touched, source.exists).items():
        held.setdefault(rid, reason)
    texts: dict[str, str] = {}
    for rid, d in list(touched.items()):
        if d.record is None:
            continue
        text, problem = checks.encoded(d.record)
        if problem is not None:  # never write (or propose) a record that cannot load
            plan.notes.append(f"{rid}: not written: {problem}")
            touched[rid] = replace(d, op="noop", record=None)
        else:
            texts[rid] = text
    for rid, d in touched.items():
        if d.record is not None and rid in held:
            plan.proposals.append(Proposal(
                id=proposal_id(rid, d.record), run_id=run.run_id, ordinal=n, op=d.op,
                record_id=rid, path=source.relpath(d.record.kind, rid), reason=held[rid],
                expected=d.expected, text=texts[rid]))
        else:
            plan.decisions.append(d)
            plan.texts.append(texts.get(rid))
    fold_run(plan.tests, run, n, candidates, analysis)
    return plan


def _reword(run_id: str, c: Candidate, record: Record, ask: Asker,
            mask_text: Callable[[str], str], notes: list[str]) -> Record:
    from memidex.learning.adapter import ModelAnswerError, parse_wording, wording_prompt

    answer = ask(f"model:{run_id}:word:{record.id}", wording_prompt(c.prompt_facts))
    if answer is None:
        return record
    try:
        wording = parse_wording(answer)
    except ModelAnswerError as exc:
        notes.append(f"model: {exc} ({record.id})")
        return record
    return replace(record, title=mask_text(wording.title), body=mask_text(wording.body),
                   written_by="model")


def _contradict(c: Candidate, ctx: Context, touched: dict[str, Decision], d: Decision,
                source: RecordSource) -> None:
    """The fact a failed check contradicts gets one more contradiction (or is retired,
    its element gone), and the unknown names it in ``relations.contradicts`` — also when
    the failure's own observation already closed it."""
    assert c.contradicts is not None and d.record is not None
    kind, anchor, scope = c.contradicts
    fid = record_id(kind, anchor, ctx.product, dict(scope))
    prior = touched.get(fid)
    # the fact as this run leaves it so far, and as it is on disk (with its hash)
    fact, disk, sha = ((prior.record, prior.before, prior.expected) if prior is not None
                       else (None, None, None))
    if fact is None and prior is None:
        stored = source.read(kind, fid)
        disk, sha = stored.record, stored.sha
        fact = disk
    if fact is None:
        return
    rel = d.record.relations
    link = replace(d, record=replace(d.record, relations=replace(
        rel, contradicts=tuple(sorted({*rel.contradicts, fid})))))
    if prior is not None and prior.op == "supersede" and fact.trust.confirmations == 0:
        touched[d.id] = link  # the failure's own observation closed the fact: linked
        return
    hit = contradicted(fact, c, ctx)
    if hit is None:
        return
    record, how = hit
    # written, and listed with the unknown (or as the deprecation it is)
    op = prior.op if prior is not None else how
    touched[fid] = Decision(op, fid, record, disk, expected=sha)
    touched[d.id] = link


def _deprecations(run: Run, n: int, plan: IngestPlan, touched: dict[str, Decision],
                  source: RecordSource, settings: LearningSettings,
                  newer_build: Callable[[Record], str | None] | None) -> None:
    """Facts a passing test taught whose anchor its latest passing runs no longer reach:
    deprecated after ``deprecate_after_runs`` such runs (:func:`count_missing`)."""
    for rid in count_missing(plan.tests, run, settings.deprecate_after_runs, set(touched)):
        stored = source.read("fact", rid)
        record = stored.record
        if record is None or record.status not in ("candidate", "active") or \
                n <= record.valid.from_ or (newer_build and newer_build(record)):
            continue
        touched[rid] = Decision("deprecate", rid, deprecate(record, n), record,
                                expected=stored.sha)


def _resolutions(run: Run, n: int, plan: IngestPlan, touched: dict[str, Decision],
                 source: RecordSource, settings: LearningSettings) -> None:
    """Unknowns whose test passed again on their anchor ``resolve_after_runs`` runs in a
    row (:func:`count_resolved`): resolved — deprecated, no longer served."""
    for rid in count_resolved(plan.tests, run, settings.resolve_after_runs, set(touched)):
        stored = source.read("unknown", rid)
        record = stored.record
        if record is None or record.status not in ("candidate", "active") or \
                n <= record.valid.from_:
            continue
        touched[rid] = Decision("resolve", rid, deprecate(record, n), record,
                                expected=stored.sha)
