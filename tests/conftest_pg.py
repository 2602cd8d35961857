"""The PostgreSQL fixtures of the team-index tests (loaded by conftest.py's pytest_plugins).

``pg_server`` is one throw-away cluster per test session (per xdist worker): ``initdb`` +
``pg_ctl`` on a Unix socket in a temp folder (``tests/pgserver.py``), stopped and removed
at the end. ``pg_url`` is a fresh database of it for one test (a copy of the ``memidex``
template, which has the ``vector`` extension). A machine without PostgreSQL or pgvector
FAILS these tests with a message naming ``scripts/install_pg.sh`` — they never skip.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgserver import PgMissing, PgServer, started

_NAMES = itertools.count(1)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    try:
        server = started()
    except PgMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A new, empty database (with the vector extension) for one test."""
    name = f"t{next(_NAMES)}"
    pg_server.psql(f"CREATE DATABASE {name} TEMPLATE memidex", database="postgres")
    try:
        yield pg_server.url(database=name)
    finally:
        pg_server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", database="postgres")


@pytest.fixture(scope="session")
def corpus_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2,000 records from ``bench/gen_corpus.py`` (five products, every status, history,
    citations) committed on ``main`` of a git repository. Tests clone it before changing
    anything (``git clone`` hard-links the objects: a fraction of a second)."""
    import subprocess
    import sys

    bench = Path(__file__).resolve().parent.parent / "bench"
    if str(bench) not in sys.path:
        sys.path.insert(0, str(bench))
    from gen_corpus import generate

    root = tmp_path_factory.mktemp("corpus")
    generate(2000, root, seed=11, jobs=1)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    return root
