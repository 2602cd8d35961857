"""The fenced staged writer: a crash at every protocol step, I/O faults, conflicts."""

from __future__ import annotations

import errno
import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lease_driver import (
    authority,
    change_set,
    copy_of,
    drive,
    expected_files,
    initial_records,
    knowledge,
    make_record,
    make_root,
    scratch,  # noqa: F401 - a fixture
    snapshot,
    store_for,
)
from memidex._testing import STEPS, crash_at, inject_io_fault
from memidex.errors import ConflictError, LeaseError, UnsafePathError
from memidex.records.codec import content_hash
from memidex.write.ledger import Ledger
from memidex.write.status import lease_status
from memidex.write.writer import writer_session

INITIAL = expected_files(initial_records())
FINAL = expected_files([make_record("keep"), make_record("update", 2), make_record("new"),
                        make_record("other")])


def assert_old_or_new(root: Path) -> None:
    """Every record file parses to exactly its old or its new version."""
    for path, data in snapshot(root).items():
        assert data in (INITIAL.get(path), FINAL.get(path)), path


def assert_clean(root: Path) -> None:
    folder = knowledge(root)
    assert not list((folder / "staging").glob("*"))
    assert lease_status(folder)["pending_journal"] == 0
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    with authority(root) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        epochs = [r[0] for r in conn.execute("SELECT epoch FROM applied ORDER BY rowid")]
    assert epochs == sorted(epochs)


@pytest.fixture
def base(scratch: Path) -> Path:  # noqa: F811 - the imported fixture
    """A repository holding the initial records, written through the lease."""
    root = make_root(scratch / "base")
    with writer_session(store_for(root), wait=0, ttl=30) as w:
        for record in initial_records():
            assert w.write(record)
    assert snapshot(root) == INITIAL
    return root


# --- crashes -----------------------------------------------------------------------------


def test_the_uninterrupted_run_passes_every_protocol_step(base: Path) -> None:
    code, evs = drive(copy_of(base, "trace"), "apply", "--trace")
    assert code == 0
    assert {e["step"] for e in evs if e["event"] == "step"} == set(STEPS)


def _crash_scenario(base: Path, name: str, spec: str, journaled: bool) -> str | None:
    root = copy_of(base, name)
    code, _ = drive(root, "apply", "--crash-at", spec)
    if code != 137:
        return f"{spec}: exit {code}, not the crash"
    assert_old_or_new(root)
    code, evs = drive(root, "recover")
    if code != 0:
        return f"{spec}: recovery exit {code} {evs[-1:]}"
    # A journaled change set is finished by the next holder alone.
    if snapshot(root) != (FINAL if journaled else INITIAL):
        return f"{spec}: recovery left {sorted(snapshot(root))}"
    code, evs = drive(root, "apply")
    if code != 0 or snapshot(root) != FINAL:
        return f"{spec}: the run after recovery gave exit {code}"
    assert_clean(root)
    return None


def test_a_crash_at_every_step_then_recovery_gives_the_uninterrupted_result(
        base: Path) -> None:
    code, evs = drive(copy_of(base, "trace"), "apply", "--trace")
    assert code == 0
    trace = [str(e["step"]) for e in evs if e["event"] == "step"]
    seen: Counter[str] = Counter()
    scenarios = []
    for i, name in enumerate(trace):
        seen[name] += 1
        # Each step the first time, and the per-op steps again for the third op (the
        # removal; for write.staged the last write). A crash *at* journal.written comes
        # after the change set is durable.
        if seen[name] in (1, 3):
            scenarios.append((f"{name}:{seen[name]}", "journal.written" in trace[: i + 1]))
    assert len(scenarios) >= len(STEPS)
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(_crash_scenario, base, f"crash{i}", spec, journaled)
                   for i, (spec, journaled) in enumerate(scenarios)]
        failures = [f.result() for f in futures]
    assert [f for f in failures if f] == []


def test_crash_at_accepts_step_numbers() -> None:
    with pytest.raises(ValueError):
        crash_at("99")
    with pytest.raises(ValueError):
        crash_at("no.such.step")
    crash_at("1:3")  # valid; removed again at once
    crash_at(None)


# --- I/O faults ----------------------------------------------------------------------------


@pytest.mark.parametrize(("op", "err"), [("write", errno.ENOSPC), ("fsync", errno.EIO),
                                         ("replace", errno.EIO), ("replace", errno.ENOSPC)])
def test_io_fault_at_each_call_fails_cleanly_and_a_retry_gives_the_clean_result(
        base: Path, op: str, err: int) -> None:
    for k in range(1, 200):
        root = copy_of(base, f"{op}-{err}-{k}")
        store = store_for(root)
        undo = inject_io_fault(op, k, err)
        failed = None
        try:
            with writer_session(store, wait=0, ttl=30) as w:
                w.apply(change_set(store))
        except OSError as exc:
            failed = exc
        finally:
            fired = undo()
        if failed is not None:
            assert failed.errno == err
        assert_old_or_new(root)
        assert not list((knowledge(root) / "staging").glob("*")), k  # nothing half-staged
        with writer_session(store, wait=0, ttl=30) as w:
            w.apply(change_set(store))
        assert snapshot(root) == FINAL, k
        assert_clean(root)
        # The ledger: one line per landed change set (3 of the base, this one), never two.
        ledger = Ledger(store.queue_dir)
        lines = [x for x in map(json.loads, ledger.file.read_bytes().splitlines())
                 if x["type"] == "change"]
        assert len(lines) == 4 and len({x["id"] for x in lines}) == 4, k
        assert ledger.scan()[1].damaged_lines == 0, k
        if not fired:
            assert failed is None
            break
    else:
        pytest.fail("the fault never stopped firing")
    assert k > 3  # several distinct calls were failed in turn


# --- the write API -------------------------------------------------------------------------


def test_an_equal_record_is_not_written_again(base: Path) -> None:
    store = store_for(base)
    with writer_session(store, wait=0, ttl=30) as w:
        assert not w.write(make_record("keep"))
        assert not w.remove("agent-qa-knowledge/memory/records/fact/nothing-here.md")
    with authority(base) as conn:
        assert conn.execute("SELECT count(*) FROM applied").fetchone()[0] == 3


def test_a_persons_edit_is_never_clobbered(base: Path) -> None:
    store = store_for(base)
    record = make_record("update", 2)
    target = store.record_path(record.kind, record.id)
    read_hash = content_hash(target.read_bytes())
    target.write_bytes(target.read_bytes() + b"\nA note a person added.\n")
    edited = target.read_bytes()
    with writer_session(store, wait=0, ttl=30) as w:
        with pytest.raises(ConflictError) as conflict:
            w.write(record, expected=read_hash)
        assert conflict.value.exit_code == 3
        new = make_record("brand-new")
        with pytest.raises(ConflictError):  # None: the file must not exist yet
            w.write(make_record("keep", 5), expected=None)
        assert w.write(new, expected=None)
        gone = store.rel(store.record_path("fact", make_record("gone").id))
        with pytest.raises(ConflictError):
            w.remove(gone, expected="sha256:" + "0" * 64)
        assert w.remove(gone, expected=content_hash(store.abspath(gone).read_bytes()))
    assert target.read_bytes() == edited
    assert_clean(base)


def test_a_change_set_that_meets_an_edit_on_replay_is_set_aside(base: Path) -> None:
    code, _ = drive(base, "apply", "--crash-at", "write.staged:1")
    assert code == 137
    store = store_for(base)
    first = make_record("new")
    target = store.record_path(first.kind, first.id)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("a person's own file\n")
    with writer_session(store, wait=0, ttl=30) as w:
        assert len(w.recovery.abandoned) == 1
    assert target.read_text() == "a person's own file\n"
    status = lease_status(knowledge(base))
    assert status["pending_journal"] == 0 and status["abandoned_journal"] == 1


@pytest.mark.parametrize("relpath", [
    "../outside.md", "/etc/passwd", "memidex.toml",
    "agent-qa-knowledge/memory/.epoch", "agent-qa-knowledge/memory/records/../.lease",
])
def test_remove_stays_inside_the_records_folder(base: Path, relpath: str) -> None:
    with writer_session(store_for(base), wait=0, ttl=30) as w:
        with pytest.raises(UnsafePathError):
            w.remove(relpath)
    assert (base / "memidex.toml").exists()


def test_a_closed_session_writes_nothing(base: Path) -> None:
    with writer_session(store_for(base), wait=0, ttl=30) as w:
        pass
    with pytest.raises(LeaseError):
        w.write(make_record("late"))
    assert snapshot(base) == INITIAL


def test_a_full_disk_after_the_change_set_landed_says_so_and_the_next_writer_finishes(
        base: Path) -> None:
    """The disk fills up after the records are in place (the ledger entry or the journal
    marks cannot be written): the error says the change set landed — never "no record was
    changed" — and the next writer finishes it from the journal."""
    from memidex._testing import at_step, set_step_hook
    from memidex.errors import NoSpaceError, from_os_error

    def full(_name: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    store = store_for(base)
    record = make_record("after-landing")
    at_step("ledger.written", full)
    try:
        with pytest.raises(OSError) as raised, \
                writer_session(store, wait=0, ttl=30) as w:
            w.write(record)
    finally:
        set_step_hook(None)
    err = from_os_error(raised.value)  # the one error map, as every adapter meets it
    assert isinstance(err, NoSpaceError)
    assert "landed" in err.message and "1 record file(s) changed" in err.message
    assert "no record was changed" not in f"{err.message} {err.hint}"
    assert "finishes the change set" in (err.hint or "")
    path = base / knowledge(base).relative_to(base) / "records"
    assert any(record.id in p.name for p in path.rglob("*.md"))  # it is in place
    with writer_session(store, wait=0, ttl=30):
        pass  # recovery: the journal's change set is finished
    assert assert_clean(base) is None
    entries = [e for e in Ledger(store.queue_dir).entries() if e.outcome == "landed"]
    assert sum(1 for e in entries for op in e.ops if record.id in op.path) == 1
