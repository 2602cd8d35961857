"""Candidates, projected by code from one analysed run (SPEC §3.4, ``docs/learning.md``).

Pure functions, no I/O. For each run:

* a **fact** for each verified step (a check that held) — about the step's target anchor,
  in the step's scope plus the *aspect* its check looks at (``assert-enabled`` and
  ``assert-disabled`` both look at ``enabled``), so one subject has one claim: the check
  kind and the normalised observed text. The first verified step on a subject in the run
  is the claim (later steps of a test see the element after the test changed it);
* a **caution** for each failure classified ``flaky`` or ``environment`` — about the
  failing element, or for an environmental failure the host its error names;
* a **procedure** for each fully passing test with steps — its steps in order;
* an **unknown** for each failure classified ``app-bug`` or ``unknown`` — about the
  failing element; when a check failed, it names the fact that check contradicts.

Each candidate carries its wording from fixed templates (``written_by: template``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from memidex.evidence import Run, Step, TestResult
from memidex.learning.analysis import error_text, failing_step
from memidex.records.ids import ANCHOR_RE
from memidex.records.model import Evidence
from memidex.records.vocab import Pairs

__all__ = ["ASPECTS", "Candidate", "Subject", "aspect_of", "display_name", "normalise",
           "project"]

ASPECTS: Mapping[str, str] = {
    "assert-enabled": "enabled", "assert-disabled": "enabled",
    "assert-visible": "visible", "assert-hidden": "visible",
    "assert-checked": "checked", "assert-unchecked": "checked",
}
"""Check kinds that look at the same aspect of an element (any other kind is its own
aspect, its name without ``assert-``)."""

MAX_TEXT = 300
"""Observed text and error lines kept in a title or body are cut to this many characters."""
MAX_ANCHORS = 40

_TIME = re.compile(r"\b\d+(?:[.,]\d+)*\s*(?:ms|milliseconds?|s|secs?|seconds?)\b")
_URL_HOST = re.compile(r"\bhttps?://([A-Za-z0-9.-]+)")
_SPACE = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
"""Control, zero-width and bidirectional-override characters: app text reaches a record
(and a reviewer's diff) without any of them."""


def normalise(text: str | None) -> str:
    """Observed text as a claim: control, zero-width and bidi characters made spaces,
    whitespace collapsed, durations (``620 ms``, ``5 s``) replaced by ``<time>`` so that a
    timing never makes a new claim; cut to MAX_TEXT."""
    if not text:
        return ""
    out = _TIME.sub("<time>", _SPACE.sub(" ", _CONTROL.sub(" ", text)).strip())
    return out if len(out) <= MAX_TEXT else out[: MAX_TEXT - 1] + "…"


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

    @property
    def subject(self) -> Subject:
        return (self.kind, self.anchor, self.scope)

    @property
    def claim_key(self) -> str:
        """A short, stable digest of the claim, kept in the record's evidence."""
        return hashlib.sha256(self.claim.encode("utf-8")).hexdigest()[:12]

    @property
    def prompt_facts(self) -> dict[str, str]:
        """What a model is told about this candidate (all app text, untrusted)."""
        return {"kind": self.kind, "about": self.anchor, "claim": self.claim,
                "test": self.test_id, "title": self.title, "body": self.body}


def _scope(step: Step, extra: Mapping[str, str] | None = None) -> Pairs:
    items = dict(step.scope)
    items.update(extra or {})
    return tuple(sorted(items.items()))


def _further(anchor: str, *groups: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    seen = {a for g in groups for a in g if a != anchor and ANCHOR_RE.fullmatch(a)}
    return tuple(sorted(seen)[:MAX_ANCHORS])


def _page(step: Step) -> str | None:
    return next((a for a in step.anchors if a.startswith("page:")), None)


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return normalise(line)


def _error_class(text: str) -> str:
    low = text.lower()
    for needle, word in (("net::err_name_not_resolved", "DNS"), ("enotfound", "DNS"),
                         ("getaddrinfo", "DNS"), ("ssl", "TLS"), ("tls", "TLS"),
                         ("certificate", "TLS"), ("refused", "connection"),
                         ("reset", "connection"), ("net::err_", "network"),
                         ("503", "5xx"), ("502", "5xx"), ("504", "5xx"),
                         ("timeout", "timeout"), ("timed out", "timeout")):
        if needle in low:
            return word
    return "error"


_STATES = {
    "assert-enabled": "is enabled", "assert-disabled": "is disabled",
    "assert-visible": "is visible", "assert-hidden": "is hidden",
    "assert-checked": "is checked", "assert-unchecked": "is not checked",
}
_SHOWS = {"assert-text": "shows", "assert-value": "holds", "assert-url": "leads to",
          "assert-toast": "shows the toast", "assert-title": "has the title"}


def display_name(anchor: str) -> str:
    """How a template names an anchor: ``el:button:place-order`` → ``the place order
    button``, ``page:/checkout`` → ``page /checkout``; any other anchor as it is."""
    kind, _, rest = anchor.partition(":")
    if kind == "el" and ":" in rest:
        role, _, name = rest.partition(":")
        return f"the {name.replace('-', ' ')} {role}"
    if kind == "page":
        return f"page {rest}"
    return anchor


def _claim_words(kind: str, observed: str) -> str:
    if kind in _STATES:
        return _STATES[kind]
    if kind in _SHOWS and observed:
        return f"{_SHOWS[kind]} “{observed}”"
    return f"passes `{kind}`" + (f" (“{observed}”)" if observed else "")


def _fact(run: Run, test: TestResult, step: Step) -> Candidate:
    assert step.check is not None and step.target is not None
    kind = step.check.kind
    observed = normalise(step.observed)
    page = _page(step)
    where = f" on {page.removeprefix('page:')}" if page else ""
    name = display_name(step.target)
    title = f"{name[:1].upper()}{name[1:]} {_claim_words(kind, observed)}{where}"
    body = (f"`{kind}` held for {step.target}{where}"
            + (f"; the app showed “{observed}”." if observed else "."))
    return Candidate(
        kind="fact", anchor=step.target, scope=_scope(step, {"aspect": aspect_of(kind)}),
        anchors=_further(step.target, step.anchors, [f"test:{test.test_id}"]),
        claim=f"{kind}\x1f{observed}", title=title, body=body,
        evidence=Evidence(run=run.run_id, test=test.test_id, step=step.index,
                          observed=observed or None, check=kind),
        test_id=test.test_id)


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
    return f"test:{test.test_id}", step


def _caution(run: Run, test: TestResult, cause: str) -> Candidate:
    anchor, step = _failure_subject(test, cause)
    text = error_text(test)
    what = _error_class(text)
    line = _first_line(text)
    where = f" in {test.test_id}" + (f" step {step.index}" if step is not None else "")
    if cause == "flaky":
        title = f"{anchor} is flaky ({what}): retry before reporting a failure"
        body = (f"{anchor} failed{where} where it passes on the same build: treat a "
                f"{what} here as flaky, not as an app bug.")
    else:
        title = f"{anchor}: environmental failures ({what}) — not an app bug"
        body = (f"{anchor} failed{where} for a reason outside the app ({what}): check the "
                "environment before reporting a failure.")
    if line:
        body += f"\n\nLast error: {line}"
    further = [f"test:{test.test_id}"] + (list(step.anchors) if step is not None else [])
    if step is not None and step.target and step.target != anchor:
        further.append(step.target)
    return Candidate(
        kind="caution", anchor=anchor, scope=_scope(step) if step is not None else (),
        anchors=_further(anchor, further, test.anchors), claim=f"{cause}\x1f{what}",
        title=title, body=body,
        evidence=Evidence(run=run.run_id, test=test.test_id,
                          step=step.index if step is not None else None,
                          observed=line or None),
        test_id=test.test_id, cause=cause)


def _unknown(run: Run, test: TestResult, cause: str) -> Candidate:
    anchor, step = _failure_subject(test, cause)
    text = error_text(test)
    line = _first_line(text)
    check = step.check if step is not None else None
    contradicts: Subject | None = None
    scope: Pairs = _scope(step) if step is not None else ()
    if check is not None and not check.passed and step is not None and step.target:
        scope = _scope(step, {"aspect": aspect_of(check.kind)})
        contradicts = ("fact", step.target, scope)
        title = f"Unresolved: `{check.kind}` no longer holds for {step.target}"
        body = (f"`{check.kind}` held for {step.target} on earlier builds or was expected "
                f"to, and failed in {test.test_id} step {step.index}"
                + (f" on build {run.build_tag}" if run.build_tag else "")
                + ": an app change and an app bug look alike — confirm which, then "
                  "supersede or keep the fact.")
        claim = f"{cause}\x1f{check.kind}"
    else:
        title = f"Unresolved failure of {test.test_id} at {anchor}"
        body = f"{test.test_id} failed and no rule could tell why ({cause})."
        claim = f"{cause}\x1f{line}"
    if line:
        body += f"\n\nError: {line}"
    further = [f"test:{test.test_id}"] + (list(step.anchors) if step is not None else [])
    return Candidate(
        kind="unknown", anchor=anchor, scope=scope,
        anchors=_further(anchor, further, test.anchors), claim=claim, title=title,
        body=body,
        evidence=Evidence(run=run.run_id, test=test.test_id,
                          step=step.index if step is not None else None,
                          observed=normalise(step.observed) if step is not None and
                          step.observed else (line or None),
                          check=check.kind if check is not None else None),
        test_id=test.test_id, cause=cause, contradicts=contradicts)


def _procedure(run: Run, test: TestResult) -> Candidate:
    steps = sorted(test.steps, key=lambda s: s.index)
    lines = []
    for n, s in enumerate(steps, 1):
        what = f"{s.action} {s.target}" if s.target else s.action
        if s.check is not None:
            what += f" — check `{s.check.kind}`"
        lines.append(f"{n}. {what}")
    anchor = f"test:{test.test_id}"
    claim = "\n".join(f"{s.action}\x1f{s.target or ''}\x1f"
                      f"{s.check.kind if s.check else ''}" for s in steps)
    targets = [s.target for s in steps if s.target]
    return Candidate(
        kind="procedure", anchor=anchor, scope=(),
        anchors=_further(anchor, targets, [a for s in steps for a in s.anchors],
                         test.anchors),
        claim=claim, title=f"How {test.test_id} passes ({len(steps)} steps)",
        body="\n".join(lines),
        evidence=Evidence(run=run.run_id, test=test.test_id), test_id=test.test_id)


def project(run: Run, causes: Mapping[str, str]) -> list[Candidate]:
    """Every candidate of ``run`` (``causes``: test id → root cause of failing tests), one
    per subject, in run order."""
    out: dict[Subject, Candidate] = {}
    # Checks that failed for a reason the app may have caused (not flaky, not the
    # environment): a claim the same run also verifies contradicts itself.
    failed_checks: set[tuple[Subject, str]] = set()
    for test in run.tests:
        if causes.get(test.test_id) not in ("app-bug", "unknown"):
            continue
        for step in test.steps:
            if step.check is not None and not step.check.passed and step.target:
                subject = ("fact", step.target,
                           _scope(step, {"aspect": aspect_of(step.check.kind)}))
                failed_checks.add((subject, step.check.kind))
    for test in run.tests:
        for step in sorted(test.steps, key=lambda s: s.index):
            if step.check is not None and step.check.passed and step.target:
                c = _fact(run, test, step)
                if c.subject not in out:
                    out[c.subject] = c
        cause = causes.get(test.test_id)
        if cause in ("flaky", "environment"):
            c = _caution(run, test, cause)
            out.setdefault(c.subject, c)
        elif cause in ("app-bug", "unknown"):
            c = _unknown(run, test, cause)
            out.setdefault(c.subject, c)
        elif test.verdict == "pass" and test.steps and cause is None:
            c = _procedure(run, test)
            out.setdefault(c.subject, c)
    result = []
    for subject, c in out.items():
        if c.kind == "fact" and (subject, c.evidence.check or "") in failed_checks:
            c = _replace_self(c)
        result.append(c)
    return result


def _replace_self(c: Candidate) -> Candidate:
    from dataclasses import replace

    return replace(c, self_contradiction=True)
