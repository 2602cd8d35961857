"""The team index under load and faults (docs/team-index.md, "Snapshots").

* 20 concurrent readers while a push of 1,000 changed records lands: every answer is
  exactly what its snapshot's commit gives when nothing else runs (all old or all new),
  and none fails.
* The server SIGKILLed mid-push (the postmaster, then whatever of the cluster is left, as
  a crash leaves it): after a restart the served snapshot is the old commit or the new
  one, whole — never part of the push — and the next push completes.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import git
from memidex.errors import MemidexError
from memidex.records.digest import content_hash
from memidex.search.ranking import SearchQuery
from memidex.teamindex import Session, TeamIndex, push
from pgserver import PgServer, started

RECORDS = "agent-qa-knowledge/memory/records"
QUERIES = [SearchQuery("newmark", "shop-web", limit=50), SearchQuery("newmark", None, limit=5),
           SearchQuery("button page", "shop-web"), SearchQuery("timeout retry", None),
           SearchQuery("newmark checkout", "shop-web", statuses=())]


def _clone(corpus_repo: Path, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "-b", "main", str(corpus_repo), str(dest)],
                   check=True, capture_output=True)
    return dest


def _change(root: Path, count: int) -> str:
    """Rewrite ``count`` records (a sentence added to each body, which puts the word
    "newmark" in them); commit; return the commit."""
    files = sorted((root / RECORDS).rglob("*.md"))[:count]
    for f in files:
        f.write_bytes(f.read_bytes().rstrip(b"\n") + b" Newmark seen here.\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", f"{count} changed")
    return git(root, "rev-parse", "HEAD").strip()


def _answer(s: Session) -> tuple[object, ...]:
    """Several statements in one session: searches, a listing, a brief's lookups."""
    out: list[object] = [tuple((h.id, h.score) for h in s.search(q)) for q in QUERIES]
    out.append(len(s.list_records(product="shop-admin")))
    hits, _ = s.anchor_hits(["page:/checkout"], cap=100)
    out.append(tuple(v.id for v in s.versions_of({r for _a, r in hits})))
    return tuple(out)


def test_twenty_readers_see_whole_snapshots_while_1000_records_land(
        corpus_repo: Path, pg_url: str, tmp_path: Path) -> None:
    root = _clone(corpus_repo, tmp_path / "repo")
    old = git(root, "rev-parse", "HEAD").strip()
    push(root, pg_url)
    expected: dict[str, tuple[object, ...]] = {}
    with TeamIndex.connect(pg_url) as ti, ti.session() as s:
        expected[old] = _answer(s)
    new = _change(root, 1000)
    answers: list[tuple[str, tuple[object, ...], float, float]] = []
    failures: list[BaseException] = []
    stop = threading.Event()
    lock = threading.Lock()

    def reader() -> None:
        try:
            with TeamIndex.connect(pg_url) as ti:
                for _ in range(2000):  # bounded; the push ends the loop well before
                    if stop.is_set():
                        return
                    t0 = time.monotonic()
                    with ti.session() as s:
                        got = (s.snapshot.commit, _answer(s))
                    with lock:
                        answers.append((*got, t0, time.monotonic()))
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(20)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    t_push = time.monotonic()
    report = push(root, pg_url)
    t_done = time.monotonic()
    time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert not failures, failures[:3]
    assert report.action == "incremental" and report.changed == 1000
    with TeamIndex.connect(pg_url) as ti, ti.session() as s:
        expected[new] = _answer(s)
    assert expected[new] != expected[old]
    during = [a for a in answers if a[2] < t_done and a[3] > t_push]
    assert during, "no answer overlapped the push"
    assert {a[0] for a in answers} == {old, new}
    for commit, answer, _t0, _t1 in answers:
        assert answer == expected[commit], commit


@pytest.fixture
def own_server() -> Iterator[PgServer]:
    """A cluster of its own: this test kills it."""
    server = started()
    try:
        yield server
    finally:
        server.remove()


def _fingerprint(url: str) -> tuple[str, list[tuple[str, str]]] | None:
    """(commit, [(path, content hash)]) of the snapshot served, or None if none is."""
    try:
        with TeamIndex.connect(url) as ti, ti.session() as s:
            rows = s._q("SELECT path, sha256 FROM memidex.records WHERE gen = %s ORDER BY path",
                        (s.gen,))
            return s.snapshot.commit, [(str(p), str(h)) for p, h in rows]
    except MemidexError:
        return None


def _files_at(root: Path, commit: str) -> list[tuple[str, str]]:
    """(path, content hash) of every record file of ``commit``, as git holds it."""
    from memidex.teamindex.gitread import BlobReader, GitTree

    blobs = GitTree(root, commit, RECORDS, "policies").records()
    datas = BlobReader(root).read([b.sha for b in blobs])
    return sorted((b.path, content_hash(d)) for b, d in zip(blobs, datas, strict=True))


def test_server_killed_mid_push_serves_a_whole_snapshot_and_the_next_push_completes(
        corpus_repo: Path, own_server: PgServer, tmp_path: Path) -> None:
    server = own_server
    url = server.url()
    root = _clone(corpus_repo, tmp_path / "repo")
    commits = [git(root, "rev-parse", "HEAD").strip()]
    git(root, "branch", "ci")
    t0 = time.monotonic()
    push(root, url, branch="ci")
    full_seconds = time.monotonic() - t0
    commits.append(_change(root, 1000))
    whole = {c: (c, _files_at(root, c)) for c in commits}
    died = 0
    # kill during a full load (a rebuild of the branch) and during incremental pushes, at
    # different moments of each
    for target, rewind, delay in ((commits[1], False, 0.3),
                                  (commits[0], True, 0.5 * full_seconds)):
        git(root, "branch", "-f", "ci", target)
        before = _fingerprint(url)
        outcome: list[object] = []
        pusher = threading.Thread(target=_try_push, args=(root, url, rewind, outcome))
        pusher.start()
        time.sleep(delay)
        server.kill()
        pusher.join(timeout=60)
        died += isinstance(outcome[0], MemidexError)
        server.start()
        after = _fingerprint(url)
        assert after in (before, whole[target]), "a part of a push is served"
        report = push(root, url, branch="ci", rewind=rewind)
        assert report.action in ("incremental", "rebuilt", "full", "unchanged")
        assert _fingerprint(url) == whole[target]
    assert died >= 1, "no kill landed inside a push"


def _try_push(root: Path, url: str, rewind: bool, outcome: list[object]) -> None:
    try:
        outcome.append(push(root, url, branch="ci", rewind=rewind))
    except MemidexError as exc:
        outcome.append(exc)
