"""Hardening, the command line under attack: Ctrl-C in the middle of a rebuild (the parser
processes included, as a terminal sends it to the whole process group) is exit 130 and
one line — no traceback from the command or its workers — and the old index survives.

A real corpus (bench/gen_corpus.py), a real rebuild with its process pool, a real SIGINT.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO_ROOT, run_cli

INDEX = "agent-qa-knowledge/memory/index"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8,000 records (over the size where the rebuild forks its parser processes), with
    an index built."""
    bench = REPO_ROOT / "bench"
    if str(bench) not in sys.path:
        sys.path.insert(0, str(bench))
    from gen_corpus import generate
    from memidex.index.build import PARALLEL_MIN_FILES

    root = tmp_path_factory.mktemp("corpus") / "repo"
    n = 2 * PARALLEL_MIN_FILES
    generate(n, root, seed=5, jobs=1)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    assert run_cli(root, "knowledge", "rebuild-index").returncode == 0
    return root


@pytest.fixture
def rebuild(corpus: Path) -> Iterator[subprocess.Popen[str]]:
    """A real `rebuild-index --jobs 2` in a process group of its own (its parsers too).
    Whatever the test does, the whole group is killed and reaped after, so a failed test
    never leaves a writer holding the lease for the next one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    proc = subprocess.Popen([sys.executable, "-m", "memidex", "--root", str(corpus),
                             "knowledge", "rebuild-index", "--jobs", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        yield proc
    finally:
        try:  # the parser processes too, if the command itself is gone
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate(timeout=60)


def test_ctrl_c_during_rebuild_index_is_exit_130_and_one_line(
        corpus: Path, rebuild: subprocess.Popen[str]) -> None:
    index = corpus / INDEX / "memidex.sqlite"
    before = index.read_bytes()
    proc = rebuild
    # Event-based: wait until the parser processes hand batches over (their batch files
    # beside the build), then Ctrl-C the whole group. (Not the build file's size: its
    # rows stay in SQLite's page cache until the commit, so it grows only at the very
    # end, and on a loaded machine the signal then came after the work was done.)
    deadline = time.monotonic() + 120
    interrupted = False
    while time.monotonic() < deadline and proc.poll() is None:
        if list(index.parent.glob(".memidex.sqlite.build-*.part-*")):
            os.killpg(proc.pid, signal.SIGINT)
            interrupted = True
            break
        time.sleep(0.001)
    out, err = proc.communicate(timeout=120)
    assert interrupted, "the rebuild finished before it could be interrupted"
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    # (under `make test` coverage's own warnings may come first: they are not memidex's)
    lines = [ln for ln in err.splitlines() if ln.strip() and "CoverageWarning" not in ln
             and "self.warn(" not in ln]
    assert len(lines) == 1 and "interrupted" in lines[0], err
    assert proc.returncode == 130, (proc.returncode, err)
    time.sleep(0.2)  # the parser processes, told to stop, are gone
    assert index.read_bytes() == before  # the old index survives
    assert not list(index.parent.glob(".memidex.sqlite.build-*"))  # nothing left behind
    doctor = run_cli(corpus, "doctor", "--json")
    assert doctor.returncode == 0 and '"held": false' in doctor.stdout, doctor.stdout


def test_a_rebuild_killed_while_its_parsers_write_batches_leaves_nothing_the_next_keeps(
        corpus: Path, rebuild: subprocess.Popen[str]) -> None:
    """SIGKILL to the whole group while the parser processes are handing batches over
    (their batch files beside the build): the old index survives, and the next rebuild
    removes every file the killed one left — the build, its FTS file and batch files."""
    index = corpus / INDEX / "memidex.sqlite"
    before = index.read_bytes()
    proc = rebuild
    deadline = time.monotonic() + 120
    seen: list[Path] = []
    while time.monotonic() < deadline and proc.poll() is None:
        seen = list(index.parent.glob(".memidex.sqlite.build-*.part-*"))
        if seen:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.001)
    proc.communicate(timeout=60)
    assert seen, "no batch file was seen before the rebuild ended"
    for _ in range(200):  # the parser processes die with their group
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.01)
    left = list(index.parent.glob(".memidex.sqlite.build-*"))
    assert left and index.read_bytes() == before
    rebuilt = run_cli(corpus, "knowledge", "rebuild-index", "--json")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert not list(index.parent.glob(".memidex.sqlite.build-*"))
