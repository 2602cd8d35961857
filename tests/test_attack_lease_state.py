"""Hardening, the lease and the state files under attack: a writer that lost its lease
writes nothing (records or state), and no clock can expire a live lease.

Real subprocesses (tests/lease_driver.py and the `memidex` command), real SIGSTOP/SIGCONT.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lease_driver import drive, driver_cmd, make_record, make_root, store_for
from memidex.errors import LeaseHeldError
from memidex.write.writer import writer_session


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_root(tmp_path / "repo")


def test_a_wall_clock_ahead_cannot_take_a_live_lease(root: Path) -> None:
    # a process whose clock runs 60 s ahead sees the holder's heartbeat as 60 s old by the
    # wall clock; the machine's monotonic clock says it is fresh: the lease is not free
    store = store_for(root)
    with writer_session(store, wait=0, ttl=30) as holder:
        holder.write(make_record("mine"))
        ahead = time.time() + 60
        with pytest.raises(LeaseHeldError):
            with writer_session(store, wait=0, ttl=30, clock=lambda: ahead):
                raise AssertionError("took a live lease")
        assert holder.lease.heartbeat()
        holder.write(make_record("still-mine"))


def test_a_process_with_its_clock_ahead_does_not_run_beside_a_live_holder(root: Path) -> None:
    # the same through real processes: a live holder (its heartbeat thread beating), and a
    # writer whose clock is 60 s ahead and a TTL of 2 s: it gives up (exit 3), never writes
    holder = subprocess.Popen(driver_cmd(root, "hold", "--seconds", "6", "--ttl", "2"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        first = json.loads(holder.stdout.readline())
        assert first["event"] == "granted"
        code, events = drive(root, "write", "--prefix", "ahead", "--ttl", "2",
                             "--clock-offset", "60", "--wait", "1")
        assert code == 3, events
        assert events[-1]["type"] == "LeaseHeldError"
        assert not list((root / "agent-qa-knowledge/memory/records/fact").glob("*.md"))
    finally:
        out, err = holder.communicate(timeout=60)
    assert holder.returncode == 0, err
    released = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert any(e["event"] == "released" and e["epoch"] == first["epoch"] and not e["lost"]
               for e in released)


def test_cli_rebuild_with_a_clock_ahead_refuses_under_a_live_daemon(root: Path) -> None:
    # `memidex daemon` holds the lease; a maintenance command from a process whose wall
    # clock is ahead (libfaketime-style, here through the lease's own clock) refuses
    code = ("import sys, time\n"
            "import memidex.write.lease as lease\n"
            "real = time.time\n"
            "orig = lease.Lease.__init__\n"
            "def init(self, *a, **k):\n"
            "    k['clock'] = lambda: real() + 60\n"
            "    orig(self, *a, **k)\n"
            "lease.Lease.__init__ = init\n"
            "from memidex.cli.main import main\n"
            "sys.exit(main(['--root', sys.argv[1], 'knowledge', 'rebuild-index']))\n")
    daemon = subprocess.Popen([sys.executable, "-m", "memidex", "--root", str(root), "daemon"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert daemon.stderr is not None
        seen = []  # the warm server may speak first: wait for the daemon's own line
        for line in daemon.stderr:
            seen.append(line)
            if "holds the writer lease" in line:
                break
        assert "holds the writer lease" in seen[-1], seen
        out = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 3, out.stderr
        assert "writer lease is held by pid" in out.stderr
        assert daemon.poll() is None
    finally:
        daemon.terminate()
        daemon.communicate(timeout=60)
    assert daemon.returncode == 0


# --- a stale ingest, paused past its TTL, writes no state file ------------------------------


def _learning_repo(tmp: Path, ttl: float) -> Path:
    from conftest import git
    from memidex.store.layout import init_repository

    root = tmp / "learn"
    root.mkdir()
    git(root, "init", "-q")
    init_repository(root)
    (root / "memidex.toml").write_text(
        f'product = "shop-web"\nlease_ttl_seconds = {ttl}\n', encoding="utf-8")
    return root


def _a_run(tmp: Path, run_id: str, test_id: str, page: str) -> Path:
    from learnkit import a_run, a_test, step, write_run

    run = a_run(run_id, [a_test(test_id, [step(1, f"el:heading:{test_id}", f"{test_id} shown",
                                                anchors=(page,))])])
    return write_run(tmp / "runs-in", run)


def _tests_file(root: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads(
        (root / ".agent-qa/runs/tests-shop-web.json").read_text(encoding="utf-8"))
    return data


def test_an_ingest_paused_before_its_tests_file_is_fenced_and_loses_nothing(
        tmp_path: Path) -> None:
    # A is SIGSTOPped with its tests file staged (its records landed); past the TTL (2 s)
    # B takes the lease and ingests. A wakes up: the fence refuses its stale tests file
    # (exit 3), B's fold is intact, and ingesting A again folds A in beside it.
    import os
    import signal

    from conftest import run_cli
    from lease_driver import wait_stopped

    root = _learning_repo(tmp_path, ttl=2)
    run_a = _a_run(tmp_path, "r-a", "alpha-test", "page:/alpha")
    run_b = _a_run(tmp_path, "r-b", "beta-test", "page:/beta")
    stale = subprocess.Popen(driver_cmd(root, "cli", "--pause-at-state", "tests-*.json",
                                        "--", "runs", "ingest", str(run_a)),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert stale.stdout is not None
        paused = json.loads(stale.stdout.readline())
        assert paused["event"] == "paused" and paused["path"].endswith("tests-shop-web.json")
        wait_stopped(stale.pid)
        other = run_cli(root, "runs", "ingest", str(run_b))  # waits out the TTL, then takes it
        assert other.returncode == 0, other.stderr
        assert "beta-test" in _tests_file(root)["tests"]  # type: ignore[operator]
    finally:
        os.kill(stale.pid, signal.SIGCONT)
        out, err = stale.communicate(timeout=120)
    assert stale.returncode == 3, (out, err)
    assert "Traceback" not in err and err.startswith("error: "), err
    assert "lease" in err
    tests = _tests_file(root)["tests"]
    assert "beta-test" in tests and "alpha-test" not in tests  # type: ignore[operator]
    brief = run_cli(root, "brief", "beta-test")
    assert brief.returncode == 0, brief.stderr
    assert "no past runs" not in brief.stdout and "page:/beta" in brief.stdout
    # A again: it finishes (the records it landed are kept), and its fold joins B's
    again = run_cli(root, "runs", "ingest", str(run_a), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["resumed"]
    tests = _tests_file(root)["tests"]
    assert {"alpha-test", "beta-test"} <= set(tests)  # type: ignore[arg-type]
    for test_id, page in (("alpha-test", "page:/alpha"), ("beta-test", "page:/beta")):
        brief = run_cli(root, "brief", test_id)
        assert "no past runs" not in brief.stdout and page in brief.stdout, brief.stdout
