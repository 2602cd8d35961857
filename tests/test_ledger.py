"""The change ledger, and change sets that become visible whole (real subprocesses)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lease_driver import (
    change_set,
    copy_of,
    drive,
    driver_cmd,
    expected_files,
    initial_records,
    knowledge,
    make_record,
    make_root,
    scratch,  # noqa: F401 - a fixture
    snapshot,
    store_for,
    wait_stopped,
)
from memidex._testing import STEPS
from memidex.app import Memidex
from memidex.records.codec import content_hash, dump_record
from memidex.store import visibility
from memidex.write.journal import Journal
from memidex.write.ledger import Ledger
from memidex.write.writer import Remove, Write, writer_session


def ledger_of(root: Path) -> Ledger:
    return Ledger(knowledge(root) / "queue")


def raw_ids(root: Path) -> Counter[str]:
    """How many lines of the ledger file name each change set (duplicates show here)."""
    out: Counter[str] = Counter()
    path = ledger_of(root).file
    if path.exists():
        for line in path.read_bytes().splitlines():
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if data.get("type") == "change":
                out[data["id"]] += 1
    return out


@pytest.fixture
def base(scratch: Path) -> Path:  # noqa: F811 - the imported fixture
    root = make_root(scratch / "base")
    code, _ = drive(root, "setup")
    assert code == 0
    return root


# --- what the ledger records --------------------------------------------------------------


def test_each_landed_change_set_is_recorded_and_its_previous_bytes_restore_the_file(
        scratch: Path) -> None:  # noqa: F811
    root = make_root(scratch / "r")
    store = store_for(root)
    old = make_record("update")
    target = store.record_path(old.kind, old.id)
    target.parent.mkdir(parents=True, exist_ok=True)
    by_hand = dump_record(old).encode() + b"\nA person's note, not canonical.\n"
    target.write_bytes(by_hand)
    gone = make_record("gone")
    gone_path = store.record_path(gone.kind, gone.id)
    gone_path.write_bytes(dump_record(gone).encode())
    gone_bytes = gone_path.read_bytes()
    with writer_session(store, wait=0, ttl=30) as w:
        w.apply([Write(make_record("update", 2)), Write(make_record("new")),
                 Remove(store.rel(gone_path))], command="knowledge supersede",
                run_id="r-0042", ordinal=42)
        w.write(make_record("update", 3))
    ledger = ledger_of(root)
    first, second = ledger.entries()
    assert (first.command, first.run_id, first.ordinal, first.landed) == (
        "knowledge supersede", "r-0042", 42, True)
    assert second.run_id is None and second.ordinal is None
    assert first.epoch == second.epoch >= 1
    ops = {op.record_id: op for op in first.ops}
    assert set(ops) == {old.id, make_record("new").id, gone.id}
    update = ops[old.id]
    assert (update.op, update.before) == ("write", content_hash(by_hand))
    assert update.after == content_hash(dump_record(make_record("update", 2)).encode())
    assert ops[make_record("new").id].before is None
    assert (ops[gone.id].op, ops[gone.id].after) == ("remove", None)
    # The previous bytes give the file back byte for byte, the person's note included.
    prev = ledger.previous_bytes(update)
    assert prev == by_hand
    assert ledger.previous_bytes(ops[gone.id]) == gone_bytes
    assert ledger.previous_bytes(ops[make_record("new").id]) is None
    assert ledger.after_bytes(second.ops[0]) == target.read_bytes()
    target.write_bytes(prev)
    assert target.read_bytes() == by_hand
    # Found by record and by run.
    assert [e.id for e in ledger.for_record(old.id)] == [first.id, second.id]
    assert [e.id for e in ledger.for_record(gone.id)] == [first.id]
    assert [e.id for e in ledger.for_run("r-0042")] == [first.id]
    # A damaged blob is refused, never handed back as the previous bytes.
    assert update.before is not None
    [pack] = [p for p in ledger.blobs_dir.glob("pack-*.pack")
              if by_hand in p.read_bytes()]  # the change set's one pack
    raw = pack.read_bytes()
    pack.write_bytes(raw.replace(by_hand, b"x" * len(by_hand)))  # same length, other bytes
    with pytest.raises(LookupError):
        ledger.previous_bytes(update)


def test_a_crash_at_every_step_leaves_one_entry_per_landed_change_set(base: Path) -> None:
    code, evs = drive(copy_of(base, "trace"), "apply", "--trace")
    assert code == 0
    trace = [str(e["step"]) for e in evs if e["event"] == "step"]
    assert set(trace) == set(STEPS)
    seen: Counter[str] = Counter()
    scenarios = []
    for i, name in enumerate(trace):
        seen[name] += 1
        if seen[name] == 1 or (seen[name] == 3 and name.startswith("write.")):
            scenarios.append((f"{name}:{seen[name]}", "journal.written" in trace[: i + 1]))
    before = raw_ids(base)
    assert sum(before.values()) == len(initial_records())  # setup: one per record

    def scenario(n: int, spec: str, journaled: bool) -> str | None:
        root = copy_of(base, f"crash{n}")
        code, _ = drive(root, "apply", "--run-id", "r-7", "--ordinal", "7",
                        "--crash-at", spec)
        if code != 137:
            return f"{spec}: exit {code}"
        code, _ = drive(root, "recover")
        if code != 0:
            return f"{spec}: recovery exit {code}"
        ids = raw_ids(root)
        new = [i for i in ids if i not in before]
        if any(n != 1 for n in ids.values()):
            return f"{spec}: duplicated ledger lines {ids}"
        if len(new) != (1 if journaled else 0):
            return f"{spec}: {len(new)} new entries (journaled: {journaled})"
        if journaled:
            [entry] = [e for e in ledger_of(root).entries() if e.id == new[0]]
            final = {op.path: op.after for op in entry.ops}
            if not entry.landed or entry.run_id != "r-7" or entry.ordinal != 7:
                return f"{spec}: entry {entry}"
            for path, after in final.items():
                if store_for(root).current_hash(root / path) != after:
                    return f"{spec}: {path} is not what the ledger says"
        return None

    with ThreadPoolExecutor(max_workers=4) as pool:
        failures = list(pool.map(lambda a: scenario(*a), [(n, s, j) for n, (s, j)
                                                        in enumerate(scenarios)]))
    assert [f for f in failures if f] == []


def test_an_abandoned_change_set_is_never_recorded_as_landed(base: Path) -> None:
    code, _ = drive(base, "apply", "--crash-at", "write.installed:1")
    assert code == 137
    store = store_for(base)
    # A person edits the second file of the half-installed change set meanwhile.
    second = make_record("update")
    path = store.record_path(second.kind, second.id)
    path.write_bytes(path.read_bytes() + b"\nedited by hand\n")
    with writer_session(store, wait=0, ttl=30) as w:
        assert len(w.recovery.abandoned) == 1
        [cs_id] = w.recovery.abandoned
    entries = [e for e in ledger_of(base).entries() if e.id == cs_id]
    [entry] = entries
    assert not entry.landed and entry.outcome == "abandoned"
    # It names just the file the crashed writer did change, so it can be rolled back.
    first = make_record("new")
    assert [op.record_id for op in entry.ops] == [first.id]
    # The interrupted install is settled: readers no longer report it.
    assert visibility.generation(knowledge(base)).find('"recovered"') >= 0


def test_random_sigkills_never_duplicate_or_lose_an_entry(scratch: Path) -> None:  # noqa: F811
    root = make_root(scratch / "kills")
    rng = random.Random(8)
    for round_ in range(6):
        proc = subprocess.Popen(driver_cmd(root, "write", "--prefix", f"k{round_ % 2}",
                                           "--count", "12", "--version", str(round_)),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # The kill's moment counts from the first write that landed, not from the start:
        # on a slow machine the start alone took longer than the whole range, and nothing
        # landed. The other eleven writes (a lease each) are what the kill falls among.
        assert proc.stdout is not None
        while b'"wrote"' not in (line := proc.stdout.readline()):
            assert line, proc.communicate()
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    code, _ = drive(root, "recover")
    assert code == 0
    ids = raw_ids(root)
    assert ids and all(n == 1 for n in ids.values()), ids
    assert Journal(knowledge(root) / "queue").count_pending() == 0
    # Replaying the ledger's writes gives exactly the files on disk.
    last: dict[str, str | None] = {}
    for entry in ledger_of(root).entries():
        assert entry.landed
        for op in entry.ops:
            last[op.path] = op.after
    store = store_for(root)
    on_disk = {store.rel(p): content_hash(p.read_bytes())
               for p in (knowledge(root) / "records").rglob("*.md")}
    assert {p: h for p, h in last.items() if h is not None} == on_disk


# --- a lost or damaged ledger --------------------------------------------------------------


def test_writes_go_on_when_the_ledger_is_deleted_or_damaged(base: Path) -> None:
    store = store_for(base)
    ledger = ledger_of(base)
    shutil.rmtree(ledger.dir)
    with writer_session(store, wait=0, ttl=30) as w:
        assert w.write(make_record("after-delete"))
    [entry] = ledger.entries()
    assert entry.ops[0].record_id == make_record("after-delete").id
    assert ledger.previous_bytes(entry.ops[0]) is None
    # Garbage and a torn last line: skipped and counted; the next entry is whole.
    with open(ledger.file, "ab") as fh:
        fh.write(b"not json at all\n{\"v\": 1, \"type\": \"change\", \"id\": \"torn")
    with writer_session(store, wait=0, ttl=30) as w:
        assert w.write(make_record("after-garbage"))
    entries, stats = ledger.scan()
    assert [e.ops[0].record_id for e in entries] == [
        make_record("after-delete").id, make_record("after-garbage").id]
    assert stats.damaged_lines == 2 and stats.starts == 1


def test_a_ledger_line_whose_numbers_overflow_is_a_damaged_line(base: Path) -> None:
    """json reads 1e400 as infinity; int() of it would raise OverflowError: the line is
    damage, counted and skipped like any other."""
    store = store_for(base)
    ledger = ledger_of(base)
    with writer_session(store, wait=0, ttl=30) as w:
        assert w.write(make_record("before-overflow"))
    before, stats_before = ledger.scan()
    [line] = ledger.file.read_bytes().splitlines()[-1:]
    with open(ledger.file, "ab") as fh:
        fh.write(line.replace(b'"epoch":', b'"epoch":1e400,"was":') + b"\n")
    entries, stats = ledger.scan()
    assert entries == before
    assert stats.damaged_lines == stats_before.damaged_lines + 1


def test_a_ledger_that_cannot_be_written_stops_writes_loudly_then_catches_up(
        base: Path) -> None:
    store = store_for(base)
    ledger = ledger_of(base)
    ledger.file.unlink()
    ledger.file.mkdir()  # nothing can be appended to it
    with pytest.raises(IsADirectoryError):
        with writer_session(store, wait=0, ttl=30) as w:
            w.write(make_record("blocked"))
    # The records landed, and the change set waits in the journal for its entry.
    assert store.record_path("fact", make_record("blocked").id).exists()
    assert Journal(store.queue_dir).count_pending() == 1
    ledger.file.rmdir()
    with writer_session(store, wait=0, ttl=30) as w:
        assert len(w.recovery.replayed) == 1
    [entry] = ledger.entries()
    assert entry.ops[0].record_id == make_record("blocked").id
    assert Journal(store.queue_dir).count_pending() == 0


# --- change sets become visible whole ------------------------------------------------------


def _pair_generations(hits: list[tuple[str, str]]) -> dict[str, int]:
    """``pair-a v12`` → {"pair-a": 12}."""
    out = {}
    for title, _ in hits:
        name, _, version = title.rpartition(" v")
        out[name] = int(version)
    return out


def test_a_reader_never_sees_half_a_change_set(scratch: Path) -> None:  # noqa: F811
    root = make_root(scratch / "pairs")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    assert drive(root, "pairs", "--prefix", "pair", "--count", "1")[0] == 0
    with Memidex(root) as m:
        m.rebuild_index()
    writer = subprocess.Popen(driver_cmd(root, "pairs", "--prefix", "pair", "--count", "400",
                                         "--version", "2"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    looks = 0
    seen: set[int] = set()
    cli = [sys.executable, "-m", "memidex", "--root", str(root), "knowledge", "search",
           "know", "--all-products", "--json"]
    try:
        with Memidex(root) as m:
            m.reading.recheck_seconds = 0
            while writer.poll() is None or looks < 20:
                if looks % 10 == 9:  # the CLI: a new process, its git call prefetched
                    out = subprocess.run(cli, capture_output=True, text=True)
                    assert out.returncode == 0, out.stderr
                    hits = [(h["title"], h["id"]) for h in json.loads(out.stdout)["results"]]
                else:
                    result = m.search("know", all_products=True)
                    assert result.level == "lexical-only", result.note
                    hits = [(h.title, h.id) for h in result.results]
                gens = _pair_generations(hits)
                assert set(gens) == {"pair-a", "pair-b"}, hits
                assert gens["pair-a"] == gens["pair-b"], f"half a change set: {gens}"
                seen.add(gens["pair-a"])
                looks += 1
    finally:
        writer.kill() if writer.poll() is None else None
        _, err = writer.communicate()
    assert writer.returncode == 0, err
    assert looks >= 20 and len(seen) > 3  # the reader really ran alongside the writer


def test_a_reader_reports_an_install_left_half_done(base: Path) -> None:
    from memidex.index.build import rebuild
    from memidex.index.db import IndexDB
    from memidex.index.refresh import refresh

    store = store_for(base)
    index = store.index_dir / "memidex.sqlite"
    rebuild(store, index)
    # A writer killed between the first and the second file of one change set.
    code, _ = drive(base, "apply", "--crash-at", "write.installed:1")
    assert code == 137
    [pending] = Journal(store.queue_dir).pending()
    db = IndexDB.open(index, write=True)
    try:
        assert refresh(store, db).interrupted == pending.id
        code, _ = drive(base, "recover")  # the next writer rolls it forward
        assert code == 0
        assert refresh(store, db).interrupted is None
    finally:
        db.close()


def test_a_reader_does_not_hang_on_a_paused_installer(base: Path) -> None:
    proc = subprocess.Popen(driver_cmd(base, "apply", "--pause-at", "write.installed:1"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if '"paused"' in line:
                break
        wait_stopped(proc.pid)
        started = time.monotonic()
        with visibility.shared(knowledge(base), wait=0.3) as vis:
            assert not vis.locked and vis.interrupted is not None
        assert time.monotonic() - started < 30  # a hang is what this catches, not speed
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
    with visibility.shared(knowledge(base)) as vis:
        assert vis.locked and vis.interrupted is None


def test_the_writer_waits_for_readers_holding_the_lock(base: Path) -> None:
    store = store_for(base)
    with writer_session(store, wait=0, ttl=30) as w:
        w.install_wait = 0.2
        with visibility.shared(knowledge(base)):
            from memidex.errors import LeaseError

            with pytest.raises(LeaseError):
                w.apply(change_set(store))
        assert snapshot(base) == expected_files(initial_records())  # nothing installed
        assert w.apply(change_set(store)) == [True, True, True, True]
    assert Journal(store.queue_dir).count_pending() == 0


def test_purge_forgets_the_record_in_the_ledger_and_keeps_the_rest(scratch: Path) -> None:  # noqa: F811
    from memidex.write.route import purge_traces

    root = make_root(scratch / "purge")
    store = store_for(root)
    gone, kept = make_record("secret"), make_record("kept")
    with writer_session(store, wait=0, ttl=30) as w:
        w.apply([Write(gone), Write(kept)])
        w.write(make_record("secret", 2))
        purge_traces(store, gone.id)
    ledger = ledger_of(root)
    [entry] = ledger.entries()
    [op] = entry.ops
    assert op.record_id == kept.id and ledger.after_bytes(op) == dump_record(kept).encode()
    assert gone.id.encode() not in ledger.file.read_bytes()
    assert ledger.all_blobs() == [dump_record(kept).encode()]
    on_disk = b"".join(p.read_bytes() for p in ledger.blobs_dir.rglob("*") if p.is_file())
    assert b"secret" not in on_disk


def test_a_blob_saved_loose_by_an_earlier_version_is_not_packed_again(tmp_path: Path) -> None:
    from memidex.write.ledger import Ledger

    ledger = Ledger(tmp_path / "queue")
    old, new = b"saved loose, as earlier versions did\n", b"new bytes\n"
    loose = ledger.blob_path(content_hash(old))
    loose.parent.mkdir(parents=True)
    loose.write_bytes(old)
    # the caller's hashes are the ones kept, one per content
    assert ledger.save_blobs([old, new], [content_hash(old), content_hash(new)]) == [
        content_hash(old), content_hash(new)]
    [pack] = ledger.blobs_dir.glob("pack-*.pack")
    assert new in pack.read_bytes() and old not in pack.read_bytes()
    assert ledger.blob(content_hash(old)) == old and ledger.blob(content_hash(new)) == new
    # with no loose folder at all, everything goes into the pack
    other = Ledger(tmp_path / "other")
    assert other.save_blobs([old]) == [content_hash(old)]
    [pack] = other.blobs_dir.glob("pack-*.pack")
    assert old in pack.read_bytes()
