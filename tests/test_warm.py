"""The warm path (issue 21): a running ``memidex daemon`` answers the CLI's reading
commands (and ``runs ingest``) over its socket with the bytes a one-shot run prints; an
edit is always seen by the next command; a killed daemon costs one failed connect.

Real processes throughout: the daemon is ``python -m memidex daemon``, the commands are
``python -m memidex ...`` with ``MEMIDEX_WARM=require`` (a command the daemon did not
answer fails) or ``MEMIDEX_WARM=0`` (the one-shot path), compared byte for byte.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO_ROOT, git, make_record, write_record

KNOWLEDGE = "agent-qa-knowledge/memory"
FACTS = f"{KNOWLEDGE}/records/fact"
SOCKET = ".agent-qa/warm.sock"
RUNS = REPO_ROOT / "examples/runs"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    env.update(extra)
    return env


def cli(root: Path, *args: str, warm: str, cwd: Path | None = None,
        **env: str) -> subprocess.CompletedProcess[str]:
    """``memidex ARGS`` in ``root``; ``warm``: ``require`` or ``0`` (MEMIDEX_WARM)."""
    return subprocess.run([sys.executable, "-m", "memidex", *args], cwd=cwd or root,
                          capture_output=True, text=True, check=False,
                          env=_env(MEMIDEX_WARM=warm, **env))


class Daemon:
    """``memidex daemon --json`` in ``root``, serving once its socket answers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.proc = subprocess.Popen([sys.executable, "-m", "memidex", "daemon", "--json"],
                                     cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=_env())
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            marker = root / KNOWLEDGE / "queue/daemon.json"  # it holds the lease
            announced = marker.exists() and f'"pid": {self.proc.pid}' in marker.read_text()
            probe = cli(root, "doctor", "--json", warm="require")
            if announced and probe.returncode in (0, 1) and '"path": "warm"' in probe.stdout:
                return
            time.sleep(0.05)
        self.proc.kill()
        raise AssertionError(f"the daemon did not serve: {self.proc.communicate()}")

    def stop(self) -> dict[str, object]:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=20)
        assert self.proc.returncode == 0, err
        report: dict[str, object] = json.loads(out)
        return report

    def kill(self) -> None:
        self.proc.kill()
        self.proc.communicate(timeout=20)


@pytest.fixture
def daemon(repo: Path) -> Iterator[Daemon]:
    d = Daemon(repo)
    try:
        yield d
    finally:
        if d.proc.poll() is None:
            d.kill()


def _records(repo: Path) -> list[str]:
    ids = []
    for i, (title, body) in enumerate([
            ("Place order is disabled", "The Place order button waits for the terms box."),
            ("Coupon field trims spaces", "A coupon code with spaces is trimmed, then checked."),
            ("Cart badge counts items", "The badge shows the number of items, not lines.")]):
        r = make_record(anchor=f"el:button:b{i}", title=title, body=body,
                        anchors=("page:/checkout", "test:checkout-happy-path"))
        write_record(repo, r)
        ids.append(r.id)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "records")
    return ids


def _same(repo: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command warm and one-shot: identical stdout, stderr and exit code."""
    warm = cli(repo, *args, warm="require", cwd=cwd)
    cold = cli(repo, *args, warm="0", cwd=cwd)
    assert (warm.returncode, warm.stdout, warm.stderr) == \
        (cold.returncode, cold.stdout, cold.stderr), args
    return warm


def test_reading_commands_print_the_same_bytes_warm(repo: Path) -> None:
    ids = _records(repo)
    cli(repo, "knowledge", "rebuild-index", warm="0")
    d = Daemon(repo)
    try:
        mode = stat.S_IMODE(os.stat(repo / SOCKET).st_mode)
        assert stat.S_ISSOCK(os.stat(repo / SOCKET).st_mode) and mode == 0o600
        for args in (["knowledge", "search", "coupon"],
                     ["knowledge", "search", "place order", "--json"],
                     ["knowledge", "search", "order", "--near", "page:/checkout", "--json"],
                     ["--root", str(repo), "knowledge", "search", "badge", "-n", "1"],
                     ["knowledge", "search", "nothing-matches-this"],
                     ["knowledge", "search", "x", "--status", "bogus"],  # a usage error
                     ["knowledge", "search", "x", "--status", "bogus", "--json"],
                     ["knowledge", "show", ids[0]], ["knowledge", "show", ids[1], "--json"],
                     ["knowledge", "show", ids[2], "--raw"],
                     ["knowledge", "show", "fact-nope"],  # not found: an error
                     ["knowledge", "list"], ["knowledge", "list", "--json"],
                     ["knowledge", "list", "--format", "csv"],
                     ["--quiet", "knowledge", "list", "--kind", "fact"],
                     ["brief", "checkout-happy-path", "--anchor", "page:/checkout"],
                     ["brief", "checkout-happy-path", "--json", "--no-record"]):
            out = _same(repo, *args)
            if args == ["knowledge", "show", "fact-nope"]:
                assert out.returncode == 2 and out.stderr.startswith("error: no record")
        # from a subfolder, the root found by walking up
        _same(repo, "knowledge", "search", "coupon", "--json", cwd=repo / KNOWLEDGE)
        # A one-shot look within 2 s of the commit leaves a snapshot too recent to trust,
        # and the first one-shot look after it writes a new one; the daemon's next look
        # then asks git (it answers only over a snapshot it left itself). One warm command
        # after the last one-shot one lets the doctor below answer from the watcher.
        cli(repo, "knowledge", "search", "coupon", warm="require")
        warm = json.loads(cli(repo, "doctor", "--json", warm="require").stdout)
        cold = json.loads(cli(repo, "doctor", "--json", warm="0").stdout)
        assert warm.pop("serving")["path"] == "warm"
        assert cold.pop("serving") == {"path": "one-shot", "reason": "MEMIDEX_WARM=0"}
        # doctor says who answered, and how that process found changed files: only that
        assert warm["index"].pop("staleness")["method"] == "watch"
        assert cold["index"].pop("staleness")["method"] == "git"
        for doc in (warm, cold):
            doc["lease"].pop("heartbeat_age_seconds")  # a clock, read at each run
        assert warm == cold
        text = [cli(repo, "doctor", warm=w).stdout.splitlines() for w in ("require", "0")]
        differ = [(a, b) for a, b in zip(*text, strict=True) if a != b]
        assert [a.split(":")[0].strip() for a, _ in differ
                if not a.startswith("lease:")] == ["staleness", "served by"]
        # a help, or a command a warm server does not take, runs here as before
        assert cli(repo, "knowledge", "search", "--help", warm="require").returncode == 0
        assert cli(repo, "knowledge", "check", warm="require").returncode == 0
    finally:
        report = d.stop()
    assert report["stopped"] == "SIGTERM"
    assert not (repo / SOCKET).exists()  # removed on a clean stop


def test_an_edit_is_always_seen_by_the_next_command(repo: Path) -> None:
    ids = _records(repo)
    cli(repo, "knowledge", "rebuild-index", warm="0")
    daemon = Daemon(repo)
    try:
        _edits(repo, ids)
    finally:
        daemon.stop()


def _edits(repo: Path, ids: list[str]) -> None:
    path = repo / FACTS / f"{ids[0]}.md"
    original = path.read_bytes()
    for i in range(12):
        token = f"warmedit{i}x"
        how = i % 4
        if how == 0:  # appended in place: the folder's mtime does not move
            with path.open("ab") as f:
                f.write(f" {token}\n".encode())
        elif how == 1:  # written to a temporary name and renamed over it
            tmp = path.with_name(".edit.tmp")
            tmp.write_bytes(original.replace(b"terms box.", f"terms box {token}.".encode()))
            os.rename(tmp, path)
        elif how == 2:  # a new record
            write_record(repo, make_record(anchor=f"el:link:new{i}", title=f"New {token}"))
        else:  # truncated and rewritten in place, the same size as before
            text = original.replace(b"waits", token[:5].encode())
            with path.open("r+b") as f:
                f.truncate(0)
                f.write(text)
            token = token[:5]
        out = cli(repo, "knowledge", "search", token, "--json", warm="require")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["results"], (i, how, token)
        path.write_bytes(original)
        out = cli(repo, "knowledge", "search", token, "--json", warm="require")
        hits = [h["title"] for h in json.loads(out.stdout)["results"]]
        assert hits == ([f"New {token}"] if how == 2 else []), (i, how, hits)
    # a record deleted, a new kind folder, a policy file: all seen at once
    path.unlink()
    out = cli(repo, "knowledge", "show", ids[0], warm="require")
    assert out.returncode == 2 and out.stderr.startswith("error: no record"), out.stderr
    write_record(repo, make_record(kind="caution", anchor="el:button:warm",
                                   title="Caution warmfolder"))
    out = cli(repo, "knowledge", "search", "warmfolder", "--json", warm="require")
    assert [h["kind"] for h in json.loads(out.stdout)["results"]] == ["caution"]
    doctor = json.loads(cli(repo, "doctor", "--json", warm="require").stdout)
    assert doctor["index"]["matches_files"] is True and doctor["healthy"] is True


def test_an_edit_through_a_hard_link_elsewhere_is_seen_warm(repo: Path, tmp_path: Path
                                                            ) -> None:
    """A record with another name outside the repository (``cp -al`` leaves such links),
    edited through that name: the kernel tells the watch of the other folder only, so
    the daemon stats such files at every command — the ones linked before it started and
    one linked into the records folder while it runs. (Only warm commands until the
    end: a one-shot one refreshes the index, and the daemon then asks git.)"""
    ids = _records(repo)
    cli(repo, "knowledge", "rebuild-index", warm="0")
    backup = tmp_path / "backup"
    backup.mkdir()
    before = backup / "before.md"
    os.link(repo / FACTS / f"{ids[0]}.md", before)
    d = Daemon(repo)
    try:
        outside = backup / "while.md"
        record = make_record(anchor="el:link:while", title="Linked while serving",
                             body="Written outside, linked in.")
        (outside.parent / "tmp").mkdir()
        os.rename(write_record(outside.parent / "tmp", record), outside)
        os.link(outside, repo / FACTS / f"{record.id}.md")
        out = cli(repo, "knowledge", "search", "linked in", "--json", warm="require")
        assert json.loads(out.stdout)["results"], out.stderr
        git(repo, "add", "-A")  # tracked: no longer stat-ed as an untracked file is
        git(repo, "commit", "-qm", "linked")
        for name, other in (("before", before), ("while", outside)):
            for i in range(2):
                token = f"linked{name}{i}x"
                with other.open("ab") as f:  # in place, through the name outside
                    f.write(f" {token}\n".encode())
                out = cli(repo, "knowledge", "search", token, "--json", warm="require")
                assert out.returncode == 0, out.stderr
                assert json.loads(out.stdout)["results"], (name, i)
        before.unlink()  # a link count back to one: no longer stat-ed, still right
        with (repo / FACTS / f"{ids[0]}.md").open("ab") as f:
            f.write(b" unlinkedtoken\n")
        out = cli(repo, "knowledge", "search", "unlinkedtoken", "--json", warm="require")
        assert json.loads(out.stdout)["results"]
        _same(repo, "knowledge", "search", "linked", "--json")
    finally:
        d.stop()


@pytest.mark.parametrize("where", ["repository", "worktree"])
def test_the_commit_an_answer_names_follows_git_while_the_daemon_runs(
        repo: Path, where: str) -> None:
    """Each answer names the commit it comes from (``commit``): moved by git while the
    daemon runs — a commit that writes git's index, one that does not (``--allow-empty``),
    ``reset --soft``, a branch checked out, refs packed — the warm answer names the
    commit the one-shot one names; in a linked worktree too (HEAD in its own git folder,
    the refs in the common one). Warm commands only until each check (a one-shot command
    refreshes the index, and the daemon then asks git anyway)."""
    _records(repo)
    if where == "worktree":
        git(repo, "worktree", "add", "-q", str(repo.parent / "wt"))
        repo = repo.parent / "wt"
    cli(repo, "knowledge", "rebuild-index", warm="0")

    def commit_of(warm: str) -> object:
        out = cli(repo, "knowledge", "search", "coupon", "--json", warm=warm)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["commit"]

    d = Daemon(repo)
    try:
        steps: list[tuple[str, ...]] = [
            ("commit", "-q", "--allow-empty", "-m", "empty"),
            ("checkout", "-q", "-b", "other"),
            ("commit", "-q", "--allow-empty", "-m", "on other"),
            ("pack-refs", "--all"),
            ("commit", "-q", "--allow-empty", "-m", "after packing"),
            ("reset", "-q", "--soft", "HEAD~1"),
            ("checkout", "-q", "-"),
        ]
        for step in steps:
            commit_of("require")  # the daemon's snapshot is its own before the step
            git(repo, *step)
            head = git(repo, "rev-parse", "HEAD").strip()
            assert commit_of("require") == head, step
        commit_of("require")  # the look after git moved asked git; this one does not
        doctor = json.loads(cli(repo, "doctor", "--json", warm="require").stdout)
        assert doctor["index"]["staleness"]["method"] == "watch", doctor["index"]
        # `git status` (a shell prompt's, an editor's) takes and drops index.lock each
        # time; once its index is written, that moves nothing: the look stays cheap
        git(repo, "status", "--short")
        commit_of("require")
        git(repo, "status", "--short")
        doctor = json.loads(cli(repo, "doctor", "--json", warm="require").stdout)
        assert doctor["index"]["staleness"]["method"] == "watch", doctor["index"]
        assert commit_of("0") == head
    finally:
        d.stop()


@pytest.mark.parametrize("swapped", ["agent-qa-knowledge", "agent-qa-knowledge/memory"])
def test_a_folder_above_the_records_moved_away_and_replaced_is_seen(
        repo: Path, swapped: str) -> None:
    """The knowledge folder (or one between it and the records) moved aside and a copy
    put in its place, as a restore from a backup does: the watches were on the folders
    moved aside, so the daemon watches every folder from the root down to the records and
    policies for the next name changing, and then sets its watches again."""
    ids = _records(repo)
    cli(repo, "knowledge", "rebuild-index", warm="0")
    d = Daemon(repo)
    try:
        import shutil

        os.rename(repo / swapped, repo / "aside")
        shutil.copytree(repo / "aside", repo / swapped, symlinks=True)
        assert cli(repo, "knowledge", "list", warm="require").returncode == 0
        with (repo / FACTS / f"{ids[1]}.md").open("ab") as f:  # in the copy, in place
            f.write(b" swappedtoken\n")
        out = cli(repo, "knowledge", "search", "swappedtoken", "--json", warm="require")
        assert json.loads(out.stdout)["results"], out.stderr
        with (repo / "aside" / "memory/records/fact" if swapped == "agent-qa-knowledge"
              else repo / "aside" / "records/fact").joinpath(f"{ids[2]}.md").open("ab") as f:
            f.write(b" asidetoken\n")  # the folder moved aside is no longer the records
        out = cli(repo, "knowledge", "search", "asidetoken", "--json", warm="require")
        assert json.loads(out.stdout)["results"] == []
        _same(repo, "knowledge", "search", "swappedtoken", "--json")
    finally:
        d.stop()


def test_what_the_daemon_refreshed_is_seen_by_one_shot_commands_after_it(
        repo: Path) -> None:
    """The warm index names every path it refreshed in the staleness snapshot, so a
    change put back while no daemon runs (git checkout restores the committed file,
    which git then sees as clean) is still looked at by the next one-shot command."""
    ids = _records(repo)
    cli(repo, "knowledge", "rebuild-index", warm="0")
    path = repo / FACTS / f"{ids[1]}.md"
    d = Daemon(repo)
    try:
        with path.open("ab") as f:
            f.write(b" revertedtoken\n")
        out = cli(repo, "knowledge", "search", "revertedtoken", "--json", warm="require")
        assert json.loads(out.stdout)["results"]
    finally:
        d.stop()
    git(repo, "checkout", "-q", "--", str(path.relative_to(repo)))
    out = cli(repo, "knowledge", "search", "revertedtoken", "--json", warm="0")
    assert json.loads(out.stdout)["results"] == []
    out = cli(repo, "knowledge", "search", "coupon", "--json", warm="0")
    assert len(json.loads(out.stdout)["results"]) == 1


def test_a_killed_daemon_costs_one_failed_connect(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _records(repo)
    d = Daemon(repo)
    d.kill()  # SIGKILL: the socket file stays, nothing listens on it
    assert (repo / SOCKET).exists()
    from memidex.warm import client

    connects: list[object] = []

    def audit(event: str, args: tuple[object, ...]) -> None:
        if event == "socket.connect":
            connects.append(args[1])

    sys.addaudithook(audit)
    monkeypatch.chdir(repo)
    monkeypatch.setenv("MEMIDEX_WARM", "")
    assert client.run_warm(["knowledge", "search", "coupon", "--json"]) is None
    assert len(connects) == 1 and str(connects[0]).endswith("warm.sock")
    assert client.serving()["reason"].startswith("no warm server answers")
    connects.clear()
    # the one-shot path answers; a new daemon removes the stale socket and serves
    out = cli(repo, "knowledge", "search", "coupon", "--json", warm="")
    assert out.returncode == 0 and json.loads(out.stdout)["results"]
    d = Daemon(repo)
    try:
        _same(repo, "knowledge", "search", "coupon", "--json")
    finally:
        d.stop()


def test_the_daemon_declines_another_environment(repo: Path, daemon: Daemon) -> None:
    _records(repo)
    out = cli(repo, "doctor", "--json", warm="", NO_COLOR="1")
    assert json.loads(out.stdout)["serving"] == {
        "path": "one-shot", "reason": "the warm server declined: another environment "
                                      "(NO_COLOR)"}
    refused = cli(repo, "knowledge", "list", warm="require", MEMIDEX_BUILD_TAG="b9")
    assert refused.returncode == 3 and "another environment (MEMIDEX_BUILD_TAG)" in \
        refused.stderr
    # memidex.toml changed: the daemon reads it again for the next command
    (repo / "memidex.toml").write_text('product = "other-app"\n', encoding="utf-8")
    out = _same(repo, "knowledge", "search", "coupon", "--json")
    assert json.loads(out.stdout)["product"] == "other-app"
    (repo / "memidex.toml").write_text('product = "shop-web"\nbogus_key = 1\n',
                                       encoding="utf-8")
    out = cli(repo, "doctor", "--json", warm="")
    assert "has problems" in json.loads(out.stdout)["serving"]["reason"]


def test_a_long_root_path_is_served_through_proc(tmp_path: Path) -> None:
    root = tmp_path / ("x" * 60) / ("y" * 60) / "repo"
    root.mkdir(parents=True)
    git(root, "init", "-q")
    from memidex.store.layout import init_repository

    init_repository(root)
    (root / "memidex.toml").write_text('product = "shop-web"\n', encoding="utf-8")
    assert len(str(root / SOCKET)) > 108
    _records(root)
    d = Daemon(root)
    try:
        _same(root, "knowledge", "search", "coupon", "--json")
    finally:
        d.stop()


def test_one_warm_server_a_state_folder(repo: Path) -> None:
    from memidex.warm.server import WarmServer

    def handler(_request: dict[str, object]) -> dict[str, object]:
        return {"served": False, "reason": "test"}

    first = WarmServer(repo / ".agent-qa", handler)
    second = WarmServer(repo / ".agent-qa", handler)
    assert first.start()
    try:
        assert not second.start()
        assert second.failure == "another warm server serves this repository"
    finally:
        first.stop()
    assert not (repo / SOCKET).exists()
    assert second.start()
    second.stop()


def test_runs_ingest_into_a_running_daemon_is_applied_by_it(tmp_path: Path) -> None:
    """Issue 18: ``runs ingest`` while ``memidex daemon`` runs is applied by the daemon —
    sent over the socket (warm) or queued by a one-shot process — and leaves what a
    one-shot ingest without a daemon leaves."""
    from learnkit import checkout, init_repo, records, write_run

    runs = [write_run(tmp_path / "runs", checkout("r-1")),
            write_run(tmp_path / "runs", checkout("r-2", search="flaky")),
            write_run(tmp_path / "runs", checkout("r-3", place_order="enabled",
                                                  build="v2"))]
    with_daemon, alone = init_repo(tmp_path / "a"), init_repo(tmp_path / "b")
    for root in (with_daemon, alone):  # (under a daemon a missing index is left missing)
        cli(root, "knowledge", "rebuild-index", warm="0")
    d = Daemon(with_daemon)
    try:
        first = cli(with_daemon, "runs", "ingest", str(runs[0]), "--json", warm="require")
        assert first.returncode == 0, first.stderr
        results = [json.loads(first.stdout),
                   json.loads(cli(with_daemon, "runs", "ingest", str(runs[1]), "--json",
                                  warm="0").stdout),
                   json.loads(cli(with_daemon, "runs", "ingest",
                                  os.path.relpath(runs[2], with_daemon), "--json",
                                  warm="require").stdout)]
        again = cli(with_daemon, "runs", "ingest", str(runs[0]), "--json", warm="require")
        assert json.loads(again.stdout)["already_ingested"] is True
        warm_search = cli(with_daemon, "knowledge", "search", "place order", "--json",
                          warm="require").stdout
    finally:
        report = d.stop()
    applied = report["applied"]
    assert isinstance(applied, list)
    assert [(a["command"], a["ok"]) for a in applied] == [("runs ingest", True)] * 3
    expected = [json.loads(cli(alone, "runs", "ingest", str(r), "--json", warm="0").stdout)
                for r in runs]
    assert results == expected
    assert records(with_daemon) == records(alone)
    assert warm_search == cli(alone, "knowledge", "search", "place order", "--json",
                              warm="0").stdout


def test_a_state_folder_linked_elsewhere_gets_no_socket(repo: Path, tmp_path: Path) -> None:
    """``.agent-qa`` a symlink out of the repository: the daemon serves no warm path (it
    says why), creates nothing over there, and a write through the state folder is
    refused."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    import shutil

    shutil.rmtree(repo / ".agent-qa", ignore_errors=True)
    (repo / ".agent-qa").symlink_to(outside)
    proc = subprocess.Popen([sys.executable, "-m", "memidex", "daemon"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert "not serving" in first and "leads outside the repository" in first, first
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    assert list(outside.iterdir()) == []
    out = cli(repo, "runs", "ingest", str(RUNS / "r-0051.json"), warm="0")
    assert out.returncode == 4 and "leads outside the repository" in out.stderr, out.stderr
    assert list(outside.iterdir()) == []


def test_a_paused_daemon_costs_a_few_seconds_not_a_hang(repo: Path, daemon: Daemon) -> None:
    """A daemon stopped (SIGSTOP) still has its socket listening: the client hears no
    "accepted" within its few seconds and answers the command itself, same bytes."""
    cold = cli(repo, "knowledge", "list", "--json", warm="0")
    os.kill(daemon.proc.pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        out = cli(repo, "knowledge", "list", "--json", warm="")
        took = time.monotonic() - began
        doctor = json.loads(cli(repo, "doctor", "--json", warm="").stdout)
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)
    assert out.returncode == 0 and out.stdout == cold.stdout, out.stderr
    assert took < 60  # a liveness bound: without the rule it waits 120 s per command
    assert doctor["serving"]["path"] == "one-shot"
    assert "did not take the command" in doctor["serving"]["reason"]
