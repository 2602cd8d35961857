"""A runner's test (:class:`RawTest`) → a run-evidence test (:class:`TestResult`).

- steps: the ``test.step`` titles of the attempt the verdict comes from (action ``step``,
  or the API a title or the step's error names — ``page.goto(…)`` → ``goto``; the anchors
  their titles or errors name), then one ``verify`` step per ``memidex-verified``
  annotation (the only steps that carry a passed check);
- a failing or flaky test gets ``failure`` = ``{message, hint, step}``: the message is
  the first line of each error (escapes removed) plus the ``Locator:`` and ``Timeout:``
  lines; the hint is ``flaky`` for a runner-flaky test, ``test-bug`` for a strict-mode
  violation or a ``test.fail()`` test that passed, else left to the analysis; ``step`` is
  the step that failed — the erroring ``test.step``, or a step made from the error (its
  action from the API that failed, its target the locator the error names). When the
  error is a failed assertion (``assertions.py``), that step is ``action: assert`` with a
  failed ``check``, ``observed`` = what the app showed, ``target`` = the anchor of the
  locator the check looked at;
- anchors: the named locator first, then every locator, ``aka`` suggestion and page in the
  errors, the steps' anchors and ``memidex-anchor`` annotations.

Every string the test holds is masked once more after its last change (cut, joined,
NFKC): :meth:`Builder.test` ends with :meth:`Builder._masked`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from memidex.evidence import MAX_ATTEMPTS, Attempt, Check, Failure, Step, TestResult
from memidex.importers.assertions import Assertion, parse_assertion
from memidex.importers.common import RawAttempt, RawStep, RawTest
from memidex.importers.locators import (
    Found,
    anchor_from_annotation,
    find_locators,
    find_pages,
    page_anchor,
)
from memidex.records.ids import ANCHOR_RE

__all__ = ["ANCHOR_ANNOTATION", "STALE_FAIL", "VERIFIED_ANNOTATION", "Builder", "action_of"]

ANCHOR_ANNOTATION = "memidex-anchor"
VERIFIED_ANNOTATION = "memidex-verified"
MAX_ANCHORS = 64
MAX_STEPS = 10_000
MAX_ARTIFACTS = 100
MAX_MESSAGE = 2_000
MAX_TEXT = 10_000
MAX_TITLE = 120
"""A test's ``title`` is cut to this many characters (the spec's own title)."""
STALE_FAIL = ("passed although marked with test.fail(): the marking is stale, a bug in "
              "the test rather than a change in the app")
"""The failure message of a ``test.fail()`` test that passed. It avoids the words the
analysis reads as an assertion (see docs/import.md); its hint is ``test-bug``."""

_API = re.compile(r"\b(?:locator|page|frame|Locator|Page|Frame|elementHandle|ElementHandle|"
                  r"keyboard|mouse|Keyboard|Mouse)\.([A-Za-z_]+)(?:\(\))?:")
_EXPECT = re.compile(r"\bexpect(?:\([^)\n]{0,200}\))?\.(?:not\.)?to[A-Z]\w*|Expect \"to\w+\"|"
                     r"\bexpect\.to[A-Z]")
_TITLE_API = re.compile(r"^\s*(?:await\s+)?(?:page|locator|frame|keyboard|mouse|elementHandle|"
                        r"Locator|Page|Frame)\.([A-Za-z_]+)\(")
_TITLE_EXPECT = re.compile(r"^\s*(?:await\s+)?(?:expect(?:\.soft)?(?:\([^)\n]*\))?"
                           r"\.(?:not\.)?to[A-Z]\w*|Expect \")")
_LOCATOR_LINE = re.compile(r"^\s*Locator:\s*(.+)$", re.M)
_TIMEOUT_LINE = re.compile(r"^\s*Timeout:\s*(\d+)\s*ms\s*$", re.M)
_STRICT = "strict mode violation"
_WORD = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_WAITS = ("waitfor", "wait_for", "waitforurl", "wait_for_url", "waitforselector",
          "waitforloadstate", "waitfornavigation", "waitforresponse", "waitforrequest",
          "waitfortimeout", "waitforfunction", "waitforevent")


def _action(method: str) -> str:
    low = method.lower()
    if low in _WAITS or low.startswith(("waitfor", "wait_for")):
        return "wait"
    if low.startswith(("to", "expect")):
        return "assert"
    word = re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", method).lower().replace("_", "-")
    return word if _WORD.fullmatch(word) else "step"


def action_of(error: str) -> str:
    """The action word of the API call an error comes from (``locator.click:`` →
    ``click``, ``expect(locator).toBeVisible()`` → ``assert``); ``step`` when none."""
    api = _API.search(error)
    expect = _EXPECT.search(error)
    if api is not None and (expect is None or api.start() < expect.start()):
        return _action(api.group(1))
    return "assert" if expect is not None else "step"


def _title_action(title: str) -> str:
    """The action a ``test.step`` title names when it is an API call (``page.goto(…)``,
    ``locator.click(…)``, ``expect(…).toBeVisible()``); ``step`` for a title in words."""
    m = _TITLE_API.match(title)
    if m is not None:
        return _action(m.group(1))
    return "assert" if _TITLE_EXPECT.match(title) else "step"


@dataclass(frozen=True, slots=True)
class Summary:
    """What a failed attempt's errors say."""

    message: str
    full: str
    target: str | None
    anchors: tuple[str, ...]
    strict: bool
    action: str
    assertion: Assertion | None = None


def _cut(text: str | None, limit: int) -> str | None:
    if text is None:
        return None
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class Builder:
    """Builds run-evidence tests from raw tests with one text cleaner, one artifact
    filter and the secrets masker; collects warnings."""

    def __init__(self, clean: Callable[..., str], artifact: Callable[[str], str | None],
                 warn: Callable[[str], None],
                 mask: Callable[[str], str] | None = None) -> None:
        self.clean = clean
        self.artifact = artifact
        self.warn = warn
        self.mask: Callable[[str], str] = mask or (lambda s: s)
        self._memo: dict[str, str] = {}

    def _clean(self, text: str) -> str:
        """:attr:`clean` of an error, remembered for the test being built."""
        cleaned = self._memo.get(text)
        if cleaned is None:
            cleaned = self._memo[text] = self.clean(text)
        return cleaned

    def _locators(self, text: str) -> list[Found]:
        return find_locators(text, self.mask)

    # -- the pieces -------------------------------------------------------------------

    def summarize(self, errors: list[str]) -> Summary:
        texts = [self._clean(e) for e in errors if e and e.strip()]
        texts = [t for t in texts if t.strip()]
        firsts: list[str] = []
        for t in texts:
            line = _first_line(t)
            if line and line not in firsts:
                firsts.append(line)
        joined = "\n".join(texts)
        extra = []
        for rx, label in ((_LOCATOR_LINE, "Locator: "), (_TIMEOUT_LINE, "Timeout: ")):
            m = rx.search(joined)
            if m is not None:
                value = m.group(1).strip() + ("ms" if label == "Timeout: " else "")
                if not any(value in f for f in firsts):
                    extra.append(label + value)
        message = " | ".join(firsts + extra) or "failed (the report gives no message)"
        found: list[Found] = []
        for m in _LOCATOR_LINE.finditer(joined):
            found.extend(self._locators(m.group(1)))
        found.extend(self._locators(joined))
        target = next((f.anchor for f in found if f.role != "aka"), None)
        pages = find_pages(joined)
        anchors = [f.anchor for f in found] + pages
        assertion = next((a for a in map(parse_assertion, texts) if a is not None), None)
        if assertion is not None:
            checked = self._checked(assertion)
            if checked is not None:
                target = checked
                anchors.insert(0, checked)
            elif assertion.page:
                target = pages[0] if pages else None
        return Summary(message=_cut(message, MAX_MESSAGE) or "", full=joined[:MAX_TEXT],
                       target=target or (pages[0] if pages else None),
                       anchors=tuple(_unique(anchors)), strict=_STRICT in joined,
                       action="assert" if assertion is not None else action_of(joined),
                       assertion=assertion)

    def _checked(self, assertion: Assertion) -> str | None:
        """The anchor of what a failed check looked at: the page of a URL check, the
        locator of any other."""
        if assertion.page:
            return page_anchor(assertion.url) if assertion.url else None
        if assertion.locator:
            return next((f.anchor for f in self._locators(assertion.locator)
                         if f.role != "aka"), None)
        return None

    def step(self, index: int, raw: RawStep) -> Step:
        title = self.clean(raw.title, 1000)
        found = [f.anchor for f in self._locators(title)] + find_pages(title)
        action = _title_action(title)
        error = self.clean(raw.error) if raw.error else None
        if error is not None:
            if not found:
                found = [f.anchor for f in self._locators(error) if f.role != "aka"]
            if action == "step":
                action = action_of(error)
        return Step(index=index, action=action, title=title or None,
                    target=found[0] if found else None, anchors=tuple(found[1:MAX_ANCHORS]),
                    error=error, duration_ms=raw.duration_ms)

    def verified(self, index: int, description: str) -> Step | None:
        """A ``memidex-verified`` annotation: ``ANCHOR | CHECK | OBSERVED`` or
        ``ANCHOR | OBSERVED``."""
        parts = [p.strip() for p in self.clean(description).split(" | ")]
        anchor = anchor_from_annotation(parts[0]) if parts else None
        kind = parts[1] if len(parts) == 3 else "observed"
        if anchor is None or len(parts) not in (2, 3) or not _WORD.fullmatch(kind):
            self.warn(f"a {VERIFIED_ANNOTATION} annotation is not `ANCHOR | CHECK | "
                      f"OBSERVED`: {self.clean(description, 80)!r}; ignored")
            return None
        return Step(index=index, action="verify", target=anchor,
                    observed=parts[-1] or None, check=Check(kind=kind, passed=True))

    # -- a test -------------------------------------------------------------------------

    def test(self, raw: RawTest) -> TestResult:
        self._memo.clear()
        attempts = raw.attempts
        final = attempts[-1] if attempts else None
        failed = [a for a in attempts if a.errors or a.status in
                  ("fail", "timeout", "interrupted", "error")]
        # the attempt a failure comes from: the last one that failed — an interrupted
        # attempt was stopped (the run ended), it did not fail, so one that did comes first
        source: RawAttempt | None = None
        if raw.verdict == "fail" or (raw.flaky and failed):
            real = [a for a in failed if a.status != "interrupted" and a.errors]
            if real:
                source = real[-1]
            elif raw.verdict == "fail" and final is not None and final.errors:
                source = final
            else:
                source = failed[-1] if failed else final
        basis = source if raw.verdict == "fail" and source is not None else final
        steps = [self.step(i, s) for i, s in enumerate(
            (basis.steps if basis else [])[:MAX_STEPS])]
        annotations = list(raw.annotations)
        for a in attempts:
            annotations.extend(x for x in a.annotations if x not in annotations)
        anchors: list[str] = []
        for kind, desc in annotations:
            if kind == VERIFIED_ANNOTATION:
                step = self.verified(len(steps), desc)
                if step is not None and len(steps) < MAX_STEPS:
                    steps.append(step)
            elif kind == ANCHOR_ANNOTATION:
                anchor = anchor_from_annotation(self.clean(desc, 500))
                if anchor is None:
                    self.warn(f"a {ANCHOR_ANNOTATION} annotation is not an anchor: "
                              f"{self.clean(desc, 80)!r}; ignored")
                else:
                    anchors.append(anchor)
        failure = None
        if raw.verdict == "fail" and raw.marked_fail and final is not None \
                and final.status == "pass" and not final.errors:
            failure = Failure(message=STALE_FAIL, hint="test-bug", step=None)
        elif raw.verdict == "fail" or (raw.flaky and failed):
            summary = self.summarize(source.errors if source else [])
            # a test marked test.fail() is expected to fail its checks: they are no
            # evidence about the app, so its failure carries none
            check = None if raw.marked_fail else summary.assertion
            step_at = self._failing_step(steps, summary, raw.verdict == "fail")
            if step_at is not None and step_at == len(steps):
                steps.append(self._error_step(step_at, summary, check))
            elif step_at is not None:
                steps[step_at] = self._with_error(steps[step_at], summary, check)
            hint = "flaky" if raw.flaky else "test-bug" if summary.strict else None
            failure = Failure(message=summary.message, hint=hint, step=step_at)
            anchors = [*([summary.target] if summary.target else []), *anchors,
                       *summary.anchors]
        for a in attempts:
            for text in a.errors:
                cleaned = self._clean(text)
                anchors.extend(f.anchor for f in self._locators(cleaned))
                anchors.extend(find_pages(cleaned))
        for s in steps:
            anchors.extend([*([s.target] if s.target else []), *s.anchors])
        result = TestResult(
            test_id="-", verdict=raw.verdict, steps=tuple(steps), failure=failure,
            anchors=tuple(_unique(anchors)[:MAX_ANCHORS]),
            artifacts=tuple(self._artifacts(attempts)),
            retries=max(0, len(attempts) - 1),
            duration_ms=_total(attempts), flaky=raw.flaky,
            attempts=self._attempts(attempts) if len(attempts) > 1 or raw.flaky else (),
            title=self.clean(raw.title, MAX_TITLE) or None if raw.title else None,
            project=self.clean(raw.project, 200) or None if raw.project else None)
        return self._masked(result)

    def _check_fields(self, summary: Summary, check: Assertion | None,
                      target: str | None) -> dict[str, object]:
        if check is None:
            return {}
        fields: dict[str, object] = {
            "action": "assert", "observed": _cut(check.observed, MAX_TEXT),
            "check": Check(kind=check.kind if _WORD.fullmatch(check.kind) else "assert",
                           passed=False, expected=_cut(check.expected, MAX_TEXT),
                           not_found=check.not_found)}
        if check.attribute:
            fields["scope"] = (("attribute", check.attribute[:200]),)
        return fields

    def _error_step(self, index: int, summary: Summary, check: Assertion | None) -> Step:
        target = summary.target
        step = Step(index=index, action=summary.action, target=target,
                    anchors=tuple(a for a in summary.anchors if a != target)[:MAX_ANCHORS],
                    error=summary.full or None)
        fields = self._check_fields(summary, check, target)
        return replace(step, **fields) if fields else step  # type: ignore[arg-type]

    def _with_error(self, step: Step, summary: Summary, check: Assertion | None) -> Step:
        """The erroring ``test.step`` with what its error says: the error's anchors, and
        for a failed assertion the check, on the element the check looked at."""
        target = step.target or summary.target
        if check is not None and summary.target is not None:
            target = summary.target
        anchors = _unique([*step.anchors, *([step.target] if step.target else []),
                           *summary.anchors])
        step = replace(step, target=target,
                       anchors=tuple(a for a in anchors if a != target)[:MAX_ANCHORS],
                       error=step.error or summary.full or None)
        fields = self._check_fields(summary, check, target)
        return replace(step, **fields) if fields else step  # type: ignore[arg-type]

    def _failing_step(self, steps: list[Step], summary: Summary, final: bool) -> int | None:
        """The index of the step that failed: the last ``test.step`` with an error (when
        the failure is the verdict's attempt's), else a new step made from the error."""
        if final:
            for s in reversed(steps):
                if s.error is not None and s.action != "verify":
                    return s.index
        if summary.target is None and not summary.full:
            return None
        return len(steps) if len(steps) < MAX_STEPS else None

    def _attempts(self, attempts: list[RawAttempt]) -> tuple[Attempt, ...]:
        chosen = attempts if len(attempts) <= MAX_ATTEMPTS else \
            attempts[: MAX_ATTEMPTS - 1] + attempts[-1:]
        if chosen is not attempts:
            self.warn(f"a test has {len(attempts)} attempts; the first "
                      f"{MAX_ATTEMPTS - 1} and the last are kept")
        out = []
        for a in chosen:
            error = None
            if a.errors:
                error = self.summarize(a.errors).message
            out.append(Attempt(status=a.status, error=error, duration_ms=a.duration_ms))
        return tuple(out)

    def _artifacts(self, attempts: list[RawAttempt]) -> list[str]:
        out: list[str] = []
        for a in attempts:
            for path in a.attachments:
                kept = self.artifact(path)
                if kept is None or kept in out or len(out) >= MAX_ARTIFACTS:
                    continue
                if self.mask(kept) != kept:
                    self.warn(f"an attachment's path holds a value from the secrets file "
                              f"({self.mask(kept)}); it was left out")
                    continue
                out.append(kept)
        return out

    def _masked(self, t: TestResult) -> TestResult:
        """``t`` with every string masked after its last change, and cut again where the
        mask made it longer than the format allows."""
        m = self.mask

        def text(value: str | None, limit: int = MAX_TEXT) -> str | None:
            return None if value is None else _cut(m(value), limit)

        def anchor_list(values: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(_unique([a for a in (m(v) for v in values)
                                  if len(a) <= 500 and ANCHOR_RE.fullmatch(a)]))

        def one(value: str | None) -> str | None:
            if value is None:
                return None
            masked = m(value)
            return masked if len(masked) <= 500 and ANCHOR_RE.fullmatch(masked) else None

        steps = []
        for s in t.steps:
            target = one(s.target)
            check = s.check if s.check is None else replace(
                s.check, expected=text(s.check.expected))
            steps.append(replace(
                s, title=text(s.title, 1000), target=target,
                anchors=tuple(a for a in anchor_list(s.anchors) if a != target),
                value=text(s.value), observed=text(s.observed), check=check,
                error=text(s.error),
                scope=tuple((k, text(v, 200) if isinstance(v, str) else v)
                            for k, v in s.scope)))
        failure = t.failure if t.failure is None else replace(
            t.failure, message=text(t.failure.message, MAX_MESSAGE) or "")
        return replace(
            t, steps=tuple(steps), failure=failure, anchors=anchor_list(t.anchors),
            attempts=tuple(replace(a, error=text(a.error)) for a in t.attempts),
            title=text(t.title, MAX_TITLE), project=text(t.project, 200))


_ERRORISH = re.compile(r"Error\b|Exception\b|\bTimed out\b|\b[Tt]imeout\b|"
                       r"\bexpect\(|\bfailed\b|\bstrict mode violation\b")
_HEADER = re.compile(r"^\[[^\]\n]{1,100}\] › ")  # Playwright's list reporter: [project] › …


def _first_line(text: str) -> str:
    """The line of an error that says what went wrong: the first line that reads like an
    error among the first ten (a reporter's header line skipped), else the first."""
    lines = [x.strip() for x in text.splitlines() if x.strip()][:10]
    for line in lines:
        if not _HEADER.match(line) and _ERRORISH.search(line):
            return line
    return next((x for x in lines if not _HEADER.match(x)), lines[0] if lines else "")


def _unique(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for x in items:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def _total(attempts: list[RawAttempt]) -> int | None:
    known = [a.duration_ms for a in attempts if a.duration_ms is not None]
    return sum(known) if known else None
