"""The text a record is embedded from, and the words of an anchor. Pure: no I/O.

**Masking comes first**: the caller passes text with secrets already replaced
(:class:`memidex.masking.Masker`); nothing here masks, and a vector is never computed
from unmasked text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["anchor_words", "record_text", "tokens"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_ANCHOR_TYPES = frozenset({"el", "page", "test", "api", "flow", "host"})


def anchor_words(anchor: str) -> list[str]:
    """The words of an anchor without its type: ``el:button:place-order`` → ``button
    place order``; ``api:GET:/api/search`` → ``get api search``."""
    kind, _, rest = anchor.partition(":")
    words = _WORD.findall((rest if rest else kind).lower())
    if not rest and kind.lower() in _ANCHOR_TYPES:
        return []
    return words


def record_text(title: str, body: str, anchors: Iterable[str] = ()) -> str:
    """One record's text for embedding: the title, the body, then the words of its
    anchors (main anchor first, each anchor's words once). Already masked."""
    seen: list[str] = []
    for anchor in anchors:
        for word in anchor_words(anchor):
            if word not in seen:
                seen.append(word)
    parts = [title.strip(), body.strip()]
    if seen:
        parts.append(" ".join(seen))
    return "\n".join(p for p in parts if p)


def tokens(text: str, stopwords: Sequence[str] | frozenset[str] = ()) -> list[str]:
    """Lower-cased words (letters and digits), in order, ``stopwords`` dropped: the
    tokens :class:`memidex.vectors.sparse.SparseModel` is fed when no index vocabulary
    is at hand (the index feeds it FTS5's own stemmed terms instead)."""
    stop = frozenset(stopwords)
    return [w for w in _WORD.findall(text.lower()) if w not in stop]
