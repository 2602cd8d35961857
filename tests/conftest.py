"""Shared fixtures: an isolated HOME and environment, and real git repositories in temp dirs."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from memidex.records.codec import dump_record
from memidex.records.ids import record_id
from memidex.records.model import Record, Trust, Valid

REPO_ROOT = Path(__file__).resolve().parent.parent

pytest_plugins = ["conftest_pg"]  # the PostgreSQL fixtures of the team-index tests

# The SPEC §2 example record in canonical form, shared by the codec, validation and
# versions tests. Lines: 1 ---, 2 id, 3 kind, 4 status, 5 product, 6 scope, 7 anchor,
# 8 anchors, 9 title, 10 trust, 11 valid, 12 relations, 13 evidence, 14 its item.
SPEC_FRONT = """\
---
id: fact-el-button-place-order-97c05f92322716e0
kind: fact
status: active
product: shop-web
scope: {page: /checkout}
anchor: el:button:place-order
anchors: [page:/checkout, test:checkout-happy-path]
title: Place order stays disabled until the terms box is ticked
trust: {source: local, confirmations: 3, contradictions: 0, last_confirmed: 41}
valid: {from: 36, until: null}
relations: {supersedes: [], superseded_by: null, cites: [], contradicts: []}
"""
SPEC_RECORD = SPEC_FRONT + """\
evidence:
  - {run: r-0041, test: checkout-happy-path, step: 3, observed: Place order (disabled)}
---
The **Place order** button on /checkout is disabled until "I accept the terms" is ticked.
"""

# Machines here are noisy (2 cores, shared): no per-example deadline, anywhere.
# No test depends on hypothesis's example database or on luck: every run draws the same
# examples (a failure found once is found again on any machine, and none is replayed
# from a .hypothesis/ folder an earlier run left).
settings.register_profile("memidex", deadline=None, database=None, derandomize=True)
settings.load_profile("memidex")


@pytest.fixture(autouse=True)
def _isolate(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
             ) -> Iterator[None]:
    """No test reads the developer's HOME, MEMIDEX_* variables or CI: the suite runs
    under CI=true, and a test of CI behaviour sets it explicitly."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for key in list(os.environ):
        if key.startswith("MEMIDEX_") or key == "CI":
            monkeypatch.delenv(key)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "memidex tests")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "tests@memidex.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "memidex tests")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "tests@memidex.invalid")
    yield


def git(root: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True)
    return out.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A fresh git repository with `memidex init` applied and product shop-web configured."""
    from memidex.store.layout import init_repository

    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    init_repository(root)
    (root / "memidex.toml").write_text('product = "shop-web"\n', encoding="utf-8")
    return root


@pytest.fixture
def sub_repo(tmp_path: Path) -> Path:
    """As :func:`repo`, but memidex in a sub-folder of the git repository (``qa/`` of a
    monorepo): git names paths from the repository's top, memidex from its own root."""
    from memidex.store.layout import init_repository

    top = tmp_path / "mono"
    root = top / "qa"
    root.mkdir(parents=True)
    git(top, "init", "-q")
    init_repository(root)
    (root / "memidex.toml").write_text('product = "shop-web"\n', encoding="utf-8")
    return root


@pytest.fixture(params=["top", "sub-folder"])
def any_repo(request: pytest.FixtureRequest) -> Path:
    """:func:`repo`, then :func:`sub_repo`."""
    name = "repo" if request.param == "top" else "sub_repo"
    path: Path = request.getfixturevalue(name)
    return path


def make_record(kind: str = "fact", anchor: str = "el:button:place-order",
                product: str = "shop-web", title: str = "Place order is disabled",
                body: str = "The Place order button is disabled until terms are accepted.",
                scope: dict[str, str] | None = None, anchors: tuple[str, ...] = (),
                status: str = "active", trust: Trust | None = None,
                valid: Valid | None = None) -> Record:
    scope = scope or {}
    rid = record_id(kind, anchor, product, scope)
    return Record(id=rid, kind=kind, status=status, product=product, anchor=anchor,
                  title=title, scope=tuple(sorted(scope.items())), anchors=tuple(sorted(anchors)),
                  trust=trust or Trust(), valid=valid or Valid(), body=body)


def write_record(root: Path, record: Record) -> Path:
    """Write a record file the way a person would (plain file write, no memidex)."""
    path = root / "agent-qa-knowledge/memory/records" / record.kind / f"{record.id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_record(record), encoding="utf-8")
    return path


def run_cli(root: Path, *args: str, input: str | None = None,
            check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the real `memidex` command in a subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    out = subprocess.run([sys.executable, "-m", "memidex", "--root", str(root), *args],
                         cwd=root, capture_output=True, text=True, input=input, env=env,
                         check=False)
    if check and out.returncode != 0:
        raise AssertionError(f"memidex {' '.join(args)} -> {out.returncode}\n{out.stderr}")
    return out


def integrity(db: object) -> str:
    """``PRAGMA integrity_check`` plus FTS5's own, on an open :class:`IndexDB` (tests only:
    production runs the O(N) ``quick_check``)."""
    conn = db.conn  # type: ignore[attr-defined]
    first = "; ".join(str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()[:3])
    try:
        conn.execute("INSERT INTO records_fts(records_fts) VALUES('integrity-check')")
    except sqlite3.DatabaseError as exc:
        return f"{first}; fts: {exc}"
    return first


def index_dump(root: Path) -> dict[str, Any]:
    """Every table of ``root``'s index (:meth:`memidex.index.db.IndexDB.dump`), to compare
    two ways of building it."""
    from memidex.app import Memidex
    from memidex.index.db import IndexDB

    m = Memidex(root)
    db = IndexDB.open(m.config.index_path)
    try:
        return db.dump()
    finally:
        db.close()
        m.close()
