"""Fitting a brief to ``--budget TOKENS`` (docs/brief.md, "Budget").

The estimate is documented and deterministic, not a tokenizer: one token per 4
characters of the brief's markdown text, rounded up (English prose runs 4 to 4.5
characters per token in the common BPE vocabularies, so the estimate errs on the long
side). Policies are never cut; records are taken whole, best first, and a record that
does not fit is left out (counted as ``over_budget``) while later, shorter ones may
still fit — a record is never cut, so never mid-sentence.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["CHARS_PER_TOKEN", "estimate", "fit"]

CHARS_PER_TOKEN = 4


def estimate(text: str) -> int:
    """Tokens ``text`` is counted as: ``ceil(len(text) / 4)``."""
    return -(-len(text) // CHARS_PER_TOKEN)


def fit(fixed: int, items: Sequence[int], budget: int | None) -> tuple[list[int], int]:
    """Indexes of ``items`` (token costs, best first) kept within ``budget`` after the
    ``fixed`` cost (the header and the policies, never cut), and the tokens used."""
    if budget is None:
        return list(range(len(items))), fixed + sum(items)
    used = fixed
    kept = []
    for i, cost in enumerate(items):
        if used + cost <= budget:
            kept.append(i)
            used += cost
    return kept, used
