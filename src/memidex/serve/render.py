"""A brief as markdown (``memidex brief``'s default output; docs/brief.md, "Format").

Every piece of text from the app or a learned record — titles, bodies, anchors — is
inside the brief's untrusted-data block (:mod:`memidex.fence`); outside it are only
what memidex computed (ranks, kinds, ids, trust, counts) and the policies people wrote.
Control characters (ESC, CR, bidi controls …) become spaces everywhere, line breaks
kept, so neither a terminal nor a model sees an escape sequence.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from memidex.serve.values import Brief, BriefRecord

__all__ = ["clean", "fenced_texts", "head", "markdown", "record_block", "tail"]

_LABELS = {"superseded": "superseded", "deprecated": "deprecated",
           "quarantined": "quarantined", "candidate": "candidates (not served by default)",
           "out_of_window": "out of window", "below_trust_floor": "below the trust floor",
           "not_reached": "not reached by its test's last run",
           "test_failing": "its test is failing", "over_limit": "over the limit",
           "over_budget": "over budget",
           "other_product": "other product"}
_SHOWN_IDS = 10


def clean(text: str) -> str:
    """``text`` with every control character but the line break as a space (a CR-LF as
    one line break)."""
    if text.isprintable() or all(line.isprintable() for line in text.split("\n")):
        return text
    text = text.replace("\r\n", "\n")
    return "".join(ch if ch.isprintable() or ch == "\n" else " " for ch in text)


def _num(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".") if x else "0"


def _record_text(r: BriefRecord, explain: bool) -> str:
    lines = [clean(" ".join(r.title.split()))]
    if r.body:
        lines += ["", clean(r.body)]
    lines += ["", "anchors: " + clean(", ".join(r.anchors))]
    if explain:
        if r.shared:
            lines.append("shared with the test: " + clean(", ".join(r.shared)))
        if r.hop:
            lines.append("one hop away: " + clean(", ".join(r.hop)))
    return "\n".join(lines)


def fenced_texts(records: Iterable[BriefRecord], anchors: Sequence[str],
                 hops: Sequence[str]) -> list[str]:
    """Every text a brief fences, as the fence is chosen over it."""
    out = [_anchor_text(anchors, hops)]
    out += [_record_text(r, True) for r in records]
    return out


def _anchor_text(anchors: Sequence[str], hops: Sequence[str]) -> str:
    text = "test anchors: " + ", ".join(anchors)
    if hops:
        text += "\none hop away: " + ", ".join(hops)
    return clean(text)


def _fence(text: str, fence: str) -> str:
    from memidex.fence import fenced

    return fenced(text, fence)


def head(b: Brief) -> str:
    """The brief up to its first record: title, policies, the notice, the anchors."""
    from memidex.fence import notice

    out = [f"# Brief: test {b.test_id} — product {b.product}, run {b.ordinal}", ""]
    out.append(f"## Policies ({len(b.policies)})")
    out.append("")
    if b.policies:
        out += [f"- **{p.severity}** `{p.id}`: {clean(p.rule)}" for p in b.policies]
    else:
        out.append("No policy applies to this test.")
    out += ["", f"## Learned records ({len(b.records)})", "", notice(b.fence), "",
            _fence(_anchor_text(b.test_anchors, b.hop_anchors), b.fence), ""]
    return "\n".join(out) + "\n"


def record_block(r: BriefRecord, fence: str, explain: bool) -> str:
    """One record's section: a heading of computed facts, then its text, fenced."""
    tags = " (candidate)" if r.status == "candidate" else ""
    lines = [f"### {r.rank}. {r.kind} `{r.id}` — trust {_num(r.trust)}{tags}",
             _fence(_record_text(r, explain), fence)]
    if explain:
        x = r.ranked
        t = x.trust
        version = (f"version {x.row.version} (current)" if x.row.current
                   else f"version {x.row.version} (an earlier one)")
        until = "open" if x.row.valid_until is None else str(x.row.valid_until)
        lines.append(
            f"why: rank {r.rank}; score {_num(x.score)} = trust {_num(t.value)} × overlap "
            f"{_num(x.overlap)} ({len(x.shared)} shared anchor(s), {len(x.hop)} hop "
            f"anchor(s) and {len(x.cited)} citation(s) at 0.5); trust = source "
            f"{_num(t.source)} × confirmation {_num(t.confirmation)} × contradiction "
            f"{_num(t.contradiction)} × age {_num(t.age)} ({t.age_runs} run(s), half-life "
            f"{t.half_life}); {version}, runs {x.row.valid_from}..{until}")
    return "\n".join(lines) + "\n\n"


def tail(b: Brief) -> str:
    """After the records: what was withheld (with a budget: counts only), the budget,
    the notes."""
    out = [] if b.records else ["No learned record is served for this test.", ""]
    rows = [(reason, ids) for reason, ids in b.withheld.items() if ids]
    if rows:
        out += ["## Withheld", ""]
        for reason, ids in rows:
            if b.budget is None:
                shown = ", ".join(ids[:_SHOWN_IDS]) + (" …" if len(ids) > _SHOWN_IDS else "")
                out.append(f"- {_LABELS.get(reason, reason)}: {len(ids)} ({shown})")
            else:
                out.append(f"- {_LABELS.get(reason, reason)}: {len(ids)}")
        out.append("")
    if b.budget is not None:
        out += [f"Budget: {b.tokens} of {b.budget} tokens (characters / 4).", ""]
    if b.notes:
        out += ["## Notes", "", *(f"- {clean(n)}" for n in b.notes), ""]
    return "\n".join(out)


def markdown(b: Brief) -> str:
    """The whole brief as markdown; the same brief gives the same bytes."""
    parts = [head(b), *(record_block(r, b.fence, b.explain) for r in b.records), tail(b)]
    return "".join(parts).rstrip("\n") + "\n"
