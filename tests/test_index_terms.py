"""The team index's tokens are the local index's: FTS5's own, compared token by token."""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from memidex.index.schema import TOKENIZER as LOCAL_TOKENIZER
from memidex.index.terms import Tokenizer, fts_document


def _fts5_tokens(text: str) -> list[str]:
    """What the local index's FTS5 table holds for ``text``, in order."""
    c = sqlite3.connect(":memory:")
    try:
        c.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{LOCAL_TOKENIZER}')")
        c.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        c.execute("INSERT INTO t(rowid, x) VALUES (1, ?)", (text,))
        return [str(t) for t, _o in sorted(
            ((t, o) for t, o in c.execute("SELECT term, offset FROM v")), key=lambda x: x[1])]
    finally:
        c.close()


def test_known_text() -> None:
    tok = Tokenizer()
    text = ("The **Place order** button (`button[data-testid=\"place-order\"]`) on /checkout "
            "is disabled; Straße, naïve CAFÉS, Ünïcode — «quoted» 4242-4242 v1.4.2 x_y as is")
    assert tok.tokens(text) == _fts5_tokens(text)
    assert tok.tokens("el:button:place-order") == ["el", "button", "place", "order"]
    assert tok.tokens("as is") == ["as", "is"]  # words under 3 letters are not stemmed
    fts, count = fts_document("Title words", "page:/checkout", "Body ordering")
    assert fts == "titl word\x1fpage checkout\x1fbodi order" and count == 6


_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)),
                max_size=120)
_WORDISH = st.lists(st.sampled_from(
    ["Place", "order", "disabled", "café", "naïve", "ÉTÉ", "x_y", "4242", "v1.4", "a-b",
     "ﬁle", "İstanbul", "ß", "Ωmega", "e\u0301t\u0301e", "日本語", "٣٤", "/checkout",
     "el:button", "running", "happily", "\u200bzero", "mañana", "ŁÓDŹ", "ǅemal"]),
    max_size=12).map(" ".join)


@given(st.one_of(_TEXT, _WORDISH))
def test_any_text_gives_fts5s_tokens(text: str) -> None:
    assert Tokenizer().tokens(text) == _fts5_tokens(text)
