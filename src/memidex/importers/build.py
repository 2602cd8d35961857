"""A runner's test (:class:`RawTest`) → a run-evidence test (:class:`TestResult`).

- steps: the ``test.step`` titles of the attempt the verdict comes from (action
  ``step``, the anchors their titles name), then one ``verify`` step per
  ``memidex-verified`` annotation (the only steps that carry a passed check);
- a failing or flaky test gets ``failure`` = ``{message, hint, step}``: the message is
  the first line of each error (escapes removed) plus the ``Locator:`` and ``Timeout:``
  lines; the hint is ``flaky`` for a runner-flaky test and ``test-bug`` for a strict-mode
  violation, else left to the analysis; ``step`` is the step that failed — the erroring
  ``test.step``, or a step made from the error (its action from the API that failed, its
  target the locator the error names);
- anchors: the named locator first, then every locator, ``aka`` suggestion and page in the
  errors, the steps' anchors and ``memidex-anchor`` annotations.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from memidex.evidence import MAX_ATTEMPTS, Attempt, Check, Failure, Step, TestResult
from memidex.importers.common import RawAttempt, RawStep, RawTest
from memidex.importers.locators import (
    Found,
    anchor_from_annotation,
    find_locators,
    find_pages,
)

__all__ = ["ANCHOR_ANNOTATION", "VERIFIED_ANNOTATION", "Builder"]

ANCHOR_ANNOTATION = "memidex-anchor"
VERIFIED_ANNOTATION = "memidex-verified"
MAX_ANCHORS = 64
MAX_STEPS = 10_000
MAX_ARTIFACTS = 100
MAX_MESSAGE = 2_000

_API = re.compile(r"\b(?:locator|page|frame|Locator|Page|Frame|elementHandle|ElementHandle|"
                  r"keyboard|mouse|Keyboard|Mouse)\.([A-Za-z_]+)(?:\(\))?:")
_EXPECT = re.compile(r"\bexpect(?:\([^)\n]{0,200}\))?\.(?:not\.)?to[A-Z]\w*|Expect \"to\w+\"|"
                     r"\bexpect\.to[A-Z]")
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


@dataclass(frozen=True, slots=True)
class Summary:
    """What a failed attempt's errors say."""

    message: str
    full: str
    target: str | None
    anchors: tuple[str, ...]
    strict: bool
    action: str


class Builder:
    """Builds run-evidence tests from raw tests with one text cleaner and one artifact
    filter; collects warnings."""

    def __init__(self, clean: Callable[..., str], artifact: Callable[[str], str | None],
                 warn: Callable[[str], None]) -> None:
        self.clean = clean
        self.artifact = artifact
        self.warn = warn
        self._memo: dict[str, str] = {}

    def _clean(self, text: str) -> str:
        """:attr:`clean` of an error, remembered for the test being built."""
        cleaned = self._memo.get(text)
        if cleaned is None:
            cleaned = self._memo[text] = self.clean(text)
        return cleaned

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
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 1].rstrip() + "…"
        found: list[Found] = []
        for m in _LOCATOR_LINE.finditer(joined):
            found.extend(find_locators(m.group(1)))
        found.extend(find_locators(joined))
        target = next((f.anchor for f in found if f.role != "aka"), None)
        pages = find_pages(joined)
        anchors = _unique([f.anchor for f in found] + pages)
        return Summary(message=message, full=joined[:10_000], target=target or
                       (pages[0] if pages else None), anchors=tuple(anchors),
                       strict=_STRICT in joined, action=action_of(joined))

    def step(self, index: int, raw: RawStep) -> Step:
        title = self.clean(raw.title, 1000)
        found = [f.anchor for f in find_locators(title)] + find_pages(title)
        error = self.clean(raw.error) if raw.error else None
        return Step(index=index, action="step", title=title or None,
                    target=found[0] if found else None, anchors=tuple(found[1:MAX_ANCHORS]),
                    error=error, duration_ms=raw.duration_ms)

    def verified(self, index: int, description: str) -> Step | None:
        """A ``memidex-verified`` annotation: ``ANCHOR | CHECK | OBSERVED`` or
        ``ANCHOR | OBSERVED``."""
        parts = [p.strip() for p in description.split(" | ")]
        anchor = anchor_from_annotation(parts[0]) if parts else None
        kind = parts[1] if len(parts) == 3 else "observed"
        if anchor is None or len(parts) not in (2, 3) or not _WORD.fullmatch(kind):
            self.warn(f"a {VERIFIED_ANNOTATION} annotation is not `ANCHOR | CHECK | "
                      f"OBSERVED`: {self.clean(description, 80)!r}; ignored")
            return None
        return Step(index=index, action="verify", target=anchor,
                    observed=self.clean(parts[-1]) or None,
                    check=Check(kind=kind, passed=True))

    # -- a test -------------------------------------------------------------------------

    def test(self, raw: RawTest) -> TestResult:
        self._memo.clear()
        attempts = raw.attempts
        final = attempts[-1] if attempts else None
        failed = [a for a in attempts if a.errors or a.status in
                  ("fail", "timeout", "interrupted", "error")]
        steps = [self.step(i, s) for i, s in enumerate(
            (final.steps if final else [])[:MAX_STEPS])]
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
        if raw.verdict == "fail" or (raw.flaky and failed):
            source = (final if raw.verdict == "fail" and final is not None and final.errors
                      else (failed[-1] if failed else final))
            summary = self.summarize(source.errors if source else [])
            step_at = self._failing_step(steps, summary, raw.verdict == "fail")
            if step_at is not None and step_at == len(steps):
                steps.append(Step(index=step_at, action=summary.action,
                                  target=summary.target,
                                  anchors=tuple(a for a in summary.anchors
                                                if a != summary.target)[:MAX_ANCHORS],
                                  error=summary.full or None))
            elif step_at is not None:
                steps[step_at] = _with_error_anchors(steps[step_at], summary)
            hint = "flaky" if raw.flaky else "test-bug" if summary.strict else None
            failure = Failure(message=summary.message, hint=hint, step=step_at)
            anchors = [*([summary.target] if summary.target else []), *anchors,
                       *summary.anchors]
        for a in attempts:
            for text in a.errors:
                cleaned = self._clean(text)
                anchors.extend(f.anchor for f in find_locators(cleaned))
                anchors.extend(find_pages(cleaned))
        for s in steps:
            anchors.extend([*([s.target] if s.target else []), *s.anchors])
        return TestResult(
            test_id="-", verdict=raw.verdict, steps=tuple(steps), failure=failure,
            anchors=tuple(_unique(anchors)[:MAX_ANCHORS]),
            artifacts=tuple(self._artifacts(attempts)),
            retries=max(0, len(attempts) - 1),
            duration_ms=_total(attempts), flaky=raw.flaky,
            attempts=self._attempts(attempts) if len(attempts) > 1 or raw.flaky else ())

    def _failing_step(self, steps: list[Step], summary: Summary, final: bool) -> int | None:
        """The index of the step that failed: the last ``test.step`` with an error (when
        the failure is the final attempt's), else a new step made from the error."""
        if final:
            for s in reversed(steps):
                if s.error is not None and s.action == "step":
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
                if kept is not None and kept not in out and len(out) < MAX_ARTIFACTS:
                    out.append(kept)
        return out


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


def _with_error_anchors(step: Step, summary: Summary) -> Step:
    from dataclasses import replace

    target = step.target or summary.target
    anchors = _unique([*step.anchors, *summary.anchors])
    return replace(step, target=target,
                   anchors=tuple(a for a in anchors if a != target)[:MAX_ANCHORS],
                   error=step.error or summary.full or None)


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
