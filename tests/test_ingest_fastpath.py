"""What the one-shot ingest's fast path keeps: the writer's visibility lock without
filelock, a confirm planned from the bytes the planner read (the fence still checks the
file), the collector paused only for the ingest, and no search or vectors import when the
model cache holds no model."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lease_driver import (
    knowledge,
    make_record,
    make_root,
    scratch,  # noqa: F401 - a fixture
    snapshot,
    store_for,
)
from memidex.errors import ConflictError
from memidex.records.codec import content_hash, dump_record
from memidex.store import visibility
from memidex.write.status import lease_status
from memidex.write.writer import Write, writer_session

# --- the writer's visibility lock --------------------------------------------------------

_HOLD = """
import sys, time
from pathlib import Path
from memidex.store import visibility
with visibility.exclusive(Path(sys.argv[1]), timeout=5):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(folder: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(folder), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_the_exclusive_lock_excludes_another_process_and_times_out(scratch: Path) -> None:  # noqa: F811
    folder = scratch / "k"
    folder.mkdir()
    proc = _holder(folder, 30)
    try:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="stayed locked"):
            with visibility.exclusive(folder, timeout=0.2):
                pass
        assert time.monotonic() - t0 >= 0.2
        with pytest.raises(TimeoutError):  # timeout 0: one try
            with visibility.exclusive(folder, timeout=0):
                pass
        with visibility.shared(folder, wait=0.1) as vis:  # a reader waits, then goes on
            assert not vis.locked
    finally:
        proc.kill()
        proc.communicate()
    # the holder died: the lock died with it; the lock file stays (never unlinked)
    with visibility.exclusive(folder, timeout=1) as ex:
        assert ex.installing is None
    assert (folder / visibility.LOCK_FILE).is_file()
    with visibility.shared(folder, wait=0) as vis:
        assert vis.locked


def test_the_exclusive_lock_waits_for_a_holder_that_lets_go(scratch: Path) -> None:  # noqa: F811
    folder = scratch / "k"
    folder.mkdir()
    proc = _holder(folder, 0.3)
    try:
        with visibility.exclusive(folder, timeout=10):
            assert proc.wait(5) == 0  # got it once the holder let go
    finally:
        proc.communicate()
    assert proc.returncode == 0


def test_a_symlink_at_the_lock_file_is_refused(scratch: Path) -> None:  # noqa: F811
    folder = scratch / "k"
    (folder / "queue").mkdir(parents=True)
    outside = scratch / "outside"
    (folder / visibility.LOCK_FILE).symlink_to(outside)
    with pytest.raises(Exception, match="symlink"):
        with visibility.exclusive(folder, timeout=0):
            pass
    assert not outside.exists()


# --- a confirm planned from the bytes the planner read -----------------------------------


def _base(scratch: Path) -> Path:  # noqa: F811
    root = make_root(scratch / "base")
    with writer_session(store_for(root), wait=0, ttl=30) as w:
        assert w.write(make_record("update"))
    return root


def test_a_write_given_the_bytes_it_replaces_lands_like_one_that_reads_them(
        scratch: Path) -> None:  # noqa: F811
    root = _base(scratch)
    store = store_for(root)
    old = make_record("update")
    target = store.record_path(old.kind, old.id)
    data = target.read_bytes()
    with writer_session(store, wait=0, ttl=30) as w:
        assert w.apply([Write(make_record("update", 2), content_hash(data), old, None, data)])
    new = make_record("update", 2)
    assert snapshot(root)[f"{new.kind}/{new.id}.md"] == dump_record(new).encode()
    with writer_session(store, wait=0, ttl=30) as w:  # the ledger kept the bytes before
        (entry,) = w.ledger.for_record(old.id)[-1:]
        assert w.ledger.previous_bytes(entry.ops[0]) == data


def test_a_file_edited_after_the_planner_read_it_is_never_clobbered(
        scratch: Path) -> None:  # noqa: F811
    root = _base(scratch)
    store = store_for(root)
    old = make_record("update")
    target = store.record_path(old.kind, old.id)
    data = target.read_bytes()
    target.write_bytes(data + b"\nA note a person added.\n")  # after the planner's read
    edited = target.read_bytes()
    with writer_session(store, wait=0, ttl=30) as w:
        with pytest.raises(ConflictError, match="changed on disk"):
            w.apply([Write(make_record("update", 2), content_hash(data), old, None, data)])
    assert target.read_bytes() == edited
    folder = knowledge(root)
    assert not list((folder / "staging").glob("*"))
    assert lease_status(folder)["pending_journal"] == 0


def test_bytes_that_do_not_match_the_expected_hash_are_not_trusted(
        scratch: Path) -> None:  # noqa: F811
    """Write.data is used only when it is what ``expected`` names: otherwise the file is
    read, so the conflict is found before anything is journaled."""
    root = _base(scratch)
    store = store_for(root)
    old = make_record("update")
    target = store.record_path(old.kind, old.id)
    data = target.read_bytes()
    with writer_session(store, wait=0, ttl=30) as w:
        with pytest.raises(ConflictError):
            w.apply([Write(make_record("update", 2), "sha256:" + "0" * 64, old, None,
                           data)])
    assert target.read_bytes() == data


# --- the ingest: the collector, the imports ----------------------------------------------


def _run(run_id: str, tests: int = 3) -> dict[str, object]:
    return {"run_id": run_id, "product": "shop", "build_tag": "b1", "ci": False,
            "tests": [{"test_id": f"t-{i}", "verdict": "pass", "steps": [
                {"index": 0, "action": "goto", "target": f"page:/p-{i}", "anchors": [],
                 "observed": f"Page {i}", "check": {"kind": "assert-visible",
                                                     "passed": True}}]}
                      for i in range(tests)]}


def _repo(scratch: Path) -> Path:  # noqa: F811
    root = scratch / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    subprocess.run([sys.executable, "-m", "memidex", "--root", str(root), "init",
                    "--product", "shop"], check=True, capture_output=True, env=env)
    return root


def test_the_collector_is_paused_for_an_ingest_and_resumed_after_it(
        scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    from memidex.app import Memidex
    from memidex.config import load_config
    from memidex.errors import MemidexError

    monkeypatch.setenv("MEMIDEX_WARM", "0")
    monkeypatch.delenv("CI", raising=False)
    root = _repo(scratch)
    run = scratch / "run.json"
    run.write_text(json.dumps(_run("r1")), encoding="utf-8")
    m = Memidex(config=load_config(root))
    seen: list[bool] = []
    original = m._learning._ingest

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(gc.isenabled())
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(m._learning, "_ingest", spy)
    assert gc.isenabled()
    assert m.ingest(run).ordinal == 1
    assert seen == [False] and gc.isenabled()
    bad = scratch / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(MemidexError):
        m.ingest(bad)
    assert gc.isenabled()  # resumed after an error too
    gc.disable()
    try:  # a caller that paused it keeps it paused
        m.ingest(run)
        assert not gc.isenabled()
    finally:
        gc.enable()


_IMPORTS = """
import json, sys
from memidex.cli.main import main
code = main(["--root", sys.argv[1], "runs", "ingest", sys.argv[2]])
print(json.dumps({"code": code, "semantic": "memidex.app.semantic" in sys.modules,
                  "vectors": "memidex.vectors.cache" in sys.modules,
                  "filelock": "filelock" in sys.modules}))
"""


@pytest.mark.parametrize("cache", ["missing", "empty", "model"])
def test_no_search_or_vectors_import_without_a_model(scratch: Path, cache: str) -> None:  # noqa: F811
    root = _repo(scratch)
    run = scratch / "run.json"
    run.write_text(json.dumps(_run("r1")), encoding="utf-8")
    models = scratch / "models"
    if cache != "missing":
        models.mkdir()
    if cache == "model":  # a folder (not a usable model): the real check runs, finds none
        (models / "some-model").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")
           and k != "CI"}
    env.update(MEMIDEX_WARM="0", MEMIDEX_MODEL_CACHE_DIR=str(models))
    out = subprocess.run([sys.executable, "-c", _IMPORTS, str(root), str(run)], env=env,
                         capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["code"] == 0, out.stderr
    assert got["semantic"] == got["vectors"] == (cache == "model")
    assert not got["filelock"]  # the lock of every write is fcntl's
    assert len(list((root / "agent-qa-knowledge/memory/records").rglob("*.md"))) > 0


def test_the_run_digest_is_the_hash_of_the_whole_runs_canonical_json() -> None:
    """digest_of hashes test by test: the very bytes of one dump of the whole run (a run
    ingested before keeps its digest, so the same run again stays a no-op)."""
    import hashlib

    from memidex.app.ingest import digest_of
    from memidex.evidence import build_run, validate_run
    from memidex.store.fsio import dump_json

    data = _run("r-digest", tests=4)
    tests = data["tests"]
    assert isinstance(tests, list)
    tests[1].update(verdict="fail", title="Checkout — ünïcode",
                    failure={"message": "expected 'Place order'", "hint": None, "step": 0},
                    attempts=[{"status": "fail", "error": "boom", "duration_ms": 3}])
    assert validate_run(data) == []
    run = build_run(data)
    whole = "sha256:" + hashlib.sha256(dump_json(run.as_dict())).hexdigest()
    assert digest_of(run) == whole
    empty = build_run({**data, "tests": []})
    assert digest_of(empty) == "sha256:" + hashlib.sha256(
        dump_json(empty.as_dict())).hexdigest()


def test_the_index_after_an_ingest_holds_what_is_on_disk_by_the_next_command(
        scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """The refresh right after an ingest builds the rows of the files it wrote from the
    bytes it wrote (unread). A same-size edit of one of them before the next command is
    still seen by that command's refresh: the paths stay named, and their stat is too
    recent to be trusted, so their bytes are hashed."""
    from memidex.app import Memidex
    from memidex.config import load_config
    from memidex.index.build import rebuild

    monkeypatch.setenv("MEMIDEX_WARM", "0")
    monkeypatch.delenv("CI", raising=False)
    root = _repo(scratch)
    run = scratch / "run.json"
    run.write_text(json.dumps(_run("r1", tests=5)), encoding="utf-8")
    m = Memidex(config=load_config(root))
    assert m.ingest(run).ordinal == 1
    files = sorted((root / "agent-qa-knowledge/memory/records").rglob("*.md"))
    assert files

    def rows(mx: Memidex) -> dict[str, str]:
        db = mx.reading.open()
        assert db is not None
        return {p: sha for p, sha in db.conn.execute("SELECT path, sha256 FROM files")}

    on_disk = {str(p.relative_to(root)): content_hash(p.read_bytes()) for p in files}
    assert rows(m) == on_disk
    m.close()
    target = files[0]
    data = target.read_bytes()
    edited = data.replace(b"Page 0", b"Pgae 0") if b"Page 0" in data else data[:-2] + b"x\n"
    assert len(edited) == len(data) and edited != data
    target.write_bytes(edited)
    m2 = Memidex(config=load_config(root))
    got = rows(m2)
    m2.close()
    assert got[str(target.relative_to(root))] == content_hash(edited)
    fresh = scratch / "fresh.sqlite"
    rebuild(m2.store, fresh)
    import sqlite3

    with sqlite3.connect(fresh) as conn:
        assert dict(conn.execute("SELECT path, sha256 FROM files")) == got
