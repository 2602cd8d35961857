"""Locators and URLs in a runner's text → record anchors (docs/import.md has the table).

:func:`find_locators` reads error messages, ``Locator:`` lines, call logs, code frames
and step titles, written by Playwright for JavaScript or Python, and returns what they
name as anchors: ``getByRole('button', { name: 'Place order' })`` →
``el:button:place-order``. A chain (``locator('header').getByRole(…)``) names its last
locator that is worth matching; ``.first()``, ``.last()``, ``.nth(n)`` and ``.filter(…)``
are dropped. Only what can match again gives an anchor: never a bare tag or generic CSS
(``locator('option')``, ``div > span``, ``li:nth-child(2)``), a role without a name
(``getByRole('checkbox')``), or a value holding a generated id (a run of eight or more hex
digits with a digit in it, or six or more digits: ``checkbox-cell-6874bcb4437beded879c3ab8``).
A form the table does not know is left as text: these functions never raise, and every
anchor they return matches the record anchor rule (``memidex.records.ids.ANCHOR_RE``).

``mask`` (the secrets masker) is applied where a value is transformed — after NFKC, before
lower-casing — so a secret that only NFKC spells out (fullwidth letters) is masked too.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from memidex.records.ids import ANCHOR_RE

__all__ = ["Found", "anchor_from_annotation", "find_locators", "find_pages", "generated",
           "generic_css", "name_slug", "page_anchor"]

MAX_VALUE = 200
"""An anchor's value is cut to this many characters."""

Mask = Callable[[str], str]


def _same(text: str) -> str:
    return text


# getByX (JavaScript, Java) and get_by_x (Python) → the anchor's type
_METHODS: dict[str, str] = {
    "role": "role", "testid": "testid", "label": "field", "placeholder": "field",
    "text": "text", "title": "title", "alttext": "alt",
}
_CALL = re.compile(
    r"(?<![A-Za-z0-9_$])(?:getBy(Role|TestId|Label|Placeholder|Text|Title|AltText)"
    r"|get_by_(role|test_id|label|placeholder|text|title|alt_text)|(locator))\(")
_MODIFIER = re.compile(r"\.(?:first|last|contentFrame)\(\s*\)|\.nth\(\s*-?\d+\s*\)|"
                       r"\.(?:first|last|content_frame)\b(?!\()|\.filter\(")
_STRICT = re.compile(r"strict mode violation:?\s*$")
_AKA = re.compile(r"\baka\s+$")
_ROLE = re.compile(r"[a-z][a-z0-9_-]{0,40}")
_NAME_KEY = re.compile(r"""(?:\bname\s*[:=]|["']name["']\s*:)\s*""")
_REGEX_LIT = re.compile(r"/((?:[^/\\\n]|\\.){1,300})/[a-z]*")
_REGEX_WHOLE = re.compile(r"^/((?:[^/\\\n]|\\.){1,300})/[a-z]*$")
_NON_WORD = re.compile(r"[\W_]+")
_SPACES = re.compile(r"\s+")
_XPATH = re.compile(r"^(?:xpath=|\(*\.{0,2}//|/(?=[A-Za-z*]))")
_NOT_ELEMENTS = frozenset({"..", ".", ":root", "xpath=..", "*"})
"""Selectors that name no element of their own: a chain ending in one names the link
before it (``locator('label:has-text("x")').locator('..')`` → the label)."""
_CSS_TESTID = re.compile(r"""^\[data-test(?:id|-id)?=(["']?)([^"'\]\s]+)\1\]$""")
_ENGINE = re.compile(r"^(css|text|id|data-testid|data-test-id|data-test)=(.*)$", re.S)
_INTERNAL = re.compile(r"""^internal:(role|testid|label|text|attr)=(.*)$""", re.S)
_INTERNAL_VALUE = re.compile(r"""^\s*"((?:[^"\\]|\\.)*)"[is]?\s*$""")
_INTERNAL_ROLE = re.compile(r"""^([a-z]+)(?:\[name="((?:[^"\\]|\\.)*)"[is]?\])?""")
_INTERNAL_ATTR = re.compile(
    r"""^\[(placeholder|title|alt|data-testid)="((?:[^"\\]|\\.)*)"[is]?\]$""")
_PAGE_CALL = re.compile(
    r"""(?:\bgoto|\bwaitForURL|\bwait_for_url|\btoHaveURL|\bto_have_url|\bexpect_navigation)"""
    r"""\(\s*(['"`])((?:(?!\1)[^\\\n]|\\.){1,2000})\1"""
    r"""|(?:navigating to|navigation to|navigated to)\s+"([^"\n]{1,2000})\"""")

# What a CSS selector holds that says nothing about which element: tag names, `*`,
# combinators, and positional or state pseudo-classes. A selector of only these (`option`,
# `div > span`, `li:nth-child(2)`, `input:checked`) matches any element of its kind.
_GENERIC_CSS = re.compile(
    r":(?:nth-(?:last-)?(?:child|of-type)|nth-match)\([^()]*\)"
    r"|:(?:first|last|only)-(?:child|of-type)\b"
    r"|:(?:visible|enabled|disabled|checked|focus(?:-visible|-within)?|hover|active|empty|"
    r"root|scope|read-only|read-write|required|optional|first|last)\b(?!-)"
    r"|>>\s*nth=-?\d+"
    r"|[A-Za-z][A-Za-z0-9-]*"
    r"|\*"
    r"|[\s>+~,]+")
# A generated id: eight or more hex digits with a digit among them, or six or more digits
# (`6874bcb4437beded879c3ab8`, `1759936346`) — a value holding one never matches again.
_HEX_RUN = re.compile(r"(?<![A-Za-z0-9])(?=[A-Za-z]*\d)[0-9A-Fa-f]{8,}(?![A-Za-z0-9])")
_DIGIT_RUN = re.compile(r"\d{6,}")


@dataclass(frozen=True, slots=True)
class Found:
    """An anchor found in text, and how it was found: ``role`` is ``locator`` for the
    locator a message is about, ``aka`` for a suggestion in a strict-mode violation,
    ``strict`` for the locator that matched several elements."""

    anchor: str
    role: str = "locator"


def generated(value: str) -> bool:
    """Whether ``value`` holds a generated id (a long hex or digit run)."""
    return bool(_HEX_RUN.search(value) or _DIGIT_RUN.search(value))


def generic_css(selector: str) -> bool:
    """Whether a CSS selector is only tags, combinators and positional or state
    pseudo-classes: nothing that says which element."""
    return not _GENERIC_CSS.sub("", selector).strip()


def name_slug(text: str, mask: Mask | None = None) -> str:
    """An accessible name or text as an anchor value: NFKC, masked (``mask``), lower case,
    each run of characters that are not letters or digits one ``-``, trimmed, cut to 200."""
    text = (mask or _same)(unicodedata.normalize("NFKC", text))
    slug = _NON_WORD.sub("-", text.lower()).strip("-")
    return slug[:MAX_VALUE].strip("-")


def _verbatim(text: str) -> str:
    """A selector or test id as an anchor value: whitespace runs one space, trimmed, cut
    to 200 (a selector's case is kept: selectors are case-sensitive)."""
    return _SPACES.sub(" ", text).strip()[:MAX_VALUE].strip()


def _anchor(kind: str, value: str) -> str | None:
    anchor = f"{kind}:{value}"
    if not value or generated(value):
        return None
    return anchor if ANCHOR_RE.fullmatch(anchor) else None


def _string_at(text: str, i: int) -> tuple[str, int] | None:
    """The quoted string literal starting at ``text[i]`` and the index after it."""
    if i >= len(text) or text[i] not in "'\"`":
        return None
    quote, out, j = text[i], [], i + 1
    while j < len(text):
        c = text[j]
        if c == "\\" and j + 1 < len(text):
            out.append(text[j + 1])
            j += 2
            continue
        if c == quote:
            return "".join(out), j + 1
        if c == "\n" and quote != "`":
            return None
        out.append(c)
        j += 1
    return None


def _close_paren(text: str, i: int) -> int | None:
    """The index just after the ``)`` closing the call whose arguments start at ``i``."""
    depth, j, end = 1, i, min(len(text), i + 4000)
    while j < end:
        c = text[j]
        if c in "'\"`":
            lit = _string_at(text, j)
            if lit is None:
                return None
            j = lit[1]
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return j + 1 if c == ")" else None
        j += 1
    return None


def _skip_spaces(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _slug_anchor(kind: str, text: str, mask: Mask) -> str | None:
    slug = name_slug(text, mask)
    return _anchor("el", f"{kind}:{slug}") if slug else None


def _role_anchor(args: str, mask: Mask) -> str | None:
    first = _string_at(args, _skip_spaces(args, 0))
    if first is None:  # getByRole(AriaRole.BUTTON, …), getByRole(role)
        word = re.match(r"\s*AriaRole\.([A-Z_]+)", args)
        if word is None:
            return None
        role = word.group(1).lower()
    else:
        role = first[0].strip().lower()
    if not _ROLE.fullmatch(role):
        return None
    m = _NAME_KEY.search(args)
    if m is None:
        m = re.search(r"setName\(", args)
    if m is None:
        return None  # a role without a name matches any element of that role
    at = _skip_spaces(args, m.end())
    lit = _string_at(args, at)
    if lit is not None:
        name = lit[0]
    else:
        rx = _REGEX_LIT.match(args, at)
        if rx is None:
            return None  # a name the text does not spell out (a variable)
        name = rx.group(1)
    if "${" in name:
        return None
    return _slug_anchor(role, name, mask)  # a name of no letters or digits gives none


def _selector_anchor(selector: str, mask: Mask) -> str | None:
    """``locator('…')``: CSS, XPath, a ``text=``/``css=`` engine or an ``internal:`` form."""
    sel = selector.strip()
    if not sel or "${" in sel or sel in _NOT_ELEMENTS:
        return None
    internal = _INTERNAL.match(sel)
    if internal is not None:
        return _internal_anchor(internal.group(1), internal.group(2), mask)
    if _XPATH.match(sel):
        value = _verbatim(sel[len("xpath="):] if sel.startswith("xpath=") else sel)
        return _anchor("el", "xpath:" + value) if value else None
    engine = _ENGINE.match(sel)
    if engine is not None:
        kind, value = engine.group(1), engine.group(2).strip()
        if kind == "text":
            rx = _REGEX_WHOLE.match(value)  # text=/Game Code:/i: the pattern, not its flags
            value = rx.group(1) if rx is not None else value.strip("'\"")
            return _slug_anchor("text", value, mask)
        value = value.strip("'\"")
        if kind == "css":
            return _selector_anchor(value, mask) if value else None
        return _anchor("el", "testid:" + _verbatim(value)) if _verbatim(value) else None
    testid = _CSS_TESTID.match(sel)
    if testid is not None:
        return _anchor("el", "testid:" + testid.group(2))
    if generic_css(sel):
        return None
    return _anchor("el", "css:" + _verbatim(sel)) if _verbatim(sel) else None


def _internal_anchor(kind: str, rest: str, mask: Mask) -> str | None:
    if kind == "role":
        m = _INTERNAL_ROLE.match(rest)
        if m is None or m.group(2) is None:
            return None
        return _slug_anchor(m.group(1), m.group(2), mask)
    if kind == "attr":
        m = _INTERNAL_ATTR.match(rest.strip())
        if m is None:
            return None
        attr, value = m.group(1), m.group(2)
        if attr == "data-testid":
            return _anchor("el", "testid:" + _verbatim(value))
        return _slug_anchor({"placeholder": "field", "title": "title", "alt": "alt"}[attr],
                            value, mask)
    if kind == "testid":
        m = _INTERNAL_ATTR.match(rest.strip())
        return None if m is None else _anchor("el", "testid:" + _verbatim(m.group(2)))
    m = _INTERNAL_VALUE.match(rest)
    rx = _REGEX_WHOLE.match(rest.strip())
    value = m.group(1) if m is not None else rx.group(1) if rx is not None else None
    if value is None:
        return None
    return _slug_anchor("field" if kind == "label" else "text", value, mask)


def _call_anchor(method: str, args: str, mask: Mask) -> str | None:
    if method == "locator":
        lit = _string_at(args, _skip_spaces(args, 0))
        return None if lit is None else _selector_anchor(lit[0], mask)
    kind = _METHODS.get(method.replace("_", "").lower())
    if kind is None:  # pragma: no cover - the pattern names only known methods
        return None
    if kind == "role":
        return _role_anchor(args, mask)
    lit = _string_at(args, _skip_spaces(args, 0))
    if lit is None:
        rx = _REGEX_LIT.match(args, _skip_spaces(args, 0))
        if rx is None:
            return None
        value = rx.group(1)
    else:
        value = lit[0]
    if "${" in value:
        return None
    if kind == "testid":
        return _anchor("el", "testid:" + _verbatim(value)) if _verbatim(value) else None
    return _slug_anchor(kind, value, mask)


def _after_modifiers(text: str, i: int) -> int:
    """The index after any ``.first()`` / ``.nth(n)`` / ``.filter(…)`` at ``text[i]``."""
    while True:
        m = _MODIFIER.match(text, i)
        if m is None:
            return i
        if m.group(0).startswith(".filter("):
            end = _close_paren(text, m.end())
            if end is None:
                return i
            i = end
        else:
            i = m.end()


def find_locators(text: str, mask: Mask | None = None) -> list[Found]:
    """Every locator named in ``text``, as anchors in the order they appear (each once);
    in a chain, the last link worth matching names the chain. Never raises."""
    out: list[Found] = []
    seen: set[str] = set()
    pos, n = 0, len(text)
    m_ = mask or _same
    # the chain being read: its anchor so far (None while no link was worth matching),
    # its role (from the text before its head), and where its last link ended
    anchor: str | None = None
    role = "locator"
    chain_end = -2
    while pos < n:
        m = _CALL.search(text, pos)
        if m is None:
            break
        close = _close_paren(text, m.end())
        if close is None:
            pos = m.end()
            continue
        method = m.group(1) or m.group(2) or m.group(3)
        link = _call_anchor(method, text[m.end():close - 1], m_)
        chained = m.start() == chain_end + 1 and chain_end >= 0 and text[chain_end] == "."
        if chained:
            anchor = link or anchor
        else:
            if anchor is not None:
                _keep(out, seen, Found(anchor, role))
            anchor = link
            role = _role_of(text[max(0, m.start() - 200):m.start()])
        chain_end = _after_modifiers(text, close)
        pos = close
    if anchor is not None:
        _keep(out, seen, Found(anchor, role))
    return out


def _role_of(before: str) -> str:
    if _AKA.search(before):
        return "aka"
    if _STRICT.search(before[-40:]):
        return "strict"
    return "locator"


def _keep(out: list[Found], seen: set[str], found: Found) -> None:
    if found.anchor not in seen:
        seen.add(found.anchor)
        out.append(found)


def page_anchor(url: str) -> str | None:
    """``https://shop.test/checkout?step=2`` or ``/checkout`` → ``page:/checkout``: the
    origin, query and fragment dropped; a glob's leading ``**`` dropped; ``None`` for
    what is not a path (a template, a pattern, a regular expression)."""
    url = url.strip()
    if not url or "${" in url or any(c.isspace() for c in url):
        return None
    if url.startswith("**"):
        url = url[2:]
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme and parts.scheme not in ("http", "https", "file"):
        return None
    if parts.scheme == "file":
        return None
    path = parts.path or "/"
    if not path.startswith("/") or "*" in path:
        return None
    if len(path) > 1:
        path = path.rstrip("/") or "/"
    anchor = f"page:{path[:MAX_VALUE].strip()}"
    return anchor if ANCHOR_RE.fullmatch(anchor) else None


def find_pages(text: str) -> list[str]:
    """``page:/path`` anchors of the URLs that ``goto``, ``waitForURL``, ``toHaveURL`` and
    navigation log lines name in ``text``, each once, in order; never raises."""
    out: list[str] = []
    for m in _PAGE_CALL.finditer(text):
        url = m.group(2) if m.group(2) is not None else m.group(3)
        anchor = page_anchor(url or "")
        if anchor is not None and anchor not in out:
            out.append(anchor)
    return out


def anchor_from_annotation(description: str) -> str | None:
    """The anchor a ``memidex-anchor`` annotation gives, when it is a valid anchor."""
    value = description.strip()
    return value if len(value) <= 500 and ANCHOR_RE.fullmatch(value) else None
