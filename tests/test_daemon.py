"""``memidex daemon`` and one writer at a time, with real processes and real signals."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import make_record, run_cli, write_record

KNOWLEDGE = "agent-qa-knowledge/memory"
FACTS = f"{KNOWLEDGE}/records/fact"


@pytest.fixture
def ttl_repo(repo: Path) -> Path:
    """The `repo` fixture with a 3 s lease TTL."""
    with (repo / "memidex.toml").open("a", encoding="utf-8") as f:
        f.write("lease_ttl_seconds = 3\n")
    return repo


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}


class Daemon:
    def __init__(self, root: Path, *args: str) -> None:
        self.root = root
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memidex", "--root", str(root), "daemon", "--json", *args],
            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
        self.pid = self.proc.pid
        deadline = time.monotonic() + 15
        marker = root / KNOWLEDGE / "queue/daemon.json"
        while time.monotonic() < deadline:
            if marker.exists():
                try:
                    data = json.loads(marker.read_text())
                except ValueError:
                    data = {}
                if data.get("pid") == self.pid:
                    self.epoch = int(data["epoch"])
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise AssertionError(f"the daemon did not start: {self.proc.stderr.read()}")  # type: ignore[union-attr]

    def finish(self, timeout: float = 10) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    """Every daemon a test starts is killed at the end, whatever happens."""
    started: list[Daemon] = []
    yield started
    for d in started:
        if d.proc.poll() is None:
            os.kill(d.pid, signal.SIGCONT)
        d.stop()


def _start(daemons: list[Daemon], root: Path) -> Daemon:
    d = Daemon(root)
    daemons.append(d)
    return d


def _add(root: Path, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli(root, "knowledge", "add", "--kind", "fact", "--anchor", f"page:/{name}",
                   "--title", f"{name} title", "--body", f"What we know about {name}.",
                   "--json", *extra)


def _epoch(root: Path) -> int:
    return int((root / KNOWLEDGE / ".epoch").read_text())


def _files(root: Path, *folders: str) -> dict[str, bytes]:
    out = {}
    for folder in folders:
        for p in sorted((root / folder).rglob("*")):
            if p.is_file():
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


def test_maintenance_refuses_at_once_under_a_daemon_and_changes_nothing(
        repo: Path, daemons: list[Daemon]) -> None:
    write_record(repo, make_record())
    run_cli(repo, "knowledge", "rebuild-index", check=True)
    d = _start(daemons, repo)
    before = _files(repo, f"{KNOWLEDGE}/records", f"{KNOWLEDGE}/index", "policies")
    started = time.monotonic()
    out = run_cli(repo, "knowledge", "rebuild-index")
    assert out.returncode == 3
    assert out.stderr.startswith(f"error: writer lease is held by pid {d.pid} (epoch "
                                 f"{d.epoch}, heartbeat ")
    purge = run_cli(repo, "knowledge", "purge", make_record().id, "--wait", "120")
    assert purge.returncode == 3 and f"held by pid {d.pid}" in purge.stderr
    # refused at once, not after --wait: a bound no loaded machine comes near
    assert time.monotonic() - started < 60
    assert _files(repo, f"{KNOWLEDGE}/records", f"{KNOWLEDGE}/index", "policies") == before
    os.kill(d.pid, signal.SIGTERM)
    code, report, _ = d.finish()
    assert code == 0 and json.loads(report)["applied"] == []


def test_record_commands_under_a_daemon_are_written_by_the_daemon(
        repo: Path, daemons: list[Daemon]) -> None:
    d = _start(daemons, repo)
    added = json.loads(_add(repo, "checkout", "--wait", "10").stdout)
    assert added["change"] == "added"
    confirmed = run_cli(repo, "knowledge", "confirm", added["id"], "--run-ordinal", "3",
                        "--json", check=True)
    assert json.loads(confirmed.stdout)["change"] == "confirmed"
    text = (repo / added["path"]).read_text()
    assert "confirmations: 1" in text and "last_confirmed: 3" in text
    os.kill(d.pid, signal.SIGTERM)
    code, report, err = d.finish()
    assert code == 0, err
    data = json.loads(report)
    assert [a["command"] for a in data["applied"]] == ["knowledge add", "knowledge confirm"]
    assert all(a["ok"] for a in data["applied"]) and data["stopped"] == "SIGTERM"
    with sqlite3.connect(repo / KNOWLEDGE / ".writer-authority.sqlite") as conn:
        epochs = {row[0] for row in conn.execute("SELECT epoch FROM applied")}
    assert epochs == {d.epoch}  # every write was the daemon's
    assert list((repo / KNOWLEDGE / "queue/corrections").iterdir()) == []


def test_sigterm_releases_the_lease_for_the_next_writer_at_once(
        repo: Path, daemons: list[Daemon]) -> None:
    d = _start(daemons, repo)
    os.kill(d.pid, signal.SIGTERM)
    code, _, err = d.finish()
    assert code == 0 and "writer lease released" in err
    assert json.loads((repo / KNOWLEDGE / ".lease").read_text())["pid"] is None
    assert not (repo / KNOWLEDGE / "queue/daemon.json").exists()
    out = _add(repo, "after-daemon", "--wait", "0")
    assert out.returncode == 0, out.stderr
    assert _epoch(repo) == d.epoch + 1


def test_sigkill_does_not_block_the_next_writer(repo: Path, daemons: list[Daemon]) -> None:
    d = _start(daemons, repo)
    os.kill(d.pid, signal.SIGKILL)
    d.proc.wait()
    out = _add(repo, "after-kill", "--wait", "0")
    assert out.returncode == 0, out.stderr
    assert _epoch(repo) == d.epoch + 1


def test_a_paused_daemon_is_taken_over_and_writes_nothing_after_it_resumes(
        ttl_repo: Path, daemons: list[Daemon]) -> None:
    from memidex.config import load_config
    from memidex.store.files import Store
    from memidex.write.inbox import Queue, encode_change
    from memidex.write.writer import Write

    d = _start(daemons, ttl_repo)
    os.kill(d.pid, signal.SIGSTOP)
    # Queued first (the daemon still looks live), then applied by the command itself
    # once the paused daemon's heartbeat is older than the TTL.
    out = _add(ttl_repo, "during-pause", "--wait", "15")
    assert out.returncode == 0, out.stderr
    assert _epoch(ttl_repo) > d.epoch
    corrections = ttl_repo / KNOWLEDGE / "queue/corrections"
    assert corrections.is_dir() and list(corrections.glob("*.item.json")) == []
    after_takeover = _files(ttl_repo, f"{KNOWLEDGE}/records")
    store = Store(load_config(ttl_repo))
    late = make_record(anchor="page:/late", title="queued for the stale daemon")
    item = Queue(store.queue_dir).submit("knowledge add",
                                         {"changes": [encode_change(store, Write(late))]})
    os.kill(d.pid, signal.SIGCONT)
    code, _, err = d.finish(timeout=15)
    assert code == 3, err
    assert "error: writer lease lost" in err
    assert _files(ttl_repo, f"{KNOWLEDGE}/records") == after_takeover
    assert Queue(store.queue_dir).item_path(item).exists()  # left for the next applier
    assert list((ttl_repo / KNOWLEDGE / "staging").iterdir()) == []


def test_a_queued_correction_times_out_and_stays_for_the_daemon(
        repo: Path, daemons: list[Daemon]) -> None:
    d = _start(daemons, repo)  # the default 30 s TTL: a short pause keeps the lease
    os.kill(d.pid, signal.SIGSTOP)
    out = _add(repo, "slow", "--wait", "1")
    assert out.returncode == 3
    assert out.stderr.startswith(f"error: the daemon (pid {d.pid}) did not apply the queued "
                                 "knowledge add within 1s")
    items = list((repo / KNOWLEDGE / "queue/corrections").glob("*.item.json"))
    assert len(items) == 1
    os.kill(d.pid, signal.SIGCONT)
    deadline = time.monotonic() + 10
    target = list((repo / FACTS).glob("fact-page-slow-*.md"))
    while not target and time.monotonic() < deadline:
        time.sleep(0.05)
        target = list((repo / FACTS).glob("fact-page-slow-*.md"))
    assert target and "slow title" in target[0].read_text()
    os.kill(d.pid, signal.SIGTERM)
    code, report, _ = d.finish()
    assert code == 0 and [a["ok"] for a in json.loads(report)["applied"]] == [True]


def test_daemon_once_applies_what_is_queued_and_exits(repo: Path) -> None:
    from memidex.config import load_config
    from memidex.store.files import Store
    from memidex.write.inbox import Queue, encode_change
    from memidex.write.writer import Write

    store = Store(load_config(repo))
    queue = Queue(store.queue_dir)
    records = [make_record(anchor=f"page:/q{i}", title=f"queued {i}") for i in range(3)]
    for r in records:
        queue.submit("knowledge add", {"changes": [encode_change(store, Write(r, None))]})
    existing = make_record(anchor="page:/exists", title="already here")
    write_record(repo, existing)
    clash = make_record(anchor="page:/exists", title="written as new, exists meanwhile")
    # a conflict
    queue.submit("knowledge add", {"changes": [encode_change(store, Write(clash, None))]})
    out = run_cli(repo, "daemon", "--once", "--json", check=True)
    report = json.loads(out.stdout)
    assert [a["ok"] for a in report["applied"]] == [True, True, True, False]
    assert report["failed"] == 1 and report["stopped"] == "once"
    assert "changed on disk" in report["applied"][3]["error"]
    assert "already here" in (repo / FACTS / f"{existing.id}.md").read_text()
    for r in records:
        assert (repo / FACTS / f"{r.id}.md").exists()
    assert queue.pending() == []
    assert json.loads((repo / KNOWLEDGE / ".lease").read_text())["pid"] is None


WRITER = """
import sys
from memidex.cli.main import main
root, name = sys.argv[1], sys.argv[2]
for i in range(10):
    code = main(["--root", root, "knowledge", "add", "--kind", "fact",
                 "--anchor", f"page:/{name}-{i}", "--title", f"{name} {i}",
                 "--body", f"Record {i} of writer {name}.", "--wait", "30"])
    if code != 0:
        sys.exit(code)
"""


def test_eight_processes_times_ten_adds_land_exactly_once(repo: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(repo), f"w{n}"], cwd=repo,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=_env()) for n in range(8)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    files = sorted((repo / FACTS).glob("*.md"))
    assert len(files) == 80
    titles = sorted(f.read_text().split("title: ", 1)[1].split("\n", 1)[0] for f in files)
    assert titles == sorted(f"w{n} {i}" for n in range(8) for i in range(10))
    assert run_cli(repo, "knowledge", "check").returncode == 0
    listed = json.loads(run_cli(repo, "knowledge", "list", "--json", check=True).stdout)
    ids = [r["id"] for r in listed["records"]]
    assert len(ids) == len(set(ids)) == 80
    assert list((repo / KNOWLEDGE / "staging").iterdir()) == []
