"""The fixed templates a candidate is worded with when no model is configured
(``written_by: template``), and the normalisation of app text into a claim.

A title stays under :data:`MAX_TITLE` characters (a test is named by its own title, not
its long id); numbers and timeouts stay in bodies (they carry the fact), and only a
claim — what must be equal for a run to confirm a record — replaces durations by
``<time>``, so a timing never makes a new claim.
"""

from __future__ import annotations

import re

from memidex.evidence import TestResult

__all__ = ["MAX_TEXT", "MAX_TITLE", "STATES", "article", "claim_words", "clean", "cut",
           "display_name", "error_class", "first_line", "normalise", "test_name"]

MAX_TEXT = 300
"""Observed text and error lines kept in a title or body are cut to this many characters."""
MAX_TITLE = 119
"""A title is under 120 characters."""

_TIME = re.compile(r"\b\d+(?:[.,]\d+)*\s*(?:ms|milliseconds?|s|secs?|seconds?)\b")
_SPACE = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
"""Control, zero-width and bidirectional-override characters: app text reaches a record
(and a reviewer's diff) without any of them."""

STATES = {
    "assert-enabled": "is enabled", "assert-disabled": "is disabled",
    "assert-visible": "is visible", "assert-hidden": "is hidden",
    "assert-checked": "is checked", "assert-unchecked": "is not checked",
}
"""Check kinds that state a state: their claim is the state alone, never the element's text."""
_SHOWS = {"assert-text": "shows", "assert-value": "holds", "assert-url": "leads to",
          "assert-toast": "shows the toast", "assert-title": "has the title",
          "assert-count": "counts", "assert-contains-text": "contains",
          "assert-status": "answers", "assert-equals": "equals"}


def clean(text: str | None) -> str:
    """App text for a title or body: control, zero-width and bidi characters made spaces,
    whitespace collapsed, cut to MAX_TEXT (numbers and durations kept)."""
    if not text:
        return ""
    return cut(_SPACE.sub(" ", _CONTROL.sub(" ", text)).strip(), MAX_TEXT)


def normalise(text: str | None) -> str:
    """Observed text as a claim: :func:`clean`, and durations (``620 ms``, ``5 s``)
    replaced by ``<time>`` so that a timing never makes a new claim."""
    if not text:
        return ""
    out = _TIME.sub("<time>", _SPACE.sub(" ", _CONTROL.sub(" ", text)).strip())
    return cut(out, MAX_TEXT)


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return clean(line)


def article(word: str) -> str:
    """``a`` or ``an`` for ``word`` (by its first letter: "an error", "a candidate")."""
    return "an" if word[:1].lower() in "aeiou" else "a"


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


def claim_words(kind: str, observed: str) -> str:
    if kind in STATES:
        return STATES[kind]
    if kind in _SHOWS and observed:
        return f"{_SHOWS[kind]} “{observed}”"
    return f"passes `{kind}`" + (f" (“{observed}”)" if observed else "")


def test_name(test: TestResult) -> str:
    """A test as a title names it: its own title when the runner gave one, else its id
    without the file and describe path — under 80 characters."""
    if test.title:
        return cut(clean(test.title), 80)
    name = test.test_id
    if test.project and "@" in name:
        name = name.rsplit("@", 1)[0]
    return cut(name.rsplit(":", 1)[-1].replace("-", " ") or name, 80)


def error_class(text: str) -> str:
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
