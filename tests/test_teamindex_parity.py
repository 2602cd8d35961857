"""The team index answers as the local index does (docs/team-index.md, "Parity").

The same commit is indexed twice — a local SQLite rebuild and a team-index push — and the
same searches and briefs are asked of both: the example knowledge bundled in this
repository, and a corpus from ``bench/gen_corpus.py``. Search results must be equal in
everything but the snippet (ids, order, score, confidence, words matched); briefs must
be equal whole (``Brief.as_dict``). The brief runs memidex's own code
(``memidex.serve.brief.build_brief``) with a team-index session as its source: the
brief's query functions (``memidex.index.briefing``, ``query.max_ordinal``) are
``team_aware``, answered by the session's methods of the same names.
"""

from __future__ import annotations

import random
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT, git
from memidex.config import load_config
from memidex.index import query
from memidex.index.build import rebuild
from memidex.index.db import IndexDB
from memidex.masking import Masker
from memidex.search.ranking import SearchQuery
from memidex.serve.brief import BriefRequest, build_brief
from memidex.store.files import Store
from memidex.teamindex import TeamIndex, push
from pgserver import PgServer

sys.path.insert(0, str(REPO_ROOT / "bench"))
from gen_corpus import make_queries  # noqa: E402


@dataclass
class Twin:
    root: Path
    db: IndexDB
    team: TeamIndex


def _twin(root: Path, url: str, tmp: Path) -> Twin:
    config = load_config(root)
    target = tmp / "local.sqlite"
    rebuild(Store(config), target)
    push(root, url)
    return Twin(root, IndexDB.open(target), TeamIndex.connect(url))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, pg_server: PgServer,
           corpus_repo: Path) -> Iterator[Twin]:
    """The generated corpus (``conftest_pg.corpus_repo``), indexed locally and pushed."""
    root = corpus_repo
    pg_server.psql("CREATE DATABASE parity TEMPLATE memidex", database="postgres")
    twin = _twin(root, pg_server.url(database="parity"), tmp_path_factory.mktemp("idx"))
    yield twin
    twin.team.close()
    twin.db.close()
    pg_server.psql("DROP DATABASE parity WITH (FORCE)", database="postgres")


@pytest.fixture
def examples(tmp_path: Path, pg_url: str) -> Iterator[Twin]:
    """The example knowledge bundled with memidex, as committed in this repository."""
    root = tmp_path / "examples"
    root.mkdir()
    for name in ("agent-qa-knowledge/memory/records", "policies"):
        shutil.copytree(REPO_ROOT / name, root / name)
    shutil.copy(REPO_ROOT / "memidex.toml", root / "memidex.toml")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "examples")
    twin = _twin(root, pg_url, tmp_path)
    yield twin
    twin.team.close()
    twin.db.close()


def _hits(hits: list[Any]) -> list[tuple[Any, ...]]:
    return [(h.id, h.path, h.score, h.confidence, h.matched, h.terms, h.anchors, h.product)
            for h in hits]


def _same_searches(twin: Twin, queries: list[SearchQuery]) -> int:
    """Asks both; returns how many results they gave (so a test sees it compared some)."""
    total = 0
    with twin.team.session() as s:
        for q in queries:
            local = _hits(query.search(twin.db, q))
            assert _hits(s.search(q)) == local, q
            total += len(local)
    return total


def _same_briefs(twin: Twin, requests: list[BriefRequest]) -> int:
    config = load_config(twin.root)
    store = Store(config)
    masker = Masker.load(config.root / config.secrets_file)
    served = 0
    with twin.team.session() as s:
        for req in requests:
            local = build_brief(config, store, twin.db, req, masker=masker, record=False)
            team = build_brief(config, store, s, req, masker=masker, record=False)  # type: ignore[arg-type]
            assert team.to_json() == local.to_json(), req
            served += len(local.records)
    return served


def test_example_knowledge_searches_and_briefs_match(examples: Twin) -> None:
    texts = ["place order disabled", "cookie banner", "login", "card number", "checkout",
             "flaky timeout suggestions", "terms", "the", "search results", "payment sandbox",
             "guest", "review stars", "added to cart toast", "staging host"]
    queries = [SearchQuery(t, "shop-web") for t in texts]
    queries += [SearchQuery(t, None, statuses=()) for t in texts]
    queries += [SearchQuery("order", "shop-web", kinds=("caution",)),
                SearchQuery("checkout", "shop-web", anchors=("page:/checkout*",)),
                SearchQuery("button", "shop-web", near=("page:/checkout",), limit=5),
                SearchQuery("order", "shop-web", limit=1)]
    assert _same_searches(examples, queries) > 100
    with examples.team.session() as s:
        anchors = sorted({a for r in s.list_records(product="shop-web") for a in r.anchors})
    requests = [BriefRequest("checkout-happy-path", "shop-web", ("page:/checkout",)),
                BriefRequest("checkout-happy-path", "shop-web", ("page:/checkout",), at=3),
                BriefRequest("search-suggestions", "shop-web", budget=300, explain=True),
                BriefRequest("login-lockout", "shop-web", ("page:/login",), limit=2)]
    requests += [BriefRequest(f"t-{i}", "shop-web", (a,)) for i, a in enumerate(anchors)]
    assert _same_briefs(examples, requests) > 50


def test_generated_corpus_searches_match(corpus: Twin) -> None:
    queries = [SearchQuery(t, "shop-web") for t in make_queries(11, 150)]
    queries += [SearchQuery(t, None, statuses=(), limit=20) for t in make_queries(12, 40)]
    queries += [SearchQuery(t, "shop-ios", kinds=("fact", "caution")) for t in
                make_queries(13, 30)]
    assert _same_searches(corpus, queries) > 1000


def test_generated_corpus_briefs_match(corpus: Twin) -> None:
    rng = random.Random(5)
    with corpus.team.session() as s:
        rows = s.list_records(product="shop-web")
    requests = []
    for i in range(60):
        r = rng.choice(rows)
        anchors = tuple(rng.sample(r.anchors, min(len(r.anchors), rng.randint(1, 3))))
        at = rng.choice((None, r.valid_from, r.valid_from + 5, 50))
        requests.append(BriefRequest(f"test-{i}", "shop-web", anchors, at=at,
                                     limit=rng.choice((None, 3, 50))))
    assert _same_briefs(corpus, requests) > 60
