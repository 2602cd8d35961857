"""The words the team index matches on: the local index's tokens, computed in Python.

The local index tokenizes with FTS5's ``unicode61 remove_diacritics 2`` and stems with its
``porter`` tokenizer. PostgreSQL's own parser splits text differently (``place-order``
gives three tokens, ``/checkout`` one ``file`` token), so the push tokenizes here, the way
``unicode61`` does — a run of letters and digits is a token, any other character a
separator, a combining mark inside a token is dropped, letters lower-cased and their
accents removed — and stores the tokens, space-separated, in the ``fts`` column. The
generated ``tsv`` column stems them with Snowball's ``porter`` stemmer (the original Porter
algorithm, as FTS5's), and a query's words go through :func:`fold` and the same stemmer.

So for ASCII text the words, their counts and each record's token count are the local
index's (``tests/test_teamindex_text.py`` compares them with FTS5's own tokens). The known
differences are in docs/team-index.md ("Parity").
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["COLUMN_SEPARATOR", "fold", "fts_document", "tokens"]

COLUMN_SEPARATOR = "\x1f"
"""Between the title's, the anchors' and the body's tokens in the ``fts`` column."""

# A token starts with a letter or digit and goes on through letters, digits and combining
# diacritical marks (unicode61 keeps a mark inside a token, then removes it).
_TOKEN = re.compile(r"[^\W_](?:[^\W_]|[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff"
                    r"\ufe20-\ufe2f])*")


def fold(word: str) -> str:
    """Lower-case, accents removed (canonical decomposition, combining marks dropped)."""
    low = word.lower()
    if low.isascii():
        return low
    parts = unicodedata.normalize("NFD", low)
    return unicodedata.normalize(
        "NFC", "".join(c for c in parts if not unicodedata.combining(c)))


def tokens(text: str) -> list[str]:
    """The tokens of ``text``, folded (before stemming)."""
    if text.isascii():
        return _TOKEN.findall(text.lower())
    return [t for t in (fold(m) for m in _TOKEN.findall(text)) if t]


def fts_document(title: str, anchors: str, body: str) -> tuple[str, int]:
    """(the ``fts`` column, the record's token count — BM25's document length)."""
    cols = [tokens(title), tokens(anchors), tokens(body)]
    return (COLUMN_SEPARATOR.join(" ".join(c) for c in cols), sum(len(c) for c in cols))
