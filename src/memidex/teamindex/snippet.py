"""Snippets of the team index's search results, cut in Python as FTS5's ``snippet()`` does.

About 16 tokens of the column that matches best (title, body or anchors: the most query
words, then the most hits; the first column on a tie), the window placed where it holds
the most, the matched tokens marked ``«like this»``, ``…`` where text was left out.
Tokens are the local index's (:mod:`memidex.index.terms`), so a stemmed word is
marked as FTS5 marks it. The window is chosen by a simpler score than FTS5's, so a
snippet may start a few words off the local one (docs/team-index.md, "Parity").
"""

from __future__ import annotations

import re
from collections.abc import Collection

from memidex.index.terms import run_tokens

__all__ = ["snippet"]

_RUN = re.compile(r"[A-Za-z0-9\x80-\U0010ffff]+")
WIDTH = 16


def _score(hits: list[set[str]]) -> int:
    seen: set[str] = set()
    score = 0
    for h in hits:
        for t in h:
            score += 1 if t in seen else 1000
            seen.add(t)
    return score


def snippet(columns: tuple[str, str, str], tokens: Collection[str], width: int = WIDTH
            ) -> str:
    """The passage of (title, body, anchors) that best shows ``tokens`` (stemmed)."""
    best: tuple[int, str, list[re.Match[str]], list[set[str]]] | None = None
    wanted = set(tokens)
    found = [list(_RUN.finditer(text)) for text in columns]
    # every run of the three columns in one batch (FTS5 folds ASCII runs to lower case)
    keys = [[m.group().lower() if m.group().isascii() else m.group() for m in runs]
            for runs in found]
    asked = run_tokens([k for ks in keys for k in ks])
    pos = 0
    for text, runs, ks in zip(columns, found, keys, strict=True):
        hits = [set(t) & wanted for t in asked[pos:pos + len(ks)]]
        pos += len(ks)
        if not any(hits):
            continue
        score = _score(hits)
        if best is None or score > best[0]:
            best = (score, text, runs, hits)
    if best is None:
        return ""
    _score_, text, runs, hits = best
    start, top = 0, -1
    for i in range(max(1, len(runs) - width + 1)):
        s = _score(hits[i:i + width])
        if s > top:
            start, top = i, s
    window = runs[start:start + width]
    out = ["…" if start > 0 else ""]
    pos = window[0].start() if start > 0 else 0
    for m, hit in zip(window, hits[start:start + width], strict=True):
        out.append(text[pos:m.start()])
        out.append(f"«{m.group()}»" if hit else m.group())
        pos = m.end()
    if start + width < len(runs):
        out.append("…")
    else:
        out.append(text[pos:])
    return " ".join("".join(out).split())
