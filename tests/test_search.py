"""Search ranking: scoping, filters, common words, and the bundle scan agreeing with FTS."""

from __future__ import annotations

from pathlib import Path

import pytest

import memidex.index.query as query
from conftest import make_record, write_record
from memidex.app import Memidex


def _corpus(repo: Path) -> None:
    rows = [
        ("el:button:place-order", "Place order is disabled until terms are ticked",
         "The place order button stays disabled until the terms box is ticked."),
        ("el:checkbox:terms", "Terms checkbox must be ticked", "Tick the terms box first."),
        ("el:list:suggestions", "Suggestions list is flaky", "The suggestions list appears "
         "late on staging; wait for it."),
        ("page:/cart", "Cart shows the subtotal", "The cart page shows a subtotal."),
        ("page:/login", "Login locks after five failures", "Five failed logins lock it."),
    ]
    for anchor, title, body in rows:
        write_record(repo, make_record(anchor=anchor, title=title, body=body,
                                       anchors=("page:/checkout",)))
    write_record(repo, make_record(anchor="el:button:place-order", product="shop-admin",
                                   title="Admin place order", body="Place order for a user."))
    write_record(repo, make_record(anchor="el:x:old", title="Place order used to be blue",
                                   status="superseded", body="It was blue."))
    write_record(repo, make_record(anchor="el:x:question", kind="unknown",
                                   title="Does place order retry?", body="Unclear."))


@pytest.fixture
def indexed(repo: Path) -> Memidex:
    _corpus(repo)
    m = Memidex(repo)
    m.rebuild_index()
    return m


def _ids(result: object) -> list[str]:
    return [h.title for h in result.results]  # type: ignore[attr-defined]


def test_and_matches_come_first_and_partial_matches_follow(indexed: Memidex) -> None:
    hits = indexed.search("place order terms").results
    assert hits[0].title == "Place order is disabled until terms are ticked"
    assert hits[0].matched == 3 and hits[0].confidence == "reliable"
    partial = [h for h in hits if h.matched < 3]
    assert partial and all(a.matched >= b.matched for a, b in zip(hits, hits[1:], strict=False))


def test_scoping_status_and_kind_filters(indexed: Memidex) -> None:
    titles = _ids(indexed.search("place order"))
    assert "Admin place order" not in titles
    assert "Place order used to be blue" not in titles  # superseded is not served
    assert "Does place order retry?" in titles
    unknown = indexed.search("place order", kinds=["unknown"]).results
    assert [h.confidence for h in unknown] == ["candidate"]  # an open question
    old = indexed.search("blue", statuses=["superseded"]).results
    assert [h.title for h in old] == ["Place order used to be blue"]
    assert _ids(indexed.search("place order", product="shop-admin")) == ["Admin place order"]
    anchored = indexed.search("order", anchors=["el:button:*"]).results
    assert {h.anchors[0] for h in anchored} == {"el:button:place-order"}


def test_stemming_finds_other_forms(indexed: Memidex) -> None:
    assert _ids(indexed.search("disable"))[0].startswith("Place order is disabled")


def test_ties_break_on_id_and_results_are_deterministic(indexed: Memidex) -> None:
    a = indexed.search("page checkout", limit=20).results
    b = Memidex(indexed.config.root).search("page checkout", limit=20).results
    assert [h.id for h in a] == [h.id for h in b]
    for x, y in zip(a, a[1:], strict=False):
        assert (-x.matched, -x.score, x.id) <= (-y.matched, -y.score, y.id)


def test_bundle_scan_ranks_like_the_index(indexed: Memidex) -> None:
    for text in ("place order terms", "suggestions staging", "cart subtotal", "login"):
        fts = indexed.search(text)
        indexed.config.index_path.rename(indexed.config.index_path.with_suffix(".off"))
        try:
            scan = Memidex(indexed.config.root).search(text)
        finally:
            indexed.config.index_path.with_suffix(".off").rename(indexed.config.index_path)
        assert scan.level == "bundle-scan"
        assert [h.id for h in scan.results] == [h.id for h in fts.results], text
        assert [h.confidence for h in scan.results] == [h.confidence for h in fts.results]


def test_common_words_are_dropped_when_rarer_ones_remain(indexed: Memidex,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setattr(query, "CAP", 2)
    monkeypatch.setattr(query, "COMMON_SHARE", 2)
    # "checkout" is an anchor of every shop-web record: with a tiny cap it is common
    hits = indexed.search("checkout suggestions").results
    assert hits[0].title == "Suggestions list is flaky"
    assert hits[0].terms == 1  # only the rare word was searched


def test_a_query_of_only_common_words_is_capped_but_answers(indexed: Memidex,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    full = indexed.search("checkout", limit=3).results
    monkeypatch.setattr(query, "CAP", 4)
    capped = indexed.search("checkout", limit=3).results
    assert len(capped) == len(full) == 3
    assert {h.id for h in capped} <= {h.id for h in indexed.search("checkout", limit=50)
                                      .results}
    # the cap never leaves too few results after the filters: it falls back to all
    assert [h.title for h in indexed.search("place", product="shop-admin").results] == [
        "Admin place order"]
