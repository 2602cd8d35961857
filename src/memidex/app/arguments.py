"""The arguments a reading command is given, checked: statuses, kinds, a limit and
anchors, each refused with a usage error that says what is allowed."""

from __future__ import annotations

from collections.abc import Sequence

from memidex.errors import UsageError
from memidex.records.vocab import KINDS, STATUSES
from memidex.search.ranking import DEFAULT_STATUSES

__all__ = ["FUSIONS", "MAX_LIMIT", "STRATEGIES", "anchors_of", "check_limit", "kinds_of",
           "statuses_of"]

STRATEGIES = ("lexical", "vector", "hybrid")  # --strategy
FUSIONS = ("append", "rrf")  # --fusion
MAX_LIMIT = 2**63 - 1  # memidex.records.model.MAX_ORDINAL (not imported on a search)


def statuses_of(statuses: Sequence[str] | None) -> tuple[str, ...]:
    if statuses is None:
        return DEFAULT_STATUSES
    if "any" in statuses:
        return ()
    bad = [s for s in statuses if s not in STATUSES]
    if bad:
        raise UsageError(f"unknown status {bad[0]!r}: use {', '.join(STATUSES)} or any")
    return tuple(sorted(set(statuses)))


def kinds_of(kinds: Sequence[str]) -> tuple[str, ...]:
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise UsageError(f"unknown kind {bad[0]!r}: use {', '.join(KINDS)}")
    return tuple(sorted(set(kinds)))


def check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"--limit must be a whole number from 1 to {MAX_LIMIT}")


def anchors_of(anchors: Sequence[str], *, flag: str, prefix: bool = True) -> tuple[str, ...]:
    """Anchors given on a command line: ``type:value``, or (``prefix``) a prefix of one
    ending in ``*``. A malformed one is a usage error — never a filter matching nothing."""
    from memidex.records.ids import ANCHOR_RE

    for a in anchors:
        if len(a) > 1000 or "\n" in a or "\r" in a or not (
                ANCHOR_RE.fullmatch(a) or (prefix and a.endswith("*") and (
                    ANCHOR_RE.fullmatch(a[:-1]) or
                    (":" in a and ANCHOR_RE.fullmatch(a[:-1] + "x"))))):
            raise UsageError(f"malformed {flag} anchor {a[:80]!r}",
                             hint="an anchor is type:value with a lowercase type (a "
                             "trailing * matches a prefix), e.g. page:/checkout")
    return tuple(sorted(set(anchors)))
