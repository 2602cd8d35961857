"""The journal: change sets survive a crash, saved model answers are never asked again."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from lease_driver import (
    driver_cmd,
    events,
    knowledge,
    make_root,
    scratch,  # noqa: F401 - a fixture
    snapshot,
)
from memidex.write.journal import Journal, Op, Owner
from memidex.write.procs import current_process

OWNER = Owner(os.getpid(), None, "", "", 7)


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "queue")


def test_a_change_set_is_durable_before_it_runs_and_gone_after(journal: Journal) -> None:
    ops = [Op("write", "a.md", None, "sha256:1", "text"), Op("remove", "b.md", "sha256:2")]
    cs = journal.begin("add", ops, OWNER, step="s1")
    [pending] = journal.pending()
    assert pending.id == cs.id and pending.ops == tuple(ops) and pending.step == "s1"
    assert pending.owner == OWNER and pending.done == frozenset()
    journal.mark_done(cs, 0, 8)
    with open(journal.dir / f"{cs.id}.done", "a") as fh:
        fh.write('{"i": 1, "ep')  # a torn last line is simply not done
    assert journal.pending()[0].done == frozenset({0})
    assert journal.max_epoch() == 8
    journal.finish(cs)
    assert journal.pending() == [] and journal.count_pending() == 0


def test_change_sets_come_back_oldest_first(journal: Journal) -> None:
    ids = [journal.begin(f"c{i}", [Op("remove", f"{i}.md", "h")], OWNER).id for i in range(5)]
    assert [cs.id for cs in journal.pending()] == ids


def test_unreadable_entries_are_set_aside_and_temp_files_cleaned(journal: Journal) -> None:
    cs = journal.begin("add", [Op("remove", "x.md", "h")], OWNER)
    (journal.dir / "00000000000000000001-1-bad.json").write_text("{not json")
    (journal.dir / "00000000000000000002-1-orphan.done").write_text('{"i": 0, "epoch": 99}\n')
    (journal.dir / f"{cs.id}.json.123.abcd.tmp").write_text("half")
    journal.cleanup()
    assert sorted(p.name for p in journal.dir.iterdir() if p.is_file()) == [
        "00000000000000000001-1-bad.json", f"{cs.id}.json"]
    assert [c.id for c in journal.pending()] == [cs.id]
    assert journal.count_abandoned() == 1
    assert journal.max_epoch() == OWNER.epoch


def test_answers_are_saved_loaded_and_forgotten(journal: Journal) -> None:
    assert journal.load_answer("s") is None and not journal.has_answer("s")
    journal.begin_step("s", {"candidate": 1})
    assert journal.pending_steps() == ["s"]
    journal.save_answer("s", {"title": "T", "n": [1, 2]})
    assert journal.load_answer("s") == {"title": "T", "n": [1, 2]}
    assert not journal.step_done("s")
    journal.mark_step_done("s")
    assert journal.step_done("s") and journal.pending_steps() == []
    journal.forget_steps(["s"])
    assert not journal.has_answer("s") and not journal.step_done("s")
    assert not any(journal.steps_dir.iterdir())


def test_a_damaged_answer_counts_as_not_saved(journal: Journal) -> None:
    journal.save_answer("s", "yes")
    [path] = list(journal.steps_dir.iterdir())
    path.write_bytes(b"\xff\xfe garbage")
    assert journal.load_answer("s") is None


def test_the_owner_of_a_change_set_is_alive_only_while_its_process_runs() -> None:
    me = current_process()
    assert Owner(me.pid, me.start, me.boot_id, me.host, 1).alive()
    assert not Owner(me.pid, (me.start or 0) + 1, me.boot_id, me.host, 1).alive()
    assert not Owner(me.pid, me.start, "another-boot", me.host, 1).alive()


# --- model steps across crashes ----------------------------------------------------------


def curate(root: Path, calls: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(driver_cmd(root, "curate", "--count", "12", "--calls", str(calls),
                                     *extra), capture_output=True, text=True, timeout=60)


def call_counts(calls: Path) -> Counter[str]:
    return Counter(calls.read_text().splitlines()) if calls.exists() else Counter()


def test_a_saved_answer_is_applied_without_calling_the_model_again(scratch: Path) -> None:  # noqa: F811
    root = make_root(scratch / "repo")
    calls = scratch / "calls.log"
    assert curate(root, calls, "--crash-at", "journal.written:3").returncode == 137
    assert call_counts(calls) == Counter({"curate/0": 1, "curate/1": 1, "curate/2": 1})
    assert curate(root, calls).returncode == 0
    assert set(call_counts(calls).values()) == {1}  # nobody was asked twice
    assert len(call_counts(calls)) == 12
    assert len(snapshot(root)) == 12
    assert not list((knowledge(root) / "queue" / "journal").glob("*.json"))


def test_random_kills_during_a_batch_then_finishing_equals_an_uninterrupted_run(
        scratch: Path) -> None:  # noqa: F811
    clean = make_root(scratch / "clean")
    assert curate(clean, scratch / "clean.log").returncode == 0
    want = snapshot(clean)
    assert len(want) == 12

    root = make_root(scratch / "repo")
    calls = scratch / "calls.log"
    rng = random.Random(20261129)
    kills = 0
    for _ in range(4):
        proc = subprocess.Popen(driver_cmd(root, "curate", "--count", "12", "--calls",
                                           str(calls)),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        proc.stdout.readline()  # granted: the batch is running
        time.sleep(rng.uniform(0.0, 0.12))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.communicate(timeout=30)
        # every file that exists is complete and already final
        for path, data in snapshot(root).items():
            assert data == want[path], path
    done = curate(root, calls)
    assert done.returncode == 0, done.stderr
    assert kills >= 2
    assert snapshot(root) == want
    counts = call_counts(calls)
    assert set(counts) == {f"curate/{i}" for i in range(12)}
    assert max(counts.values()) <= 1 + kills
    assert sum(counts.values()) <= 12 + kills
    assert not [e for e in events(done.stdout) if e["event"] == "error"]
