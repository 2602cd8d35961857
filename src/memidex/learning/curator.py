"""The curator: each candidate becomes exactly one change (SPEC §3.5, ``docs/learning.md``).

Pure functions over (candidate, the record it names or None): no I/O. The ops:

* ``add`` — no record about the subject yet: a ``candidate`` (or active, when the
  promotion gate says so), its window from this run's ordinal;
* ``confirm`` — the record makes the same claim: confirmations + 1 (a CI run counts
  less, ``memidex.trust.confirm``), ``last_confirmed`` = the ordinal, the evidence
  appended and capped, the anchors merged; the promotion gate may make it active;
* ``supersede`` — a verified step makes a different claim about the same subject: the
  current version moves into ``history`` with its window closed at this ordinal and
  the new one is served from it (SPEC §2); it starts again as a candidate. A failed
  check that says what the app shows supersedes too — the old claim stops being served
  at once — but its claim starts with no confirmation: a failure never promotes a fact
  (a bug is never learned as one); a later passing check confirms it, or brings the
  old claim back;
* ``deprecate`` — decided by the ingest from the run store (its anchor was missing from
  passing runs of its test): ``memidex.records.transitions.deprecate``;
* ``unknown`` — an unknown record raised (or seen again), and the fact its failed check
  contradicts gets one more contradiction; when the element was not found at all, the
  fact is retired (deprecated) after ``retire_after_failures`` such failures;
* ``resolve`` — an unknown whose test passed again ``resolve_after_runs`` times on its
  anchor: deprecated, no longer served (decided by the plan from the tests' states);
* ``noop`` — nothing to do (a quarantined, superseded or deprecated record is left as
  a person left it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from memidex.config.tables import LearningSettings
from memidex.learning.candidates import Candidate
from memidex.plain import Frozen, set_field
from memidex.records.loadback import cached_record_id
from memidex.records.model import Evidence, HistoryEntry, Record, Trust, Valid
from memidex.trust import confirm as confirm_trust
from memidex.trust import contradict, promotion

__all__ = ["Context", "Decision", "claim_of", "contradicted", "decide", "subject_id"]


OPS: tuple[str, ...] = ("add", "confirm", "supersede", "deprecate", "unknown", "resolve",
                        "noop")


class Context(Frozen):
    """The run a decision is made for."""

    run_id: str
    ordinal: int
    ci: bool
    product: str
    settings: LearningSettings
    newer_build: Callable[[Record], str | None] | None
    """The build, newer than this run's, that last confirmed a record (None: none) —
    build order, not ingest order: a run of an older build never rewrites it."""

    __slots__ = ("run_id", "ordinal", "ci", "product", "settings", "newer_build")

    def __init__(self, run_id: str, ordinal: int, ci: bool, product: str,
                 settings: LearningSettings,
                 newer_build: Callable[[Record], str | None] | None = None) -> None:
        set_field(self, "run_id", run_id)
        set_field(self, "ordinal", ordinal)
        set_field(self, "ci", ci)
        set_field(self, "product", product)
        set_field(self, "settings", settings)
        set_field(self, "newer_build", newer_build)

    def older_than(self, record: Record) -> str | None:
        return self.newer_build(record) if self.newer_build is not None else None


@dataclass(frozen=True, slots=True)
class Decision:
    """One change: the op, the record id and what to write (None: nothing)."""

    op: str
    id: str
    record: Record | None
    before: Record | None = None
    note: str = ""
    expected: str | None = None  # the content hash the record was read with (None: new)


def subject_id(c: Candidate, product: str) -> str:
    return cached_record_id(c.kind, c.anchor, product, c.scope)


def claim_of(r: Record) -> str | None:
    """The claim key the record's current version was learned with (its newest
    evidence item's ``claim``), or None (a person wrote it without one)."""
    for e in reversed(r.evidence):
        for key, value in e.extra:
            if key == "claim" and isinstance(value, str):
                return value
    return None


def _evidence(c: Candidate) -> Evidence:
    e = c.evidence
    return Evidence(e.run, e.test, e.step, e.observed, e.check, e.artifact,
                    tuple(sorted({*e.extra, ("claim", c.claim_key)})))


def _append(r: Record, ev: Evidence, cap: int) -> tuple[tuple[Evidence, ...], int | None]:
    """The evidence with ``ev`` appended (once) and capped to the last ``cap`` items, and
    the total count to keep (None when nothing was dropped)."""
    total = r.evidence_total if r.evidence_total is not None else len(r.evidence)
    if any(e.run == ev.run and e.test == ev.test and e.step == ev.step for e in r.evidence):
        items = r.evidence
    else:
        items = (*r.evidence, ev)
        total += 1
    kept = items[-cap:]
    return kept, (total if total > len(kept) else None)


def _gate(status: str, trust: Trust, ctx: Context) -> str:
    if status != "candidate":
        return status
    verdict = promotion(status, trust, ci=ctx.ci, policy=ctx.settings.promotion)
    return "active" if verdict.promote else status


def _source(ctx: Context) -> str:
    return "ci" if ctx.ci else "local"


def decide(c: Candidate, existing: Record | None, ctx: Context) -> Decision:
    """The change ``c`` makes to ``existing`` (the record with ``c``'s id, or None)."""
    rid = subject_id(c, ctx.product)
    ev = _evidence(c)
    n = ctx.ordinal
    if c.from_failure:
        d = _observed(c, existing, ctx, rid, ev)
        return replace(d, note=f"held back: {c.held}") if c.held and d.op == "noop" else d
    if c.held:
        return Decision("noop", rid, None, existing, note=f"held back: {c.held}")
    if existing is None:
        trust = Trust(source=_source(ctx), confirmations=1, contradictions=0,
                      last_confirmed=n)
        status = "candidate"
        if c.runner_flaky and not ctx.ci:
            status = "active"  # the runner saw it fail and pass in this very run
        record = Record(id=rid, kind=c.kind, status=_gate(status, trust, ctx),
                        product=ctx.product, anchor=c.anchor, title=c.title,
                        scope=c.scope, anchors=c.anchors, trust=trust, valid=Valid(n),
                        evidence=(ev,), body=c.body, written_by="template")
        return Decision("unknown" if c.kind == "unknown" else "add", rid, record)
    if existing.status not in ("candidate", "active"):
        return Decision("noop", rid, None, existing,
                        note=f"{existing.status}: left as a person left it")
    if n < existing.valid.from_:
        return Decision("noop", rid, None, existing,
                        note=f"run ordinal {n} is before the record's window")
    if existing.valid.until is not None and n >= existing.valid.until:
        return Decision("noop", rid, None, existing, note="the record's window is closed")
    old_claim = claim_of(existing)
    anchors = tuple(sorted((set(existing.anchors) | set(c.anchors)) - {existing.anchor}))
    if c.kind == "caution" and old_claim is not None:
        # a caution says the element fails for reasons outside the app: another cause
        # (flaky this run, an outage the next) confirms it rather than rewriting it
        old_claim = c.claim_key
    # A record a person wrote carries no claim to compare: a run never confirms it on its
    # own; the change it would make is proposed instead (the ingest's checks).
    if old_claim in c.claim_keys or (old_claim is None and existing.trust.source != "human"):
        if any(e.run == ev.run for e in existing.evidence):
            # the record holds this run's evidence already: it was learned from this run
            # before (a clone without the run store, where the same run is not recognised)
            return Decision("noop", rid, None, existing,
                            note=f"already confirmed by run {ev.run}")
        trust = confirm_trust(existing.trust, ordinal=n, ci=ctx.ci)
        evidence, total = _append(existing, ev, ctx.settings.evidence_max)
        status = existing.status
        if c.runner_flaky and status == "candidate" and not ctx.ci:
            status = "active"
        record = replace(existing, trust=trust, status=_gate(status, trust, ctx),
                         evidence=evidence, evidence_total=total, anchors=anchors)
        if existing.trust.confirmations == 0 and existing.written_by == "template" and \
                c.kind == "fact":
            # a failure's observation, now verified by a passing check: its words too
            record = replace(record, title=c.title, body=c.body)
        return Decision("unknown" if c.kind == "unknown" else "confirm", rid, record,
                        existing)
    if n <= existing.valid.from_:
        return Decision("noop", rid, None, existing,
                        note="a new version needs a later ordinal than the current one")
    held = _newer_build(existing, ctx, rid)
    if held is not None:
        return held
    trust = Trust(source=_source(ctx), confirmations=1, contradictions=0, last_confirmed=n)
    record = _new_version(existing, c, ev, n, trust, _gate("candidate", trust, ctx), anchors)
    return Decision("supersede", rid, record, existing)


def _newer_build(existing: Record, ctx: Context, rid: str) -> Decision | None:
    """A no-op when a newer build than this run's confirmed ``existing``: an older build
    does not rewrite it."""
    newer = ctx.older_than(existing)
    if newer is None:
        return None
    return Decision("noop", rid, None, existing,
                    note=f"build {newer} confirmed it after this run's build: an older "
                    "build does not rewrite it")


def _new_version(existing: Record, c: Candidate, ev: Evidence, n: int, trust: Trust,
                 status: str, anchors: tuple[str, ...]) -> Record:
    """``existing`` superseded in place at ordinal ``n`` by ``c``'s claim: the current
    version closed into the history, the new one with ``trust`` and only ``ev``."""
    old = HistoryEntry(valid=Valid(existing.valid.from_, n), title=existing.title,
                       body=existing.body, trust=existing.trust, anchors=existing.anchors,
                       status=existing.status)
    return replace(existing, status=status, title=c.title, body=c.body, anchors=anchors,
                   trust=trust, valid=Valid(n, None), evidence=(ev,), evidence_total=None,
                   history=(*existing.history, old), written_by="template")


def _observed(c: Candidate, existing: Record | None, ctx: Context, rid: str,
              ev: Evidence) -> Decision:
    """What a failed check says the app shows: the fact that claimed otherwise is
    superseded by a version with no confirmation (its window closes here, the new claim
    is a candidate a failure never promotes); nothing new is learned from a failure."""
    if existing is None:
        return Decision("noop", rid, None, None, note="a failed check teaches no new fact")
    if existing.status not in ("candidate", "active") or existing.trust.source == "human":
        return Decision("noop", rid, None, existing,
                        note=f"{existing.status}: left as a person left it")
    n = ctx.ordinal
    if claim_of(existing) in c.claim_keys or n <= existing.valid.from_ or (
            existing.valid.until is not None and n >= existing.valid.until):
        return Decision("noop", rid, None, existing,
                        note="the failure shows what the record already says")
    held = _newer_build(existing, ctx, rid)
    if held is not None:
        return held
    trust = Trust(source=_source(ctx), confirmations=0, contradictions=0, last_confirmed=n)
    anchors = tuple(sorted((set(existing.anchors) | set(c.anchors)) - {existing.anchor}))
    record = _new_version(existing, c, ev, n, trust, "candidate", anchors)
    return Decision("supersede", rid, record, existing)


def contradicted(fact: Record, c: Candidate, ctx: Context) -> tuple[Record, str] | None:
    """``fact`` after the unknown ``c`` contradicted its current claim (the failed check
    looks at the aspect the fact was learned from), and the op: ``contradict`` (one more
    contradiction) or ``deprecate`` — the element was not found, ``retire_after_failures``
    times; None when ``c`` says nothing about it."""
    from memidex.learning.candidates import aspect_of

    if fact.status not in ("candidate", "active") or c.evidence.check is None:
        return None
    current = next((e.check for e in reversed(fact.evidence) if e.check), None)
    if current is None or aspect_of(current) != aspect_of(c.evidence.check):
        return None
    hit = replace(fact, trust=contradict(fact.trust))
    if ctx.older_than(fact) is not None:
        return hit, "contradict"  # an older build's failure never retires it
    if c.element_gone and hit.trust.contradictions >= ctx.settings.retire_after_failures \
            and ctx.ordinal > fact.valid.from_:
        from memidex.records.transitions import deprecate

        return deprecate(hit, ctx.ordinal), "deprecate"
    return hit, "contradict"
