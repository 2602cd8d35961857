"""The writer lease: real subprocesses (tests/lease_driver.py), real SQLite, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from lease_driver import (
    authority,
    drive,
    driver_cmd,
    events,
    expected_files,
    knowledge,
    make_record,
    make_root,
    scratch,  # noqa: F401 - a fixture
    snapshot,
    store_for,
    wait_stopped,
)
from memidex.errors import FencedError, LeaseHeldError
from memidex.write.authority import AUTHORITY_FILE, EPOCH_FILE, LEASE_FILE
from memidex.write.lease import Lease
from memidex.write.procs import kernel_clock, pid_start_time
from memidex.write.status import lease_status
from memidex.write.writer import writer_session


def spawn(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(driver_cmd(root, *args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def read_event(proc: subprocess.Popen[str], name: str) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            assert proc.stderr is not None
            raise AssertionError(f"driver ended before {name!r}: {proc.stderr.read()}")
        event = json.loads(line)
        if event["event"] == name:
            return dict(event)


def finish(proc: subprocess.Popen[str]) -> tuple[int, list[dict[str, Any]]]:
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    return proc.returncode, events(out)


def kill(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.communicate(timeout=30)



def db_epoch(root: Path) -> int:
    with authority(root) as conn:
        return int(conn.execute("SELECT epoch FROM lease").fetchone()[0])


def staging_files(root: Path) -> list[str]:
    folder = knowledge(root) / "staging"
    return sorted(os.listdir(folder)) if folder.exists() else []



@pytest.fixture
def root(scratch: Path) -> Path:  # noqa: F811 - the imported fixture
    return make_root(scratch / "repo")


# --- many writers --------------------------------------------------------------------


def test_eight_writers_fifty_writes_each(root: Path) -> None:
    procs = [spawn(root, "write", "--prefix", f"p{i}", "--count", "50", "--per-session", "1")
             for i in range(8)]
    grants: dict[int, list[int]] = defaultdict(list)
    for proc in procs:
        code, evs = finish(proc)
        assert code == 0, evs[-1:]
        for ev in evs:
            if ev["event"] == "granted":
                grants[ev["pid"]].append(ev["epoch"])

    names = [f"p{i}-{n}" for i in range(8) for n in range(50)]
    assert snapshot(root) == expected_files([make_record(n) for n in names])
    all_epochs = [e for es in grants.values() for e in es]
    assert len(all_epochs) == 400 and len(set(all_epochs)) == 400  # one holder per epoch
    for es in grants.values():
        assert es == sorted(es)
    with authority(root) as conn:
        rows = conn.execute("SELECT epoch, path, sha256 FROM applied ORDER BY rowid").fetchall()
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        holder = conn.execute("SELECT token, epoch FROM lease").fetchone()
    assert len(rows) == 400 and len({r[1] for r in rows}) == 400
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)  # commit order = epoch order
    assert {r[0] for r in rows} == set(all_epochs)
    files = snapshot(root)
    from memidex.records.codec import content_hash

    base = "agent-qa-knowledge/memory/records/"
    assert all(content_hash(files[p.removeprefix(base)]) == h for _, p, h in rows)
    assert holder == (None, max(all_epochs))
    assert staging_files(root) == []
    assert int((knowledge(root) / EPOCH_FILE).read_text()) == max(all_epochs)
    assert lease_status(knowledge(root))["pending_journal"] == 0


# --- pauses, kills and takeovers -------------------------------------------------------


def test_paused_holder_is_fenced_after_a_takeover(root: Path) -> None:
    drive(root, "recover")
    a = spawn(root, "write", "--prefix", "a", "--ttl", "1", "--pause-at", "write.staged")
    a_epoch = read_event(a, "granted")["epoch"]
    read_event(a, "paused")
    wait_stopped(a.pid)
    assert len(staging_files(root)) == 1
    started = time.monotonic()
    code, evs = drive(root, "write", "--prefix", "b", "--ttl", "1", "--wait", "10")
    assert code == 0
    granted = evs[0]
    assert granted["epoch"] == a_epoch + 1
    assert granted["took_over"] == "stale heartbeat"
    assert granted["staging_removed"] == 1 and granted["skipped_live"] == 1
    assert time.monotonic() - started >= 0.5  # it had to wait for the heartbeat to age

    os.kill(a.pid, signal.SIGCONT)
    code, evs = finish(a)
    assert code == 3
    error = next(e for e in evs if e["event"] == "error")
    assert error["type"] == "FencedError"
    assert error["message"].startswith(f"writer lease lost: epoch {a_epoch} was superseded")
    assert snapshot(root) == expected_files([make_record("b-0")])  # nothing of a landed
    assert staging_files(root) == []
    with authority(root) as conn:
        assert conn.execute("SELECT count(*) FROM applied WHERE epoch = ?",
                            (a_epoch,)).fetchone()[0] == 0
    assert lease_status(knowledge(root))["pending_journal"] == 0


def test_pause_inside_the_transaction_holds_off_the_takeover(root: Path) -> None:
    a = spawn(root, "write", "--prefix", "a", "--ttl", "1", "--pause-at", "write.checked")
    a_epoch = read_event(a, "granted")["epoch"]
    read_event(a, "paused")
    wait_stopped(a.pid)
    time.sleep(1.1)  # past a's TTL: only the open transaction protects it now
    code, evs = drive(root, "write", "--prefix", "b", "--ttl", "1", "--wait", "0.6",
                    "--busy-timeout", "0.2")
    assert code == 3
    error = evs[-1]
    assert error["type"] == "LeaseHeldError"
    assert error["message"].startswith(
        f"writer lease is held by pid {a.pid} (epoch {a_epoch}, heartbeat ")
    assert db_epoch(root) == a_epoch
    assert int((knowledge(root) / EPOCH_FILE).read_text()) == a_epoch

    os.kill(a.pid, signal.SIGCONT)
    code, _ = finish(a)
    assert code == 0
    assert snapshot(root) == expected_files([make_record("a-0")])
    code, evs = drive(root, "write", "--prefix", "b", "--ttl", "1", "--wait", "5")
    assert code == 0 and evs[0]["epoch"] == a_epoch + 1
    with authority(root) as conn:
        rows = conn.execute("SELECT step_id, epoch, path FROM applied").fetchall()
        assert len(rows) == 2, rows


def test_killed_holder_is_taken_over_inside_the_ttl(root: Path) -> None:
    a = spawn(root, "write", "--prefix", "a", "--ttl", "30", "--pause-at", "write.staged")
    a_epoch = read_event(a, "granted")["epoch"]
    read_event(a, "paused")
    wait_stopped(a.pid)
    a.kill()  # not reaped yet: a zombie counts as dead too
    started = time.monotonic()
    code, evs = drive(root, "write", "--prefix", "b", "--ttl", "30", "--wait", "120")
    took = time.monotonic() - started
    kill(a)
    assert code == 0 and took < 60  # taken over at once, not after the --wait
    granted = evs[0]
    assert granted["epoch"] == a_epoch + 1 and granted["took_over"] == "holder is dead"
    assert granted["staging_removed"] == 1 and granted["replayed"] == 1
    assert staging_files(root) == []
    # a's journaled change set is finished by the next holder (roll forward)
    assert snapshot(root) == expected_files([make_record("a-0"), make_record("b-0")])


def test_a_live_pid_with_another_start_time_counts_as_dead(root: Path) -> None:
    store = store_for(root)
    with writer_session(store, wait=0, ttl=30):
        pass
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        start = pid_start_time(sleeper.pid)
        assert start is not None

        def claim(pid_start: int) -> None:
            with authority(root) as conn:
                conn.execute("UPDATE lease SET token = 'theirs', pid = ?, pid_start = ?, "
                             "heartbeat = ?, ttl = 30, boot_id = (SELECT boot_id FROM lease) "
                             "WHERE id = 1", (sleeper.pid, pid_start, time.time()))
                conn.commit()

        claim(start)
        with pytest.raises(LeaseHeldError) as held:
            with writer_session(store, wait=0.2, ttl=30):
                pass
        assert held.value.message.startswith(f"writer lease is held by pid {sleeper.pid} ")
        claim(start + 1)
        with writer_session(store, wait=0, ttl=30) as w:
            assert w.lease.took_over == "holder's pid was reused"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_maintenance_refuses_at_once_under_a_live_holder(root: Path) -> None:
    drive(root, "write", "--prefix", "x")
    holder = spawn(root, "hold", "--seconds", "30", "--ttl", "1")
    epoch = read_event(holder, "granted")["epoch"]
    granted_at = time.monotonic()
    try:
        before = snapshot(root)
        time.sleep(1.2)  # longer than the TTL: the heartbeat keeps it
        started = time.monotonic()
        code, evs = drive(root, "write", "--prefix", "y", "--maintenance", "--ttl", "1",
                          "--wait", "120")
        assert time.monotonic() - started < 60  # refused at once, not after the --wait
        assert code == 3
        assert evs[-1]["message"].startswith(
            f"writer lease is held by pid {holder.pid} (epoch {epoch}, heartbeat ")
        assert snapshot(root) == before
        status = lease_status(knowledge(root))
        assert status["held"] and status["pid"] == holder.pid and status["alive"]
        # the heartbeat went on after the grant (its age is below the time since then)
        assert status["epoch"] == epoch
        assert status["heartbeat_age_seconds"] < time.monotonic() - granted_at
    finally:
        kill(holder)
    status = lease_status(knowledge(root))
    assert status["held"] and not status["alive"]


def test_injected_clock_takes_over_a_stale_heartbeat_and_fences_the_old_holder(
        root: Path) -> None:
    # a stale heartbeat: the wall clock, the monotonic clock and the kernel's all say so
    store = store_for(root)
    with writer_session(store, wait=0, ttl=30) as old:
        old.write(make_record("first"))
        later, mono_later = time.time() + 31, time.monotonic() + 31
        kernel_later = (kernel_clock() or 0.0) + 31
        with writer_session(store, wait=0, ttl=30, clock=lambda: later,
                            mono=lambda: mono_later, kernel=lambda: kernel_later) as new:
            assert new.epoch == old.epoch + 1
            assert new.lease.took_over == "stale heartbeat"
            assert not old.lease.heartbeat()
            with pytest.raises(FencedError):
                old.write(make_record("stale"))
            new.write(make_record("second"))
    assert snapshot(root) == expected_files([make_record("first"), make_record("second")])


def test_a_second_session_in_the_same_process_waits_for_the_first(root: Path) -> None:
    store = store_for(root)
    with writer_session(store, wait=0, ttl=30) as w:
        with pytest.raises(LeaseHeldError) as held:
            with writer_session(store, wait=0.1, ttl=30):
                pass
        assert held.value.message.startswith(
            f"writer lease is held by pid {os.getpid()} (epoch {w.epoch}, heartbeat 0.")
        assert held.value.exit_code == 3


def test_lease_status_never_writes(root: Path) -> None:
    drive(root, "write", "--prefix", "x")
    folder = knowledge(root)

    def listing() -> dict[str, tuple[int, int]]:
        return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_size)
                for p in folder.rglob("*")}

    before = listing()
    status = lease_status(folder)
    assert listing() == before
    assert status["authority"] == "ok" and not status["held"] and status["epoch"] == 1
    assert lease_status(root / "nowhere")["authority"] == "missing"


# --- the authority database ------------------------------------------------------------


@pytest.mark.parametrize("damage", ["delete", "garbage", "truncate"])
def test_damaged_authority_db_refuses_writes_then_is_recreated_higher(
        root: Path, damage: str) -> None:
    store = store_for(root)
    for n in range(3):
        with writer_session(store, wait=0, ttl=30) as w:
            w.write(make_record(f"r{n}"))
    db = knowledge(root) / AUTHORITY_FILE
    with writer_session(store, wait=0, ttl=30) as w:
        epoch = w.epoch
        if damage == "delete":
            db.unlink()  # its -wal and -shm stay behind, as after a careless `rm`
        elif damage == "garbage":
            with open(db, "r+b") as fh:  # same inode: SQLite's cache may not notice yet
                fh.write(os.urandom(8192))
        else:
            os.truncate(db, 0)
        if damage != "garbage":  # seen by `stat` alone: refused at once
            with pytest.raises(FencedError) as fenced:
                w.write(make_record("refused"))
            assert "the authority database" in fenced.value.message
        # the next process to open it recreates it, above every earlier epoch
        code, evs = drive(root, "write", "--prefix", "next")
        assert code == 0 and evs[0]["epoch"] > epoch
        with pytest.raises(FencedError) as fenced:
            w.write(make_record("refused"))
        assert "the authority database" in fenced.value.message
    assert staging_files(root) == []
    with writer_session(store, wait=0, ttl=30) as w:
        assert w.epoch == evs[0]["epoch"] + 1
    with authority(root) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    assert meta["created_because"] == ("missing" if damage == "delete" else "damaged")
    aside = [p.name for p in knowledge(root).iterdir() if ".damaged-" in p.name]
    assert len(aside) == (0 if damage == "delete" else 1)
    names = ["r0", "r1", "r2", "next-0"]
    assert snapshot(root) == expected_files([make_record(n) for n in names])


def test_deleted_db_with_a_lowered_epoch_file_still_goes_higher(root: Path) -> None:
    for _ in range(4):
        drive(root, "recover")
    folder = knowledge(root)
    assert db_epoch(root) == 4
    (folder / AUTHORITY_FILE).unlink()
    (folder / EPOCH_FILE).write_text("1\n")  # .lease still says 4
    code, evs = drive(root, "recover")
    assert code == 0 and evs[0]["epoch"] > 4


def test_lowered_epoch_file_and_garbled_lease_copy_change_nothing(root: Path) -> None:
    drive(root, "recover")
    drive(root, "recover")
    folder = knowledge(root)
    (folder / EPOCH_FILE).write_text("0\n")
    (folder / LEASE_FILE).write_bytes(b"\x00{not json")
    code, evs = drive(root, "recover")
    assert code == 0 and evs[0]["epoch"] == 3
    assert (folder / EPOCH_FILE).read_text() == "3\n"
    assert json.loads((folder / LEASE_FILE).read_text())["epoch"] == 3


def test_a_fresh_folder_starts_at_epoch_one(root: Path) -> None:
    lease = Lease(knowledge(root), ttl=5)
    assert lease.acquire(wait=0) == 1
    assert lease.release()
    assert lease_status(knowledge(root))["epoch"] == 1
