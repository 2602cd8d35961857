"""The local index's own tokens, outside SQL: what FTS5 makes of a text.

The team index matches on them, and the sparse vector strategy weighs them.

The local index tokenizes with FTS5's ``porter unicode61 remove_diacritics 2``.
PostgreSQL's parser splits text otherwise (``place-order`` gives three tokens,
``/checkout`` one ``file`` token) and its Snowball ``porter`` stemmer differs from FTS5's
in places (words of one or two letters: ``as`` → ``a``; some double consonants). So the
push asks **SQLite's FTS5 tokenizer itself** for the tokens: the text is cut at the
characters that are separators for ``unicode61`` whatever its Unicode tables (ASCII
characters other than letters and digits, and Unicode spaces),
each distinct run is tokenized once by an in-memory FTS5 table with the local index's
tokenizer (``fts5vocab``'s ``instance`` table gives its tokens in order), and the
record's tokens — stemmed, lower-cased, accents removed, exactly as the local index holds
them — go space-separated into the ``fts`` column. The generated ``tsv`` column reads
them with the ``simple`` dictionary, which changes nothing more. A query's words go
through the same tokenizer (:func:`query_tokens`).

So the words of a record, how often each occurs and its length in tokens (BM25's ``D``)
are the local index's; ``tests/test_index_terms.py`` compares them with FTS5's own
tokens on whole records, non-ASCII text included.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import unicodedata
from collections.abc import Iterable

from memidex.index.schema import TOKENIZER

__all__ = ["COLUMN_SEPARATOR", "TOKENIZER", "Tokenizer", "fts_document", "query_tokens",
           "run_tokens", "runs", "tokens"]

COLUMN_SEPARATOR = "\x1f"
"""Between the title's, the anchors' and the body's tokens in the ``fts`` column."""

# Runs of ASCII letters and digits and of every non-ASCII character; non-ASCII runs are
# cut again at Unicode spaces (_split_unicode).
_RUN = re.compile(r"[A-Za-z0-9\x80-\U0010ffff]+")
_SEPARATOR_CATEGORIES = ("Z",)
"""Non-ASCII characters cut here: spaces only. Punctuation, symbols or unassigned code
points may be token characters in FTS5's Unicode tables (another Unicode version than
Python's), so those runs are left whole and FTS5 cuts them itself."""
_BATCH = 4096


def _split_unicode(run: str) -> list[str]:
    out: list[str] = []
    start = 0
    for i, ch in enumerate(run):
        if ord(ch) >= 0x80 and unicodedata.category(ch).startswith(_SEPARATOR_CATEGORIES):
            if i > start:
                out.append(run[start:i])
            start = i + 1
    if start < len(run):
        out.append(run[start:])
    return out


_CACHE: dict[str, tuple[str, ...]] = {}
"""Each run's tokens, shared by the threads of a process (FTS5 gives a run the same
tokens whoever asks); bounded."""
_CACHE_MAX = 1_000_000


class Tokenizer:
    """FTS5's tokenizer on runs of text, each distinct run asked once (a cache)."""

    def __init__(self) -> None:
        self._conn = sqlite3.connect(":memory:", isolation_level=None)
        self._cache = _CACHE

    def runs(self, text: str) -> list[str]:
        found = _RUN.findall(text)
        if text.isascii():
            return [r.lower() for r in found]  # unicode61 folds ASCII to lower case
        out: list[str] = []
        for run in found:  # non-ASCII case folding is left to FTS5 itself
            out += _split_unicode(run) if not run.isascii() else [run.lower()]
        return out

    def learn(self, runs: Iterable[str]) -> None:
        """Tokenize the runs not seen yet, in batches."""
        new = list(dict.fromkeys(r for r in runs if r not in self._cache))
        if new and len(self._cache) + len(new) > _CACHE_MAX:
            self._cache.clear()
        for i in range(0, len(new), _BATCH):
            batch = new[i:i + _BATCH]
            c = self._conn
            # a fresh table each time: deleted rows would stay in the FTS5 index (until
            # it merges) and the vocabulary scan below would walk them all
            c.execute("BEGIN")
            c.execute("DROP TABLE IF EXISTS v")
            c.execute("DROP TABLE IF EXISTS t")
            c.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{TOKENIZER}')")
            c.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
            c.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)",
                          [(n + 1, r) for n, r in enumerate(batch)])
            c.execute("COMMIT")
            got: dict[int, list[tuple[int, str]]] = {}
            for term, doc, offset in c.execute("SELECT term, doc, offset FROM v"):
                got.setdefault(int(doc), []).append((int(offset), str(term)))
            for n, run in enumerate(batch, start=1):
                self._cache[run] = tuple(t for _o, t in sorted(got.get(n, ())))

    def tokens(self, text: str) -> list[str]:
        """The local index's tokens of ``text``, in order."""
        out: list[str] = []
        for toks in self.run_tokens(self.runs(text)):
            out += toks
        return out

    def run_tokens(self, runs: list[str]) -> list[tuple[str, ...]]:
        """The tokens of each run (runs as :meth:`runs` gives them), asked in one batch."""
        cache = self._cache
        if any(r not in cache for r in runs):
            self.learn(runs)
        try:
            return [cache[r] for r in runs]
        except KeyError:  # another thread cleared the cache meanwhile
            self.learn(runs)
            return [cache.get(r) or () for r in runs]


_LOCAL = threading.local()


def _shared() -> Tokenizer:
    """This thread's tokenizer: a SQLite connection is used by the thread that made it,
    and never across a fork (a forked parser process makes its own)."""
    mine: tuple[int, Tokenizer] | None = getattr(_LOCAL, "tokenizer", None)
    if mine is None or mine[0] != os.getpid():
        mine = (os.getpid(), Tokenizer())
        _LOCAL.tokenizer = mine
    return mine[1]


def runs(text: str) -> list[str]:
    """:meth:`Tokenizer.runs`."""
    return _shared().runs(text)


def tokens(text: str) -> list[str]:
    """:meth:`Tokenizer.tokens` with this thread's tokenizer."""
    return _shared().tokens(text)


def run_tokens(runs: list[str]) -> list[tuple[str, ...]]:
    """:meth:`Tokenizer.run_tokens` with this thread's tokenizer."""
    return _shared().run_tokens(runs)


def query_tokens(word: str) -> list[str]:
    """The tokens FTS5 makes of one query word (``"word"`` in a MATCH): usually one."""
    return _shared().tokens(word)


def fts_document(title: str, anchors: str, body: str) -> tuple[str, int]:
    """(the ``fts`` column, the record's token count — BM25's document length)."""
    tok = _shared()
    cols = [tok.tokens(title), tok.tokens(anchors), tok.tokens(body)]
    return (COLUMN_SEPARATOR.join(" ".join(c) for c in cols), sum(len(c) for c in cols))
