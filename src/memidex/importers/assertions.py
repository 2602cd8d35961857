"""A failed check, read from what the runner says about it (docs/import.md has the table).

:func:`parse_assertion` reads one cleaned error (escapes removed, secrets masked) written
by Playwright for JavaScript (1.28 to today: ``expect(received).toHaveText(expected)``,
``Timed out 5000ms waiting for expect(locator).toBeVisible()``, ``expect(locator)
.toBeVisible() failed``), by Playwright for Python or Java (``Locator expected to be
visible`` / ``Actual value: …``, pytest's ``E   `` prefixes included), by jest-style
``expect`` (``Expected: … Received: …``) or by JUnit-style assertions (``expected:<X> but
was:<Y>``), and returns the check it names: its kind (``assert-visible``), what it expected,
what the app showed, whether the element was not found, the locator it looked at and the
timeout it waited. A web-first assertion that waited until its timeout is still an
assertion: the check, not the waiting, is what failed.

It returns ``None`` when the error is not a finished check: a test or action timeout with
no matcher, a strict-mode violation or a bad selector (the matcher never looked), a
matcher error (``Error: expected value must be a string``). Never raises.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = ["MATCHERS", "OPPOSITE", "STATES", "Assertion", "kind_of", "parse_assertion"]

MATCHERS: dict[str, tuple[str, str]] = {
    # matcher: (its kind, its kind with `.not`)
    "toBeVisible": ("assert-visible", "assert-hidden"),
    "toBeHidden": ("assert-hidden", "assert-visible"),
    "toBeEnabled": ("assert-enabled", "assert-disabled"),
    "toBeDisabled": ("assert-disabled", "assert-enabled"),
    "toBeChecked": ("assert-checked", "assert-unchecked"),
    "toBeEditable": ("assert-editable", "assert-readonly"),
    "toBeAttached": ("assert-attached", "assert-detached"),
    "toHaveValue": ("assert-value", "assert-not-value"),
    "toHaveURL": ("assert-url", "assert-not-url"),
    "toHaveCount": ("assert-count", "assert-not-count"),
    "toHaveText": ("assert-text", "assert-not-text"),
    "toContainText": ("assert-contains-text", "assert-not-contains-text"),
    "toHaveAttribute": ("assert-attribute", "assert-not-attribute"),
    "toHaveTitle": ("assert-title", "assert-not-title"),
    "toBe": ("assert-equals", "assert-not-equals"),
    "toEqual": ("assert-equals", "assert-not-equals"),
    "toStrictEqual": ("assert-equals", "assert-not-equals"),
}
"""The matchers the table names; any other ``toBeX`` / ``toHaveX`` / ``toContainX`` is
``assert-x`` / ``assert-contains-x`` (``assert-not-…`` with ``.not``), see :func:`kind_of`."""

STATES: dict[str, str] = {
    "visible": "assert-visible", "hidden": "assert-hidden",
    "enabled": "assert-enabled", "disabled": "assert-disabled",
    "checked": "assert-checked", "unchecked": "assert-unchecked",
    "editable": "assert-editable", "readonly": "assert-readonly",
    "attached": "assert-attached", "detached": "assert-detached",
    "focused": "assert-focused", "empty": "assert-empty",
    "in viewport": "assert-in-viewport", "indeterminate": "assert-indeterminate",
}
"""The state a boolean matcher's ``Expected:`` line (or Python's ``expected to be …``)
names: it decides the kind, so ``toBeVisible({ visible: false })`` (``Expected: hidden``)
is ``assert-hidden``."""

OPPOSITE: dict[str, str] = {}
for _a, _b in (("visible", "hidden"), ("enabled", "disabled"), ("checked", "unchecked"),
               ("editable", "readonly"), ("attached", "detached")):
    OPPOSITE[f"assert-{_a}"], OPPOSITE[f"assert-{_b}"] = f"assert-{_b}", f"assert-{_a}"

PAGE_MATCHERS = frozenset({"toHaveURL", "toHaveTitle"})
_STATE_KINDS = frozenset(STATES.values())


@dataclass(frozen=True, slots=True)
class Assertion:
    """A failed check as the runner described it."""

    kind: str
    matcher: str
    expected: str | None = None
    observed: str | None = None
    not_found: bool = False
    timeout_ms: int | None = None
    locator: str | None = None
    """The locator the check looked at, as the text names it (``getByRole(…)``)."""
    url: str | None = None
    """For a page check (``toHaveURL``): the URL whose page the check is about."""
    page: bool = False
    attribute: str | None = None
    """``toHaveAttribute``'s attribute name, when the text (a code frame) spells it."""


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", name).lower().replace("_", "-")


def kind_of(matcher: str, negated: bool) -> str:
    """The check kind of a matcher (``toBeVisible``, ``.not`` when ``negated``)."""
    known = MATCHERS.get(matcher)
    if known is not None:
        return known[1] if negated else known[0]
    m = re.fullmatch(r"to(Be|Have|Contain)?([A-Z]\w*)", matcher)
    rest = _kebab(m.group(2)) if m is not None else _kebab(matcher.removeprefix("to"))
    if m is not None and m.group(1) == "Contain":
        rest = "contains-" + rest
    kind = f"assert-{rest}" if rest else "assert-equals"
    if negated:
        return OPPOSITE.get(kind) or "assert-not-" + kind.removeprefix("assert-")
    return kind


# -- the matcher a message names ----------------------------------------------------------

_JS_HEADER = re.compile(
    r"\bexpect\((?:locator|page|received|response)\)(?:\.(?:resolves|rejects))?"
    r"(\.not)?\.(to[A-Z]\w*)\(")
_JS_THROWN = re.compile(r"\bexpect(?:\.soft)?\.(?:not\.)?to[A-Z]\w*:")  # the matcher threw
_CALL_LOG = re.compile(
    r"-\s+(?:expect\.(not\.)?(to[A-Z]\w*) with timeout (\d+)ms"
    r"|Expect \"(not[ _])?(to[A-Z]\w*|to_\w+)\"[^\n]*? with timeout (\d+)ms"
    r"|(?:Locator|Page|APIResponse)Assertions\.(not_)?(to_\w+) with timeout (\d+)ms)")
_PY_HEADER = re.compile(
    r"^(?:[\w.]*(?:AssertionError|AssertionFailedError):\s*)?"
    r"(Locator|Page URL|Page title|Page|Response|APIResponse) expected (not )?to "
    r"(be|have|contain|match)\b ?([A-Za-z][A-Za-z ]*?)?(?: '(.*)')?\s*$", re.M)
_PY_ACTUAL = re.compile(r"^Actual value: ?(.*?)\s*$", re.M)
_PY_EXPECTED_VALUE = re.compile(r"^Expected value: '(.*)'\s*$", re.M)
_PYTEST_E = re.compile(r"^E(?: {1,3}|$)", re.M)

_LOCATOR_LINE = re.compile(r"^\s*Locator:\s*(.+?)\s*$", re.M)
_WAITING = re.compile(r"^\s*-?\s*waiting for ((?:locator|getBy|get_by|page\.)\S.*?)"
                      r"(?: to be \w+)?\s*$", re.M)
_EXPECT_ARG = re.compile(r"\bexpect\(((?:page\.)?(?:locator|getBy\w+|get_by_\w+)\(.*?\))\)"
                         r"\s*\.\s*(?:not[._])?to")
_EXPECTED = re.compile(r"^\s*Expected(?: (string|substring|pattern|value|array|object|"
                       r"number))?:\s?(.*?)\s*$", re.M)
_RECEIVED = re.compile(r"^\s*Received(?: (?:string|substring|value|array|object|"
                       r"number))?:\s?(.*?)\s*$", re.M)
_DIFF_HEAD = re.compile(r"^- Expected\b[^\n]*\n\+ Received\b[^\n]*$", re.M)
_TIMEOUT = re.compile(r"^\s*Timeout:\s*(\d+)\s*ms\s*$|\bTimed out (\d+)ms waiting for\b|"
                      r"\bwith timeout (\d+)ms\b", re.M)
_NOT_FOUND = re.compile(r"<element\(s\) not found>|^\s*Error: element\(s\) not found",
                        re.M)
_OTHER_ERROR = re.compile(r"^\s*(?:Error: (?!element\(s\) not found)|Matcher error\b)", re.M)
_ATTRIBUTE = re.compile(r"\b(?:toHaveAttribute|to_have_attribute)\(\s*(['\"`])"
                        r"([^'\"`\n]{1,100})\1")

# JUnit, TestNG, and any assertion library's "expected X but was Y"
_GENERIC = (
    re.compile(r"\bexpected:\s?<(.*?)> but was:\s?<(.*?)>", re.S),
    re.compile(r"\bexpected \[(.*?)\] but found \[(.*?)\]", re.S),
    re.compile(r"\b[Ee]xpected:? (.+?),? but (?:was|got|found|received):? (.+?)\s*$", re.M),
)
_ASSERTION_WORDS = re.compile(r"\bAssertion(?:Failed)?Error\b|\bComparisonFailure\b|"
                              r"\bAssertionFailure\b|\bassert", re.I)


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _unquote(value: str) -> str | None:
    """A printed value as text: a JSON-style ``"string"`` unquoted; ``None`` for none."""
    value = value.strip()
    if not value or value in ("undefined", "None", "null"):
        return None
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            out = json.loads(value)
            return out if isinstance(out, str) else value
        except ValueError:
            return value[1:-1]
    return value


def _diff(text: str) -> tuple[str, str] | None:
    """The expected and received sides of a ``- Expected`` / ``+ Received`` diff."""
    m = _DIFF_HEAD.search(text)
    if m is None:
        return None
    expected: list[str] = []
    received: list[str] = []
    started = False
    for line in text[m.end():].split("\n")[1:]:
        if line.startswith("- ") or line == "-":
            expected.append(line[2:])
        elif line.startswith("+ ") or line == "+":
            received.append(line[2:])
        elif line.startswith("  "):
            expected.append(line[2:])
            received.append(line[2:])
        elif not line.strip() and not started:
            continue
        else:
            break
        started = True
    if not expected and not received:
        return None
    return "\n".join(expected).strip("\n"), "\n".join(received).strip("\n")


def _timeout(text: str) -> int | None:
    m = _TIMEOUT.search(text)
    if m is None:
        return None
    value = next(g for g in m.groups() if g is not None)
    return int(value) if len(value) <= 12 else None


def _locator(text: str) -> str | None:
    for rx in (_LOCATOR_LINE, _WAITING, _EXPECT_ARG):
        m = rx.search(text)
        if m is not None:
            return m.group(1).strip()
    return None


def _matcher(text: str) -> tuple[str, bool] | None:
    """The matcher a message names and whether it was negated: the JavaScript header,
    else the call log's ``expect.toX`` / ``Expect "toX"`` / ``LocatorAssertions.to_x``."""
    m = _JS_HEADER.search(text)
    if m is not None:
        return m.group(2), m.group(1) is not None
    m = _CALL_LOG.search(text)
    if m is not None:
        if m.group(2):
            return m.group(2), m.group(1) is not None
        if m.group(5):
            name = m.group(5)
            return (_camel(name) if "_" in name else name), m.group(4) is not None
        if m.group(8):
            return _camel(m.group(8)), m.group(7) is not None
    return None


def _state_kind(state: str | None, negated: bool) -> str | None:
    if not state:
        return None
    state = state.strip()
    if state.startswith("not "):
        negated, state = not negated, state[4:].strip()
    kind = STATES.get(state.lower())
    if kind is None:
        return None
    return (OPPOSITE.get(kind) or "assert-not-" + kind.removeprefix("assert-")) if negated \
        else kind


def parse_assertion(text: str) -> Assertion | None:
    """The failed check ``text`` (one cleaned error) describes, or ``None``."""
    if not text or "strict mode violation" in text:
        return None
    if "\nE " in text or text.startswith("E "):
        text = _PYTEST_E.sub("", text)
    py = _PY_HEADER.search(text)
    if py is not None:
        return _python(text, py)
    if _JS_THROWN.search(text) and not _JS_HEADER.search(text):
        return None  # `expect.toBeVisible: Target closed`: the matcher threw, it did not check
    found = _matcher(text)
    if found is not None:
        return _javascript(text, *found)
    return _generic(text)


def _javascript(text: str, matcher: str, negated: bool) -> Assertion | None:
    header = _JS_HEADER.search(text)
    body = text[header.end():] if header is not None else text
    if _OTHER_ERROR.search(body):
        return None  # a bad selector, a matcher error: the check never looked
    expected = observed = None
    diff = _diff(body)
    em = _EXPECTED.search(body)
    rm = _RECEIVED.search(body)
    pattern = em is not None and em.group(1) == "pattern"
    if diff is not None:
        expected, observed = diff
    else:
        if em is not None:
            expected = em.group(2)
        if rm is not None:
            observed = rm.group(1)
    not_found = bool(_NOT_FOUND.search(body))
    if not_found:
        observed = None
    kind = kind_of(matcher, negated)
    if kind_of(matcher, False) in _STATE_KINDS:  # a boolean matcher: the state decides
        kind = _state_kind(expected, False) or kind
        expected = kind.removeprefix("assert-") if kind in _STATE_KINDS else None
        observed = observed if observed and not observed.startswith("<") else None
    elif diff is None:
        if expected is not None:
            exp = expected.strip()
            if negated and exp.startswith("not "):
                exp = exp[4:]
            expected = exp if pattern else _unquote(exp)
        if observed is not None:
            observed = _unquote(observed)
    url = ((None if pattern else expected) or observed) if matcher == "toHaveURL" else None
    return _assertion(text, kind, matcher, expected, observed, not_found, url)


_PY_MATCHERS = {
    ("Page URL", "be"): "toHaveURL", ("Page title", "be"): "toHaveTitle",
}


def _python(text: str, m: re.Match[str]) -> Assertion | None:
    subject, negated, verb = m.group(1), m.group(2) is not None, m.group(3)
    words = (m.group(4) or "").strip()
    expected = m.group(5)
    body = text[m.end():]
    if _OTHER_ERROR.search(body):
        return None
    matcher = _PY_MATCHERS.get((subject, verb))
    state = None
    if matcher is None:
        if verb == "be" and words.lower() in STATES:
            state = _state_kind(words, negated)
            matcher = "toBe" + "".join(w.capitalize() for w in words.split())
        else:
            matcher = "to" + verb.capitalize() + "".join(
                w[:1].upper() + w[1:].lower() for w in words.split())
            matcher = {"toHaveUrl": "toHaveURL", "toHaveCss": "toHaveCSS",
                       "toHaveId": "toHaveId"}.get(matcher, matcher)
    kind = state or kind_of(matcher, negated)
    if expected is None:
        ev = _PY_EXPECTED_VALUE.search(body)
        expected = ev.group(1) if ev is not None else None
    actual = _PY_ACTUAL.search(body)
    observed = _unquote(actual.group(1)) if actual is not None else None
    not_found = bool(_NOT_FOUND.search(body))
    if not_found:
        observed = None
    if kind in _STATE_KINDS:
        expected = kind.removeprefix("assert-")
    url = (expected or observed) if matcher == "toHaveURL" else None
    return _assertion(text, kind, matcher, expected, observed, not_found, url)


def _assertion(text: str, kind: str, matcher: str, expected: str | None,
               observed: str | None, not_found: bool, url: str | None) -> Assertion:
    """The assertion a message states, with what every matcher's message also tells:
    its timeout, the locator (none for a page matcher), the attribute it looked at."""
    page = matcher in PAGE_MATCHERS
    attribute = None
    if matcher == "toHaveAttribute":
        am = _ATTRIBUTE.search(text)
        attribute = am.group(2) if am is not None else None
    return Assertion(kind=kind, matcher=matcher, expected=expected, observed=observed,
                     not_found=not_found, timeout_ms=_timeout(text),
                     locator=None if page else _locator(text), url=url, page=page,
                     attribute=attribute)


def _generic(text: str) -> Assertion | None:
    """``expected:<X> but was:<Y>`` (JUnit), ``expected [X] but found [Y]`` (TestNG),
    ``expected X but was Y``, or ``Expected: X`` / ``Received: Y`` — only in an error that
    says it is an assertion (``AssertionError``, ``ComparisonFailure``, ``assert…``)."""
    for i, rx in enumerate(_GENERIC):
        m = rx.search(text)
        if m is None or (i == 2 and not _ASSERTION_WORDS.search(text)):
            continue
        expected, observed = m.group(1).strip(), m.group(2).strip()
        if "ComparisonFailure" in text:  # JUnit 4 marks the difference with [ ]
            expected, observed = (re.sub(r"[\[\]]", "", v) for v in (expected, observed))
        return Assertion(kind="assert-equals", matcher="equals",
                         expected=_unquote(expected), observed=_unquote(observed),
                         timeout_ms=_timeout(text))
    em, rm = _EXPECTED.search(text), _RECEIVED.search(text)
    if em is not None and rm is not None and _ASSERTION_WORDS.search(text):
        return Assertion(kind="assert-equals", matcher="equals",
                         expected=_unquote(em.group(1)), observed=_unquote(rm.group(1)),
                         timeout_ms=_timeout(text))
    return None
