"""The staleness check's git calls started early (memidex.index.prefetch): the CLI starts
them from the command line alone, the search collects them, a wrong guess costs nothing
but the call, and the small process handle behaves like the part of Popen it replaces."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import make_record, write_record
from memidex.cli.main import early_git
from memidex.config import load_config
from memidex.index import prefetch
from memidex.store.files import Store


def _tops(root: Path) -> list[str]:
    store = Store(load_config(root))
    return [store.records_rel, store.policies_rel]


@pytest.mark.parametrize("toml", [
    'product = "shop-web"\n',
    'knowledge_dir = "kb/memory"\npolicies_dir = "rules"\n',
    'policies_dir = "a/b/c"\n[brief]\nlimit = 5\n',
    '  knowledge_dir = "deep/er/kb"  # a comment\n',
])
def test_the_early_guess_of_the_folders_is_the_configurations(repo: Path, toml: str) -> None:
    (repo / "memidex.toml").write_text(toml, encoding="utf-8")
    assert prefetch.tops_of(str(repo.resolve())) == _tops(repo)


@pytest.mark.parametrize("value", ["./kb", "kb/", "kb//m", "../kb", "/abs/kb", "a\\\\b", 7])
def test_an_unusual_folder_is_left_to_the_configuration(repo: Path, value: object) -> None:
    text = f"knowledge_dir = {value!r}\n".replace("'", '"') if isinstance(value, str) \
        else f"knowledge_dir = {value}\n"
    (repo / "memidex.toml").write_text(text, encoding="utf-8")
    assert prefetch.tops_of(str(repo)) is None
    (repo / "memidex.toml").write_text("knowledge_dir = [unclosed\n", encoding="utf-8")
    assert prefetch.tops_of(str(repo)) is None


def test_early_starts_the_calls_a_search_then_collects(repo: Path) -> None:
    from memidex.app import Memidex

    write_record(repo, make_record(title="Place order is disabled"))
    with Memidex(root=repo) as m:
        m.rebuild_index()
    root = str(repo.resolve())
    for argv in (["--root", str(repo), "--color", "never", "knowledge", "list"],
                 ["--root", str(repo), "runs", "ingest", "r.json"],
                 ["--root", str(repo), "knowledge", "search", "--help"]):
        early_git(argv)  # not a command that collects them: nothing started
        assert not prefetch._STARTED
    early_git(["--root", str(repo), "knowledge", "search", "place order"])
    assert set(prefetch._STARTED) == {(root, tuple(_tops(repo))), (root, prefetch.HEAD)}
    with Memidex(root=repo) as m:
        hits = m.search("place order").results
    assert [h.title for h in hits] == ["Place order is disabled"]
    assert not prefetch._STARTED  # collected, nothing left running


def test_a_wrong_guess_is_not_used_and_is_reaped(repo: Path) -> None:
    from memidex.app import Memidex

    path = write_record(repo, make_record(title="Place order is disabled"))
    with Memidex(root=repo) as m:
        m.rebuild_index()
    root = str(repo.resolve())
    prefetch.prefetch(root, ["policies"])  # not the folders the index is made of
    wrong = prefetch._STARTED[(root, ("policies",))][0]
    old = time.time() - 60
    path.write_text(path.read_text(encoding="utf-8").replace("disabled", "greyed out"),
                    encoding="utf-8")
    os.utime(path, (old, old))  # an edit that kept an old mtime: only git names it
    with Memidex(root=repo) as m:
        assert [h.title for h in m.search("greyed").results] == ["Place order is greyed out"]
    assert not prefetch._STARTED
    assert wrong.returncode == 0  # reaped when the facade closed


def test_the_process_handle_reads_everything_and_reports_the_exit(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    proc = prefetch.start(str(tmp_path), "rev-parse", "--git-path", "index")
    assert proc is not None
    out, _ = proc.communicate(timeout=30)
    assert (out, proc.returncode) == (b".git/index\n", 0)
    assert proc.communicate() == (b"", None) and proc.returncode == 0  # idempotent
    bad = prefetch.start(str(tmp_path), "rev-parse", "--verify", "-q", "no-such-ref")
    assert bad is not None
    assert bad.communicate(timeout=30) == (b"", None) and bad.returncode == 1
    big = prefetch.start(str(tmp_path), "hash-object", "--stdin-paths")  # stdin: /dev/null
    assert big is not None and big.communicate(timeout=30)[0] == b""


def test_a_git_that_hangs_is_killed_at_the_timeout(tmp_path: Path) -> None:
    read, write = os.pipe()
    pid = os.posix_spawnp(sys.executable, [sys.executable, "-c",
                                           "import sys, time; print('x', flush=True); "
                                           "time.sleep(60)"],
                          os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, write, 1)])
    os.close(write)
    proc = prefetch.Git(pid, read)
    # Once the child has written (a slow machine can take longer than the timeout just to
    # start Python), the timeout is what ends it.
    assert select.select([read], [], [], 60)[0]
    began = time.monotonic()
    out, _ = proc.communicate(timeout=0.5)
    assert out == b"x\n" and proc.returncode == -1
    assert time.monotonic() - began < 30


def test_a_real_search_starts_git_before_importing_the_rest(repo: Path) -> None:
    # the one-shot CLI: git is started (from the command line and memidex.toml alone)
    # before subprocess, the configuration or the index are imported
    write_record(repo, make_record(title="Place order is disabled"))
    subprocess.run([sys.executable, "-m", "memidex", "--root", str(repo), "knowledge",
                    "rebuild-index"], check=True, capture_output=True)
    code = ("import sys, runpy\n"
            "from memidex.index import prefetch\n"
            "real = prefetch.start\n"
            "def start(root, *args):\n"
            "    print('AT', ','.join(sorted(m for m in ('subprocess', 'sqlite3', "
            "'memidex.config', 'memidex.index.staleness', 'dataclasses') "
            "if m in sys.modules)), args[0])\n"
            "    return real(root, *args)\n"
            "prefetch.start = start\n"
            "sys.argv = ['memidex', '--root', sys.argv[1], 'knowledge', 'search', 'place']\n"
            "try:\n    runpy.run_module('memidex', run_name='__main__')\n"
            "except SystemExit as exc:\n    assert not exc.code, exc.code\n")
    # without coverage's subprocess hook: coverage itself loads sqlite3, subprocess and
    # dataclasses into a measured process
    env = {k: v for k, v in os.environ.items()
           if k != "MEMIDEX_WARM" and not k.startswith("COVERAGE_PROCESS")}
    out = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True,
                         text=True, check=True, env={**env, "MEMIDEX_WARM": "0"})
    lines = out.stdout.splitlines()
    assert lines[:2] == ["AT  diff-files", "AT  rev-parse"], out.stdout
    assert "Place order is disabled" in out.stdout


@pytest.mark.parametrize("command", [["knowledge", "search", "x", "--json"],
                                     ["brief", "t-1", "--no-record"], ["doctor", "--json"]])
def test_a_fifo_for_memidex_toml_never_hangs_a_command(tmp_path: Path,
                                                       command: list[str]) -> None:
    # the warm client's look for state_dir and the early guess of the folders read
    # memidex.toml before anything else: a FIFO there is no configuration (as
    # load_config treats it), never a read that waits for a writer
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    os.mkfifo(root / "memidex.toml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    out = subprocess.run([sys.executable, "-m", "memidex", *command], cwd=root, env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode in (0, 1, 2, 3, 4), out.stderr
    assert "Traceback" not in out.stderr
    assert prefetch.tops_of(str(root)) == ["agent-qa-knowledge/memory/records", "policies"]


def test_memidex_toml_is_peeked_only_when_it_is_a_regular_file(tmp_path: Path) -> None:
    from memidex.store.peek import regular_bytes
    from memidex.warm.client import state_folder

    (tmp_path / "memidex.toml").mkdir()
    assert regular_bytes(str(tmp_path / "memidex.toml"), 100) is None
    assert state_folder(str(tmp_path)) == str(tmp_path / ".agent-qa")
    (tmp_path / "memidex.toml").rmdir()
    (tmp_path / "memidex.toml").symlink_to("/dev/zero")
    assert regular_bytes(str(tmp_path / "memidex.toml"), 100) is None
    (tmp_path / "memidex.toml").unlink()
    (tmp_path / "memidex.toml").write_text('state_dir = ".st"\n', encoding="utf-8")
    assert state_folder(str(tmp_path)) == str(tmp_path / ".st")
    assert regular_bytes(str(tmp_path / "memidex.toml"), 5) == b"state"
    assert regular_bytes(str(tmp_path / "absent.toml"), 5) is None


_COLLECTOR_AT_EXIT = (
    "import atexit, gc, sys\n"
    "atexit.register(lambda: sys.stderr.write(f'collector={gc.isenabled()}\\n'))\n"
    "sys.argv = ['memidex', *sys.argv[1:]]\n"
    "from memidex.cli.main import run\n"
    "run()\n")


@pytest.mark.parametrize("argv, paused", [
    (["knowledge", "search", "place order", "--json"], True),
    (["brief", "t-1", "--json", "--no-record"], True),
    (["runs", "ingest", "RUN", "--json"], True),  # and not resumed when it is done
    (["knowledge", "list", "--json"], False),  # not an early command: the collector runs
])
def test_a_one_shot_reading_command_runs_without_the_collector(
        repo: Path, argv: list[str], paused: bool) -> None:
    """Its passes would visit objects that nearly all live to the exit; a command that
    is not one of them (and every long-lived server) keeps the collector on."""
    write_record(repo, make_record(title="Place order is disabled"))
    run = repo / "run.json"
    run.write_text(json.dumps({"run_id": "r-1", "product": "shop-web", "tests": [
        {"test_id": "t-1", "verdict": "pass", "steps": [
            {"index": 0, "action": "goto", "target": "page:/checkout",
             "observed": "Checkout", "check": {"kind": "assert-visible", "passed": True}}]}]}),
        encoding="utf-8")
    argv = [str(run) if a == "RUN" else a for a in argv]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    env["MEMIDEX_WARM"] = "0"
    proc = subprocess.run([sys.executable, "-c", _COLLECTOR_AT_EXIT, "--root", str(repo),
                           *argv], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"collector={not paused}" in proc.stderr


def test_a_repository_without_a_commit_costs_one_git_call_for_its_index_and_head(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git's index and HEAD are asked in one call with a commit or without one (a new
    repository: HEAD is unborn) — not in three."""
    from memidex.app import Memidex
    from memidex.index import gitlook

    repo = tmp_path / "fresh"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "memidex.toml").write_text('product = "shop-web"\n', encoding="utf-8")
    write_record(repo, make_record(title="Place order is disabled"))
    with Memidex(root=repo) as m:
        m.rebuild_index()
    asked: list[tuple[str, ...]] = []
    real = gitlook.start

    def counted(root: str, *args: str) -> prefetch.Git | None:
        asked.append(args)
        return real(root, *args)

    monkeypatch.setattr(gitlook, "start", counted)
    for _ in range(2):
        with Memidex(root=repo) as m:
            assert [h.title for h in m.search("place order").results] == \
                ["Place order is disabled"]
    heads = [a for a in asked if a[:1] == ("rev-parse",)]
    assert heads == [prefetch.HEAD_ARGS] * 2, asked
    assert gitlook.index_mtime_and_head(str(repo.resolve()))[1] is None  # unborn


@pytest.mark.parametrize("layout", ["sub-folder", "worktree"])
def test_the_calls_start_where_git_is_not_in_the_root_itself(tmp_path: Path,
                                                             layout: str) -> None:
    """memidex in a sub-folder of a repository (git's folder is above it), or in a linked
    worktree (``.git`` is a file): the calls start all the same, and the search collects
    them."""
    from conftest import git
    from memidex.app import Memidex
    from memidex.store.layout import init_repository

    top = tmp_path / "mono"
    top.mkdir()
    git(top, "init", "-q")
    (top / "README").write_text("x\n")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "first")
    if layout == "worktree":
        git(top, "worktree", "add", "-q", str(tmp_path / "wt"))
        repo = tmp_path / "wt"
    else:
        repo = top / "qa"
        repo.mkdir()
    init_repository(repo)
    (repo / "memidex.toml").write_text('product = "shop-web"\n', encoding="utf-8")
    write_record(repo, make_record(title="Place order is disabled"))
    with Memidex(root=repo) as m:
        m.rebuild_index()
    root = str(repo.resolve())
    early_git(["--root", str(repo), "knowledge", "search", "place order"])
    assert set(prefetch._STARTED) == {(root, tuple(_tops(repo))), (root, prefetch.HEAD)}
    with Memidex(root=repo) as m:
        assert [h.title for h in m.search("place order").results] == [
            "Place order is disabled"]
        assert m.reading.last_refresh.method == "git"  # type: ignore[union-attr]
    assert not prefetch._STARTED
