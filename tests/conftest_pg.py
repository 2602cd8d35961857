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
