"""Candidates, projected by code from one analysed run (SPEC §3.4, ``docs/learning.md``).

Pure functions, no I/O. For each run:

* a **fact** for each verified step (a check that held) — about the step's target anchor,
  in the step's scope plus the *aspect* its check looks at (``assert-enabled`` and
  ``assert-disabled`` both look at ``enabled``), so one subject has one claim: the state
  (for a state check) or the check kind and the normalised observed text. The first
  verified step on a subject in the run is the claim (later steps of a test see the
  element after the test changed it). A verification on an element that a failure of the
  same run — an app bug or an environmental failure — also names is *held* (the run saw
  the element in a state nobody should learn from);
* an **observed fact** for each failed check that says what the app showed instead
  (``Expected``/``Received``): what the element shows now, which closes the fact it
  contradicts — never confirmed by a failure alone;
* a **caution** for each failure classified ``flaky`` or ``environment`` — about the
  failing element, or for an environmental failure the host its error names, or for one
  correlated with another test's outage that test's subject — and for a strict-mode
  violation, naming the ambiguous locator and the runner's suggestions;
* a **procedure** for each fully passing test with steps — its steps in order, by their
  own titles; one per spec, whichever browser project ran it;
* an **unknown** for each failure classified ``app-bug`` or ``unknown`` — about the
  failing element; when a check failed, it names the fact that check contradicts.

Each candidate carries its wording from fixed templates (:mod:`memidex.learning.wording`,
``written_by: template``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from memidex.evidence import Run, Step, TestResult
from memidex.learning.analysis import error_text, failed_check, failing_step
from memidex.learning.wording import (
    STATES,
    claim_words,
    clean,
    display_name,
    error_class,
    first_line,
    normalise,
    test_name,
)
from memidex.records.ids import ANCHOR_RE
from memidex.records.model import Evidence
from memidex.records.vocab import Pairs

__all__ = ["ASPECTS", "Candidate", "Subject", "aspect_of", "display_name", "normalise",
           "project", "spec_id"]

ASPECTS: Mapping[str, str] = {
    "assert-enabled": "enabled", "assert-disabled": "enabled",
    "assert-visible": "visible", "assert-hidden": "visible",
    "assert-checked": "checked", "assert-unchecked": "checked",
}
"""Check kinds that look at the same aspect of an element (any other kind is its own
aspect, its name without ``assert-``)."""
_OPPOSITE = {"assert-enabled": "assert-disabled", "assert-disabled": "assert-enabled",
             "assert-visible": "assert-hidden", "assert-hidden": "assert-visible",
             "assert-checked": "assert-unchecked", "assert-unchecked": "assert-checked"}
_STATE_WORDS = {"enabled": "assert-enabled", "disabled": "assert-disabled",
                "visible": "assert-visible", "hidden": "assert-hidden",
                "checked": "assert-checked", "unchecked": "assert-unchecked"}
MAX_ANCHORS = 40
HELD_CAUSES = ("app-bug", "environment")
"""A failure of one of these causes holds back what the same run verified on its elements."""

_URL_HOST = re.compile(r"\bhttps?://([A-Za-z0-9.-]+)")
_AKA = re.compile(r"aka\s+(\S.{0,200}?)(?:\n|$)")


def aspect_of(check_kind: str) -> str:
    return ASPECTS.get(check_kind) or check_kind.removeprefix("assert-") or check_kind


Subject = tuple[str, str, Pairs]
"""(kind, main anchor, scope): what a record is about; its id is computed from it."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """What one run says about one subject, before the curator sees the store."""

    kind: str
    anchor: str
    scope: Pairs
    anchors: tuple[str, ...]  # further anchors (the main one excluded), sorted
    claim: str  # what must be equal for the run to confirm the record
    title: str
    body: str
    evidence: Evidence
    test_id: str
    cause: str | None = None  # cautions and unknowns: the failure's root cause
    contradicts: Subject | None = None  # unknowns: the fact a failed check contradicts
    self_contradiction: bool = False  # the same run also failed this claim's check
    held: str = ""  # why the run cannot teach it (a failure of the run on its element)
    from_failure: bool = False  # a failed check's observation: never confirms on its own
    runner_flaky: bool = False  # a caution from the runner's own retries (direct evidence)
    legacy_claim: str = ""  # the claim as earlier versions of memidex computed it
    element_gone: bool = False  # unknowns: the failed check did not find its element

    @property
    def subject(self) -> Subject:
        return (self.kind, self.anchor, self.scope)

    @property
    def claim_key(self) -> str:
        """A short, stable digest of the claim, kept in the record's evidence."""
        return _digest(self.claim)

    @property
    def claim_keys(self) -> tuple[str, ...]:
        """The claim's digest, and the digest earlier versions gave the same claim."""
        return (self.claim_key, _digest(self.legacy_claim)) if self.legacy_claim else \
            (self.claim_key,)

    @property
    def prompt_facts(self) -> dict[str, str]:
        """What a model is told about this candidate (all app text, untrusted)."""
        return {"kind": self.kind, "about": self.anchor, "claim": self.claim,
                "test": self.test_id, "title": self.title, "body": self.body}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def spec_id(test: TestResult) -> str:
    """The test's id without its browser project: one spec run in several projects is
    one spec (``checkout.spec.ts:pays@chromium`` → ``checkout.spec.ts:pays``)."""
    if test.project and "@" in test.test_id:
        return test.test_id.rsplit("@", 1)[0]  # the project as the id spells it
    return test.test_id


def _scope(step: Step, extra: Mapping[str, str] | None = None) -> Pairs:
    items = dict(step.scope)
    items.update(extra or {})
    return tuple(sorted(items.items()))


def _further(anchor: str, *groups: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    seen = {a for g in groups for a in g if a != anchor and ANCHOR_RE.fullmatch(a)}
    return tuple(sorted(seen)[:MAX_ANCHORS])


def _page(step: Step) -> str | None:
    return next((a for a in step.anchors if a.startswith("page:")), None)


# --- facts -------------------------------------------------------------------------------

def _fact(run: Run, test: TestResult, step: Step, kind: str, observed: str, *,
          from_failure: bool = False) -> Candidate:
    assert step.target is not None
    page = _page(step)
    where = f" on {page.removeprefix('page:')}" if page else ""
    name = display_name(step.target)
    shown = clean(observed)
    title = f"{name[:1].upper()}{name[1:]} {claim_words(kind, shown)}{where}"
    if from_failure:
        expected = step.check.expected if step.check is not None else None
        body = (f"{step.target}{where} showed “{shown}” where {test_name(test)} expected "
                f"{f'“{clean(expected)}”' if expected else '`' + kind + '`'}: what the app "
                "shows now — a change or a bug, until a passing check says which.")
    else:
        body = (f"`{kind}` held for {step.target}{where}"
                + (f"; the app showed “{shown}”." if shown else "."))
    claim_text = normalise(observed)
    state = kind in STATES
    return Candidate(
        kind="fact", anchor=step.target, scope=_scope(step, {"aspect": aspect_of(kind)}),
        anchors=_further(step.target, step.anchors, [f"test:{spec_id(test)}"]),
        claim=kind if state else f"{kind}\x1f{claim_text}", title=_title(title),
        body=body,
        evidence=Evidence(run=run.run_id, test=test.test_id, step=step.index,
                          observed=claim_text or None, check=kind),
        test_id=test.test_id, from_failure=from_failure,
        legacy_claim=f"{kind}\x1f{claim_text}" if state else "")


def _observed_kind(step: Step) -> str | None:
    """The check kind that holds for what a failed check observed: the opposite state
    (a failed ``assert-enabled`` that saw ``disabled``), or the same kind with the value
    seen; None when the check found nothing to say what holds."""
    check = step.check
    if check is None or check.not_found or step.observed is None:
        return None
    seen = step.observed.strip()
    if check.kind in _OPPOSITE:
        return _STATE_WORDS.get(seen.lower()) or _OPPOSITE[check.kind]
    if not seen or check.kind.startswith("assert-not-"):
        return None
    return check.kind


def _title(text: str) -> str:
    from memidex.learning.wording import MAX_TITLE, cut

    return cut(text, MAX_TITLE)


# --- failures ----------------------------------------------------------------------------

def _failure_subject(test: TestResult, cause: str) -> tuple[str, Step | None]:
    at = failing_step(test)
    step = next((s for s in test.steps if s.index == at), None)
    if cause == "environment":
        host = _URL_HOST.search(error_text(test))
        if host:
            anchor = f"host:{host.group(1).lower().strip('.')}"
            if ANCHOR_RE.fullmatch(anchor):
                return anchor, step
    if step is not None and step.target:
        return step.target, step
    return f"test:{spec_id(test)}", step


def _caution(run: Run, test: TestResult, cause: str, why: str = "") -> Candidate:
    anchor, step = _failure_subject(test, cause)
    text = error_text(test)
    what = error_class(text)
    line = first_line(text)
    where = f" in {test_name(test)}" + (f" step {step.index}" if step is not None else "")
    if cause == "flaky":
        title = f"{anchor} is flaky ({what}): retry before reporting a failure"
        body = (f"{anchor} failed{where} where it passes on the same build: treat "
                f"{'an' if what[:1] in 'aeiouAEIOU' else 'a'} {what} here as flaky, not as "
                "an app bug.")
    else:
        title = f"{anchor}: environmental failures ({what}) — not an app bug"
        body = (f"{anchor} failed{where} for a reason outside the app ({what}): check the "
                "environment before reporting a failure.")
    if why:
        body += f" ({why}.)"
    if line:
        body += f"\n\nLast error: {line}"
    further = [f"test:{spec_id(test)}"] + (list(step.anchors) if step is not None else [])
    if step is not None and step.target and step.target != anchor:
        further.append(step.target)
    return Candidate(
        kind="caution", anchor=anchor, scope=_scope(step) if step is not None else (),
        anchors=_further(anchor, further, test.anchors), claim=f"{cause}\x1f{what}",
        title=_title(title), body=body,
        evidence=Evidence(run=run.run_id, test=test.test_id,
                          step=step.index if step is not None else None,
                          observed=line or None),
        test_id=test.test_id, cause=cause, runner_flaky=cause == "flaky" and test.flaky)


def _outage_caution(run: Run, test: TestResult, causes: Mapping[str, str],
                    why: Mapping[str, str]) -> Candidate | None:
    """The caution for a failure correlated with another test's environmental failure
    (analysis rule 4): about what the outage hits — the subject of the failure whose own
    error (or hint) named the environment — with this test among its anchors, never about
    this test's page or element, which the outage only reached through it (None: no such
    failure in the run)."""
    direct = [t for t in run.tests
              if causes.get(t.test_id) == "environment" and t.test_id not in why]
    source = next((t for t in direct if t.test_id in why[test.test_id]),
                  direct[0] if direct else None)
    if source is None:
        return None
    c = _caution(run, source, "environment")
    return replace(c, anchors=_further(c.anchor, c.anchors, [f"test:{spec_id(test)}"]))


def _ambiguous(run: Run, test: TestResult) -> Candidate | None:
    """A strict-mode violation: a caution naming the locator that matched several
    elements and the runner's ``aka`` suggestions (anchors of the failing step)."""
    text = error_text(test)
    if "strict mode violation" not in text.lower():
        return None
    anchor, step = _failure_subject(test, "test-bug")
    if not anchor.startswith("el:"):
        return None
    suggested = sorted({a for a in (step.anchors if step is not None else ())
                        if a.startswith("el:") and a != anchor})
    akas = [clean(m.group(1)) for m in _AKA.finditer(text)][:5]
    title = f"{anchor} matches several elements: use a more precise locator"
    body = (f"{test_name(test)} failed because its locator for {anchor} matched more than "
            "one element (a strict-mode violation).")
    if akas:
        body += " The runner suggested: " + "; ".join(f"`{a}`" for a in akas) + "."
    return Candidate(
        kind="caution", anchor=anchor, scope=(),
        anchors=_further(anchor, suggested, [f"test:{spec_id(test)}"]),
        claim="ambiguous\x1f" + "\x1f".join(suggested), title=_title(title), body=body,
        evidence=Evidence(run=run.run_id, test=test.test_id,
                          step=step.index if step is not None else None),
        test_id=test.test_id, cause="test-bug")


def _unknown(run: Run, test: TestResult, cause: str) -> Candidate:
    anchor, step = _failure_subject(test, cause)
    text = error_text(test)
    line = first_line(text)
    check = step.check if step is not None else None
    contradicts: Subject | None = None
    scope: Pairs = _scope(step) if step is not None else ()
    name = test_name(test)
    if check is not None and not check.passed and step is not None and step.target:
        scope = _scope(step, {"aspect": aspect_of(check.kind)})
        contradicts = ("fact", step.target, scope)
        title = f"Unresolved: `{check.kind}` no longer holds for {step.target}"
        seen = ("the element was not found" if check.not_found else
                f"the app showed “{clean(step.observed)}”" if step.observed else "")
        body = (f"`{check.kind}` held for {step.target} on earlier builds or was expected "
                f"to, and failed in {name} step {step.index}"
                + (f" on build {run.build_tag}" if run.build_tag else "")
                + (f": {seen}" if seen else "")
                + ". An app change and an app bug look alike — confirm which, then "
                  "supersede or keep the fact.")
        claim = f"{cause}\x1f{check.kind}"
    else:
        title = f"Unresolved failure of {name} at {anchor}"
        body = f"{name} ({test.test_id}) failed and no rule could tell why ({cause})."
        claim = f"{cause}\x1f{normalise(line)}"
    if line:
        body += f"\n\nError: {line}"
    further = [f"test:{spec_id(test)}"] + (list(step.anchors) if step is not None else [])
    return Candidate(
        kind="unknown", anchor=anchor, scope=scope,
        anchors=_further(anchor, further, test.anchors), claim=claim, title=_title(title),
        body=body,
        evidence=Evidence(run=run.run_id, test=test.test_id,
                          step=step.index if step is not None else None,
                          observed=normalise(step.observed) if step is not None and
                          step.observed else (normalise(line) or None),
                          check=check.kind if check is not None else None),
        test_id=test.test_id, cause=cause, contradicts=contradicts,
        element_gone=bool(check is not None and check.not_found))


# --- procedures --------------------------------------------------------------------------

def _procedure(run: Run, test: TestResult) -> Candidate:
    steps = sorted(test.steps, key=lambda s: s.index)
    lines = []
    for n, s in enumerate(steps, 1):
        if s.title:
            what = clean(s.title)
            if s.target and s.target not in what:
                what += f" ({s.target})"
        else:
            what = f"{s.action} {s.target}" if s.target else s.action
        if s.check is not None:
            what += f" — check `{s.check.kind}`"
        lines.append(f"{n}. {what}")
    spec = spec_id(test)
    anchor = f"test:{spec}"
    claim = "\n".join(f"{s.action}\x1f{s.target or ''}\x1f"
                      f"{s.check.kind if s.check else ''}\x1f{normalise(s.title)}"
                      for s in steps)
    targets = [s.target for s in steps if s.target]
    return Candidate(
        kind="procedure", anchor=anchor, scope=(),
        anchors=_further(anchor, targets, [a for s in steps for a in s.anchors],
                         test.anchors),
        claim=claim, title=_title(f"How {test_name(test)} passes ({len(steps)} steps)"),
        body="\n".join(lines),
        evidence=Evidence(run=run.run_id, test=spec), test_id=test.test_id)


# --- the projection ------------------------------------------------------------------------

def project(run: Run, causes: Mapping[str, str],
            why: Mapping[str, str] | None = None) -> list[Candidate]:
    """Every candidate of ``run`` (``causes``: test id → root cause of failing tests;
    ``why``: the reason of a correlated cause), one per subject, in run order."""
    why = why or {}
    out: dict[Subject, Candidate] = {}
    # Checks that failed for a reason the app may have caused (not flaky, not the
    # environment): a claim the same run also verifies contradicts itself.
    failed_checks: set[Subject] = set()
    troubled: dict[str, str] = {}  # anchor -> the cause of a failure on it
    reasons: dict[str, str] = {}  # anchor -> the failure that holds its facts back
    for test in run.tests:
        cause = causes.get(test.test_id)
        if cause in ("app-bug", "unknown"):
            for step in test.steps:
                if step.check is not None and not step.check.passed and step.target:
                    failed_checks.add(("fact", step.target,
                                       _scope(step, {"aspect": aspect_of(step.check.kind)})))
        if cause in HELD_CAUSES:
            bad = failed_check(test) or next(
                (s for s in test.steps if s.index == failing_step(test)), None)
            for a in ([bad.target] if bad is not None and bad.target else []) + \
                    list(bad.anchors if bad is not None else ()):
                if a.startswith(("el:", "api:")):
                    troubled.setdefault(a, cause or "")
                    reasons.setdefault(a, f"{test_name(test)} failed on it in the same run "
                                          f"({cause})")
    for test in run.tests:
        cause = causes.get(test.test_id)
        for step in sorted(test.steps, key=lambda s: s.index):
            if step.check is not None and step.check.passed and step.target:
                c = _fact(run, test, step, step.check.kind, step.observed or "")
                if c.subject not in out:
                    if troubled.get(step.target) == "environment":
                        # an outage is not the app's state: nothing is learned from it
                        c = replace(c, held=reasons[step.target])
                    elif step.target in troubled:
                        # the app is in the state a failure saw: what it shows now,
                        # closing a belief that says otherwise, never confirming one
                        c = replace(c, from_failure=True, held=reasons[step.target])
                    out[c.subject] = c
        if cause == "environment" and test.test_id in why and \
                (shared := _outage_caution(run, test, causes, why)) is not None:
            out[shared.subject] = shared if shared.subject not in out else replace(
                out[shared.subject], anchors=_further(
                    shared.anchor, out[shared.subject].anchors, shared.anchors))
        elif cause in ("flaky", "environment"):
            c = _caution(run, test, cause, why.get(test.test_id, ""))
            out.setdefault(c.subject, c)
        elif cause == "test-bug":
            amb = _ambiguous(run, test)
            if amb is not None:
                out.setdefault(amb.subject, amb)
        elif cause in ("app-bug", "unknown"):
            c = _unknown(run, test, cause)
            out.setdefault(c.subject, c)
            bad = failed_check(test)
            kind = _observed_kind(bad) if bad is not None else None
            if bad is not None and kind is not None and bad.target:
                seen = _fact(run, test, bad, kind, bad.observed or "", from_failure=True)
                out.setdefault(seen.subject, seen)
        elif test.verdict == "pass" and test.steps and cause is None:
            c = _procedure(run, test)
            out.setdefault(c.subject, c)
    result = []
    for subject, c in out.items():
        if c.kind == "fact" and not c.from_failure and subject in failed_checks:
            # verified and failed in the same run: the element is in the state the
            # failure saw — what the app shows now, never a confirmed belief
            c = replace(c, from_failure=True, held="", self_contradiction=True)
        result.append(c)
    return result
