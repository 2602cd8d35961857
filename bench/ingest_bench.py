"""The ingest figures of SPEC §9: a 150-test x 3-step run into an empty repository, and
again (a new run id: everything confirms) into one of N records, each beside the raw
limit measured in the same run — a plain script writing the same record files with
write + fsync + rename. The same two ingests again into a repository where
``memidex daemon`` runs (``MEMIDEX_WARM=require``: the daemon applies them, the CLI only
hands the command line over), and the CPU seconds (user + system) of each: the command's
own, plus, with a daemon, what the daemon spent meanwhile.

Run alone: ``python bench/ingest_bench.py [--corpus DIR]``; ``bench/run.py`` calls
:func:`ingest_figures` with its corpus. The corpus case ingests INTO the corpus and
removes what it added afterwards: give it a copy you do not mind being written.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TESTS = 150
STEPS = 3


def make_run(run_id: str, product: str = "bench-shop", build: str = "b1") -> dict[str, Any]:
    """A run of TESTS passing tests of STEPS verified steps each (all checks hold)."""
    tests = []
    for i in range(TESTS):
        page = f"page:/area-{i % 25}"
        steps = [
            {"index": 0, "action": "goto", "target": page, "anchors": [f"test:t-{i:03d}"],
             "observed": f"Area {i % 25}", "check": {"kind": "assert-visible", "passed": True}},
            {"index": 1, "action": "click", "target": f"el:button:b-{i:03d}",
             "anchors": [page], "observed": f"Button {i} pressed",
             "check": {"kind": "assert-text", "passed": True}},
            {"index": 2, "action": "assert", "target": f"el:text:t-{i:03d}",
             "anchors": [page], "observed": f"Result {i} shown after 120 ms",
             "check": {"kind": "assert-text", "passed": True}},
        ][:STEPS]
        tests.append({"test_id": f"t-{i:03d}", "verdict": "pass", "steps": steps})
    return {"run_id": run_id, "product": product, "build_tag": build, "ci": False,
            "tests": tests}


RAW_SCRIPT = r"""
import os, sys
src, dst = sys.argv[1], sys.argv[2]
names = sorted(os.listdir(src))
for name in names:
    data = open(os.path.join(src, name), "rb").read()
    tmp = os.path.join(dst, name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    os.replace(tmp, os.path.join(dst, name))
fd = os.open(dst, os.O_RDONLY)
os.fsync(fd)
os.close(fd)
"""


RAW_MEMORY = ".bench-raw"
"""The raw script's new folders inside a repository's ``memory/`` folder, beside
``staging/`` where memidex creates its files. On ext4 where a folder sits on the disk
changes what creating a file in it costs; ``raw_corpus`` is the script in a new folder of
the corpus's ``memory/`` against the same in the empty repository's: how much of the
growth with N the disk alone shows for a new folder (docs/performance.md, runs N and O)."""

CPU: dict[str, list[float]] = {}
"""CPU seconds (user + system) of each timed command, by figure name."""


def _env(warm: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    env["MEMIDEX_WARM"] = warm
    return env


def _run(cmd: list[str], cwd: Path, *, warm: str = "0", cpu: str | None = None,
         daemon: subprocess.Popen[str] | None = None) -> float:
    """Seconds the command took; its CPU seconds (and the daemon's meanwhile) go to
    ``CPU[cpu]``."""
    before = _proc_cpu(daemon.pid) if daemon is not None else 0.0
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err,
                                env=_env(warm))
        _pid, status, usage = os.wait4(proc.pid, 0)
        secs = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"error: {' '.join(cmd)} (MEMIDEX_WARM={warm}) exited "
                             f"{proc.returncode}: {err.read().decode()[-1000:]}")
    if cpu is not None:
        used = usage.ru_utime + usage.ru_stime
        if daemon is not None:
            used += _proc_cpu(daemon.pid) - before
        CPU.setdefault(cpu, []).append(used)
    return secs


def _proc_cpu(pid: int) -> float:
    """User + system seconds a live process has used so far (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _init(root: Path, exe: str) -> None:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([exe, "--root", str(root), "init", "--product", "bench-shop"], check=True,
                   capture_output=True)


def _records(root: Path) -> list[Path]:
    return sorted((root / "agent-qa-knowledge/memory/records").rglob("*.md"))


def raw_limit(files: list[Path], tmp: Path, k: int | str, into: Path | None = None) -> float:
    """A plain script writing the same files (write + fsync + rename), end to end, into a
    new folder (``k`` names it: nothing is deleted while the benchmark runs) in ``tmp``, or
    (``into``) in that folder: where a folder sits on the disk changes what creating a file
    in it costs (see :data:`RAW_MEMORY`)."""
    src = tmp / f"raw-src-{k}"
    dst = (into or tmp) / f"{RAW_MEMORY if into else 'raw-dst'}-{k}"
    src.mkdir()
    dst.mkdir()
    for i, f in enumerate(files):
        shutil.copyfile(f, src / f"{i:05d}-{f.name}")
    return _run([sys.executable, "-c", RAW_SCRIPT, str(src), str(dst)], tmp, cpu="raw")


def ingest_figures(exe: str, tmp: Path, corpus: Path | None, repeat: int = 3,
                   daemon: bool = True) -> dict[str, Any]:
    """Seconds (sorted) for: ingest into an empty repository (adds), a second run into it
    (confirms), the raw limit for the same files, the confirm run into ``corpus``, and
    (``daemon``) the adds and the confirms into an empty repository a ``memidex daemon``
    serves; ``cpu``: the CPU seconds of each (sorted); ``paired``: each figure's ratios to
    the raw limit measured beside it (the mean of the raw runs just before and just after,
    in the same repeat), sorted — the confirm into ``corpus`` (one each repeat) to the
    same confirm into the corpus's twin (:func:`_twin`): an empty repository that took
    every ingest the corpus took.

    Nothing is deleted until the caller removes ``tmp``: on ext4, creating files costs
    several times more for a while after many were deleted (the inode allocator skips
    recently freed inodes), so deleting one repeat's repositories would slow the next —
    memidex's and the raw script's alike, but not by the same amount. The raw script runs
    before and after each pair of ingests for the same reason: the ratios are of
    neighbours."""
    CPU.clear()
    first = tmp / "run-a.json"
    second = tmp / "run-b.json"
    first.write_text(json.dumps(make_run("bench-a")), encoding="utf-8")
    second.write_text(json.dumps(make_run("bench-b")), encoding="utf-8")
    times: dict[str, list[float]] = {"add_empty": [], "confirm_empty": [], "raw": []}
    if daemon:
        times.update(add_daemon=[], confirm_daemon=[])
    if corpus is not None:
        times.update(confirm_corpus=[], confirm_twin=[])
        if daemon:
            times.update(confirm_corpus_daemon=[], confirm_twin_daemon=[])
    paired: dict[str, list[float]] = {key: [] for key in times if key != "raw"}
    if corpus is not None:  # not a time: the raw script in the corpus, to it in an empty repo
        paired["raw_corpus"] = []
    warmup = tmp / "warm-up"  # the record files the raw script writes, and warm caches
    _init(warmup, exe)
    subprocess.run([exe, "--root", str(warmup), "runs", "ingest", str(first)], check=True,
                   capture_output=True, env=_env("0"))
    files = _records(warmup)
    n_raw = 0

    def raw() -> float:
        nonlocal n_raw
        n_raw += 1
        secs = raw_limit(files, tmp, n_raw)
        times["raw"].append(secs)
        return secs

    def keep(pair: dict[str, float], before: float, after: float) -> None:
        for key, secs in pair.items():
            times[key].append(secs)
            paired[key].append(secs / ((before + after) / 2))

    twin: Path | None = None
    if corpus is not None:
        corpus = corpus.resolve()
        corpus_before, had_state = set(_records(corpus)), (corpus / ".agent-qa").exists()
        head_before = _git_head(corpus)
        twin = _twin(exe, corpus)
    try:
        before = raw()
        for k in range(repeat):
            root = tmp / f"empty-{k}"
            _init(root, exe)
            pair = {"add_empty": _run([exe, "--root", str(root), "runs", "ingest", str(first)],
                                      root, cpu="add_empty"),
                    "confirm_empty": _run([exe, "--root", str(root), "runs", "ingest",
                                           str(second)], root, cpu="confirm_empty")}
            after = raw()
            keep(pair, before, after)
            before = after
            if corpus is not None:  # the same two runs into the corpus and into its twin
                runs = []
                for name in ("a", "b"):
                    runs.append(tmp / f"corpus-{k}-{name}.json")
                    runs[-1].write_text(json.dumps(make_run(
                        f"bench-{name}-{k}", product=f"bench-shop-{k}")), encoding="utf-8")
                assert twin is not None
                secs, same = _twin_pair(exe, corpus, twin, runs, k)
                times["confirm_corpus"].append(secs)
                times["confirm_twin"].append(same)
                paired["confirm_corpus"].append(secs / same)
                memory = "agent-qa-knowledge/memory"
                in_corpus = raw_limit(files, tmp, f"corpus-{k}", into=corpus / memory)
                paired["raw_corpus"].append(in_corpus / raw_limit(files, tmp, f"empty-{k}",
                                                                  into=root / memory))
            if daemon:
                root = tmp / f"daemon-{k}"
                _init(root, exe)
                served = Daemon(exe, root)
                try:
                    pair = {key: _run([exe, "--root", str(root), "runs", "ingest", str(run)],
                                      root, warm="require", cpu=key, daemon=served.proc)
                            for key, run in (("add_daemon", first), ("confirm_daemon", second))}
                finally:
                    served.stop()
                after = raw()
                keep(pair, before, after)
                before = after
                if corpus is not None:  # beside the confirm into the empty daemon's
                    runs = []
                    for name in ("a", "b"):
                        runs.append(tmp / f"corpus-daemon-{k}-{name}.json")
                        runs[-1].write_text(json.dumps(make_run(
                            f"bench-daemon-{name}-{k}", product=f"bench-shop-daemon-{k}")),
                            encoding="utf-8")
                    assert twin is not None
                    secs, same = _twin_pair(exe, corpus, twin, runs, k, daemon=True)
                    times["confirm_corpus_daemon"].append(secs)
                    times["confirm_twin_daemon"].append(same)
                    paired["confirm_corpus_daemon"].append(secs / same)
    finally:
        if corpus is not None:
            _corpus_restore(corpus, corpus_before, had_state, head_before)
        if twin is not None:
            shutil.rmtree(twin, ignore_errors=True)
    out: dict[str, Any] = {"records_written": len(files),
                           **{key: sorted(v) for key, v in times.items()},
                           "paired": {key: sorted(v) for key, v in paired.items()}}
    out["cpu"] = {key: sorted(v) for key, v in CPU.items()}
    return out


class Daemon:
    """``memidex daemon`` in ``root``, once it holds the lease and its warm socket is up."""

    def __init__(self, exe: str, root: Path) -> None:
        self.proc = subprocess.Popen([exe, "--root", str(root), "daemon"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, env=_env(""))
        marker = root / "agent-qa-knowledge/memory/queue/daemon.json"
        sock = root / ".agent-qa/warm.sock"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"error: the daemon exited: {self.proc.communicate()[1]}")
            try:
                if json.loads(marker.read_text()).get("pid") == self.proc.pid and \
                        sock.exists():
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.02)
        self.stop()
        raise SystemExit("error: the daemon did not start within 120 s")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        _out, err = self.proc.communicate(timeout=60)
        if self.proc.returncode != 0:
            raise SystemExit(f"error: the daemon exited {self.proc.returncode}: {err}")


def _twin(exe: str, corpus: Path) -> Path:
    """An empty repository beside the corpus (in the same folder, away from the empty
    repositories of ``tmp``), committed as the corpus is, that takes every ingest the
    corpus takes: the baseline of the confirm into N records.

    On an ext4 without a journal (this machine's disk), a file created in a block group
    where files were freed in the last 60 s (360 s while their inode table block is dirty)
    costs more: the inode allocator reads past each such inode, on every create
    (``recently_deleted`` in ``find_inode_bit``; ~0.5 ms a create after a few thousand
    frees, against ~30 us). A confirm frees the inodes of the records it replaces, in the
    staging folder's group where they were made. The corpus is used again each repeat, so
    its staging folder's group holds every earlier repeat's frees, which a new empty
    repository does not: the twin has the corpus's history, so the ratio is of N alone."""
    for left in corpus.parent.glob(f".{glob.escape(corpus.name)}.twin-*"):  # a killed bench's
        shutil.rmtree(left, ignore_errors=True)
    twin = corpus.parent / f".{corpus.name}.twin-{os.getpid()}"
    _init(twin, exe)
    git_commit(twin, "the twin of the benchmark corpus")
    return twin


def _twin_pair(exe: str, corpus: Path, twin: Path, runs: list[Path], k: int, *,
               daemon: bool = False) -> tuple[float, float]:
    """The same two runs into the corpus and into its twin (which goes first alternates
    with the repeat, against the machine's drift): the two confirms' seconds."""
    order = [(corpus, "corpus"), (twin, "twin")]
    if k % 2:
        order.reverse()
    secs: dict[str, float] = {}
    for root, name in order:
        cpu = f"confirm_{name}" + ("_daemon" if daemon else "")
        secs[name] = _corpus_case(exe, root, runs[0], runs[1], daemon=daemon, cpu=cpu)
    return secs["corpus"], secs["twin"]


def _corpus_case(exe: str, corpus: Path, first: Path, second: Path, *,
                 daemon: bool, cpu: str) -> float:
    """The confirm run into the corpus (after the adds of ``first``), one-shot or
    (``daemon``) into a ``memidex daemon`` serving the corpus. Each repeat's runs are of a
    product of their own, so their records are new files and nothing is deleted between
    repeats (:func:`_corpus_restore` removes them all at the end): on ext4 a file created
    soon after many were deleted costs several times more. What the two runs wrote is
    committed after the timed confirm (:func:`_commit_records`)."""
    if not daemon:
        subprocess.run([exe, "--root", str(corpus), "runs", "ingest", str(first)],
                       check=True, capture_output=True, env=_env("0"))
        secs = _run([exe, "--root", str(corpus), "runs", "ingest", str(second)], corpus,
                    cpu=cpu)
    else:
        served = Daemon(exe, corpus)
        try:
            _run([exe, "--root", str(corpus), "runs", "ingest", str(first)], corpus,
                 warm="require")
            secs = _run([exe, "--root", str(corpus), "runs", "ingest", str(second)], corpus,
                        warm="require", cpu=cpu, daemon=served.proc)
        finally:
            served.stop()
    _commit_records(corpus)
    return secs


GIT_IDENTITY = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@memidex.invalid",
                "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@memidex.invalid"}
"""Who commits the benchmark's corpus and what its runs wrote (:func:`git_commit`)."""


def git_commit(root: Path, message: str, *paths: str) -> None:
    """``git add -A [paths]`` and a commit as :data:`GIT_IDENTITY` (``bench/run.py``'s
    corpus, each repeat's records, the twin). ``gc.auto=0``: after a commit of many new
    files git's automatic gc packs them in the background and deletes as many loose
    objects while the benchmark runs, and on ext4 creating files costs more for minutes
    after many were deleted nearby."""
    env = {**os.environ, **GIT_IDENTITY}
    for cmd in (["git", "add", "-A", *paths],
                ["git", "-c", "gc.auto=0", "commit", "-q", "-m", message]):
        subprocess.run(cmd, cwd=root, check=True, env=env, capture_output=True)


def _git_head(corpus: Path) -> str | None:
    out = subprocess.run(["git", "rev-parse", "-q", "--verify", "HEAD"], cwd=corpus,
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or None


def _commit_records(corpus: Path) -> None:
    """Commit what the repeat's ingests wrote, as a team commits what its agents learn:
    left uncommitted, each repeat's 475 records would be suspects of every later repeat's
    look — the case of uncommitted records, not of N records (the target's)."""
    if _git_head(corpus) is not None:
        git_commit(corpus, "what the bench learned", "agent-qa-knowledge/memory/records")


def _corpus_restore(corpus: Path, before: set[Path], had_state: bool,
                    head: str | None = None) -> None:
    """Everything the corpus ingests made, removed, and (``head``) its commits undone."""
    if head is not None and _git_head(corpus) != head:
        subprocess.run(["git", "reset", "-q", "--mixed", head], cwd=corpus, check=True,
                       capture_output=True)
    state = corpus / ".agent-qa"
    for p in _records(corpus):
        if p not in before:
            p.unlink()
    for sub in ("runs", "build-ordinals.json"):
        target = state / sub
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        elif target.exists():
            target.unlink()
    if not had_state:
        shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(corpus / "agent-qa-knowledge/memory/queue", ignore_errors=True)
    for raw in (corpus / "agent-qa-knowledge/memory").glob(f"{RAW_MEMORY}-*"):
        shutil.rmtree(raw, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--corpus", type=Path, default=None, help="a corpus repository "
                   "(bench/corpus/...) for the into-N-records case")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-daemon", action="store_true", help="leave out the daemon figures")
    args = p.parse_args()
    exe = shutil.which("memidex", path=str(Path(sys.executable).parent)) or "memidex"
    with tempfile.TemporaryDirectory(prefix="memidex-ingest-") as d:
        figures = ingest_figures(exe, Path(d), args.corpus, args.repeat,
                                 daemon=not args.no_daemon)
    med = {k: v[len(v) // 2] for k, v in figures.items() if isinstance(v, list)}
    cpu = {k: v[len(v) // 2] for k, v in figures["cpu"].items()}
    raw = med["raw"]
    print(f"records written per run: {figures['records_written']}; medians of "
          f"{args.repeat} (raw: of {len(figures['raw'])}); cpu = user + system seconds "
          "(with a daemon: the client's and the daemon's)")
    print(f"raw write+fsync+rename     {raw:.3f} s   cpu {cpu['raw']:.3f} s")
    for key in ("add_empty", "confirm_empty", "add_daemon", "confirm_daemon"):
        if key in med:
            pair = figures["paired"].get(key)
            beside = (f"   paired {pair[len(pair) // 2]:.2f} x (range "
                      f"{pair[0]:.2f}-{pair[-1]:.2f})") if pair else ""
            print(f"ingest {key:19} {med[key]:.3f} s   cpu {cpu[key]:.3f} s   ratio "
                  f"{med[key] / raw:.2f} x raw{beside}")
    if "confirm_corpus" in med:
        pair = figures["paired"]["confirm_corpus"]
        print(f"ingest confirm_corpus      {med['confirm_corpus']:.3f} s   cpu "
              f"{cpu['confirm_corpus']:.3f} s   ratio {pair[len(pair) // 2]:.2f} x the same "
              f"confirm into its twin, {med['confirm_twin']:.3f} s, an empty repository with "
              f"the corpus's history (range {pair[0]:.2f}-{pair[-1]:.2f})")
    if "confirm_corpus_daemon" in med:
        pair = figures["paired"]["confirm_corpus_daemon"]
        print(f"ingest confirm_corpus_daemon {med['confirm_corpus_daemon']:.3f} s   cpu "
              f"{cpu['confirm_corpus_daemon']:.3f} s   ratio {pair[len(pair) // 2]:.2f} x the "
              f"same into the twin's daemon, {med['confirm_twin_daemon']:.3f} s (range "
              f"{pair[0]:.2f}-{pair[-1]:.2f})")
    if figures["paired"].get("raw_corpus"):
        pair = figures["paired"]["raw_corpus"]
        print(f"the raw script in the corpus's memory/ folder: {pair[len(pair) // 2]:.2f} x "
              f"the same in an empty repository's (range {pair[0]:.2f}-{pair[-1]:.2f}): "
              "the disk's own growth with N")
    return 0


if __name__ == "__main__":
    os.environ.pop("CI", None)
    raise SystemExit(main())
