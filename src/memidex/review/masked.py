"""A review report with its possible secrets masked, for every place it is shown — the
Markdown table, ``--json``, ``$GITHUB_STEP_SUMMARY`` (meant for pull-request comments)
and MCP: a value of the secrets file becomes ``[secret:<name>]``, a detected token its
first characters and fingerprint (:func:`memidex.review.secrets.mask`, the form the
allow-list takes)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from memidex.review.changes import Change, ReviewReport
from memidex.review.secrets import mask, scan_text

__all__ = ["masked"]


def _clean(text: str, secrets: Sequence[tuple[str, str]], allow: frozenset[str]) -> str:
    for name, value in secrets:
        if value:
            text = text.replace(value, f"[secret:{name}]")
    for finding in sorted(scan_text("", text, (), allow), key=lambda f: -len(f.value)):
        text = text.replace(finding.value, mask(finding.value))
    return text


def _side(side: dict[str, Any] | None, secrets: Sequence[tuple[str, str]],
          allow: frozenset[str]) -> dict[str, Any] | None:
    if side is None:
        return None
    return {k: _clean(v, secrets, allow) if isinstance(v, str) else v
            for k, v in side.items()}


def masked(report: ReviewReport, secrets: Sequence[tuple[str, str]] = (),
           allow: Iterable[str] = ()) -> ReviewReport:
    """``report`` with every title and body (old and new) masked (see the module doc)."""
    allowed = frozenset(allow)
    changes: list[Change] = []
    for c in report.changes:
        changes.append(replace(c, title=_clean(c.title, secrets, allowed),
                               old=_side(c.old, secrets, allowed),
                               new=_side(c.new, secrets, allowed),
                               attention=[_clean(a, secrets, allowed) for a in c.attention]))
    return replace(report, changes=changes)
