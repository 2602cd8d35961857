"""The warm path's figures (docs/warm.md), with no daemon and with ``memidex daemon`` running,
side by side, each beside the raw CLI floor measured in the same run:

* a CLI search (``knowledge search Q --json``);
* the first CLI search after a one-record edit (one record's body appended to in place,
  the search for the word it added must find it; the edit undone after, untimed);
* a CLI brief (``brief TEST --json --no-record``) and the first brief after a one-record
  edit (a record the brief serves: the brief must carry the edit);
* ``doctor --json``, against a search on the same path.

No daemon: ``MEMIDEX_WARM=0`` (the one-shot path, as without a daemon). Daemon:
``MEMIDEX_WARM=require`` (a command the daemon did not answer fails the benchmark).

Run alone: ``python bench/warm_bench.py --corpus DIR`` (a corpus ``run.py`` made, with
its index); ``bench/run.py`` calls :func:`warm_figures`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

KNOWLEDGE = "agent-qa-knowledge/memory"


def _env(warm: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    env["MEMIDEX_WARM"] = warm
    return env


def timed(cmd: Sequence[str], warm: str, ok: tuple[int, ...] = (0,)) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env=_env(warm), check=False)
    secs = time.perf_counter() - t0
    if proc.returncode not in ok:
        raise SystemExit(f"error: {' '.join(cmd)} (MEMIDEX_WARM={warm}) exited "
                         f"{proc.returncode}: {proc.stderr.strip()[-1000:]}")
    return secs, proc.stdout


class Daemon:
    """``memidex daemon`` in ``corpus``, answering once it holds the lease and serves."""

    def __init__(self, exe: str, corpus: Path) -> None:
        self.proc = subprocess.Popen([exe, "--root", str(corpus), "daemon", "--json"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=_env(""))
        t0 = time.perf_counter()
        marker = corpus / KNOWLEDGE / "queue/daemon.json"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"error: the daemon exited: {self.proc.communicate()[1]}")
            try:
                if json.loads(marker.read_text()).get("pid") == self.proc.pid:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.02)
        self.start_seconds = time.perf_counter() - t0

    def stop(self) -> dict[str, Any]:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=60)
        if self.proc.returncode != 0:
            raise SystemExit(f"error: the daemon exited {self.proc.returncode}: {err}")
        report: dict[str, Any] = json.loads(out)
        return report


def _edit(path: Path, token: str) -> bytes:
    """Append a word to a record's body, in place (the folder's mtime does not move)."""
    original = path.read_bytes()
    with path.open("ab") as f:
        f.write(f" The {token} marker.\n".encode())
    return original


def _path_of(corpus: Path, rid: str) -> Path:
    return corpus / KNOWLEDGE / "records" / rid.split("-", 1)[0] / f"{rid}.md"


Floor = Callable[[int], Sequence[str]]
"""The raw CLI floor's command line for run ``i`` (``raw_limit.py --query DB Q``)."""


def measure(exe: str, corpus: Path, queries: Sequence[str], tests: Sequence[str],
            warm: str, k: int, tag: str, floor: Floor | None = None
            ) -> tuple[dict[str, list[float]], dict[str, list[float]], list[float]]:
    """Each figure ``k`` times on one path (``warm``: ``0`` or ``require``); with
    ``floor``, the raw CLI floor is run just before each timed command, and each
    command's ratio to the floor beside it is kept (``pairs``): this machine's speed
    drifts within minutes, so a floor measured once, earlier, is not the same
    machine's. Returns the seconds, the pairs and the floor's seconds."""
    root = ["--root", str(corpus)]
    out: dict[str, list[float]] = {"search": [], "search_edit": [], "brief": [],
                                   "brief_edit": [], "doctor": []}
    pairs: dict[str, list[float]] = {key: [] for key in out}
    floors: list[float] = []

    def beside(i: int) -> float | None:
        if floor is None:
            return None
        secs = timed(floor(i), "0")[0]
        floors.append(secs)
        return secs

    def keep(key: str, secs: float, raw: float | None) -> None:
        out[key].append(secs)
        if raw:
            pairs[key].append(secs / raw)

    def search(q: str) -> tuple[float, list[dict[str, Any]]]:
        secs, stdout = timed([exe, *root, "knowledge", "search", q, "--json"], warm)
        return secs, list(json.loads(stdout)["results"])

    def brief(name: str) -> tuple[float, str]:
        return timed([exe, *root, "brief", name, "--json", "--no-record"], warm)

    for i in range(k):
        raw = beside(i)
        keep("search", search(queries[i % len(queries)])[0], raw)
    # the first search after a one-record edit: a record the first query finds
    _, hits = search(queries[0])
    target = _path_of(corpus, hits[0]["id"])
    for i in range(k):
        token = f"warmbench{tag}{i}q"
        raw = beside(i)
        original = _edit(target, token)
        try:
            secs, found = search(token)
            if [h["id"] for h in found] != [hits[0]["id"]]:
                raise SystemExit(f"error: the search after an edit did not see it ({warm})")
            keep("search_edit", secs, raw)
        finally:
            target.write_bytes(original)
        search(token)  # the undo seen (untimed)
    for i in range(k):
        raw = beside(i)
        keep("brief", brief(tests[i % len(tests)])[0], raw)
    served = json.loads(brief(tests[0])[1])["records"]
    btarget = _path_of(corpus, served[0]["id"])
    for i in range(k):
        token = f"warmbrief{tag}{i}q"
        raw = beside(i)
        original = _edit(btarget, token)
        try:
            secs, stdout = brief(tests[0])
            if token not in stdout:
                raise SystemExit(f"error: the brief after an edit did not carry it ({warm})")
            keep("brief_edit", secs, raw)
        finally:
            btarget.write_bytes(original)
        brief(tests[0])
    for _ in range(k):
        secs, stdout = timed([exe, *root, "doctor", "--json"], warm, ok=(0, 1))
        path = json.loads(stdout)["serving"]["path"]
        if path != ("warm" if warm == "require" else "one-shot"):
            raise SystemExit(f"error: doctor was served by the {path} path")
        out["doctor"].append(secs)
    return out, pairs, floors


FIGURES = (("search", "CLI search", 2.5, 1.5),
           ("search_edit", "first search after a 1-record edit", 3.0, 1.5),
           ("brief", "CLI brief", 2.5, 1.5),
           ("brief_edit", "first brief after a 1-record edit", 3.0, 1.5),
           ("doctor", "doctor", None, None))


def warm_figures(exe: str, corpus: Path, queries: Sequence[str], tests: Sequence[str],
                 k: int = 10, floor: Floor | None = None) -> dict[str, Any]:
    """Both paths' figures (seconds), and the daemon's start-up and report; with
    ``floor``, ``pairs`` (each side's ratios to the floor run beside each command) and
    ``floors`` (every floor run's seconds)."""
    cold, cold_pairs, floors = measure(exe, corpus, queries, tests, "0", k, "c", floor)
    daemon = Daemon(exe, corpus)
    try:
        hot, hot_pairs, more = measure(exe, corpus, queries, tests, "require", k, "w", floor)
    finally:
        report = daemon.stop()
    out: dict[str, Any] = {"no_daemon": cold, "daemon": hot,
                           "daemon_start": daemon.start_seconds, "daemon_report": report}
    if floor is not None:
        out["pairs"] = {"no_daemon": cold_pairs, "daemon": hot_pairs}
        out["floors"] = floors + more
    return out


def ratio_of(fig: dict[str, Any], side: str, key: str, floor: float,
             quantile: Callable[[Sequence[float], float], float]) -> float:
    """A figure's ratio to the raw CLI floor: the median of its ratios to the floor run
    beside each command when the run paired them, else its median over ``floor``."""
    pairs = fig.get("pairs", {}).get(side, {}).get(key)
    if pairs:
        return quantile(pairs, 0.5)
    return quantile(fig[side][key], 0.5) / floor


def lines(fig: dict[str, Any], floor: float, quantile: Callable[[Sequence[float], float],
                                                               float]) -> list[str]:
    """The side-by-side table: medians (p95), ratios to the raw CLI floor (paired when the
    run paired them: the floor then printed is the median of those floor runs), targets."""
    paired = bool(fig.get("floors"))
    if paired:
        floor = quantile(fig["floors"], 0.5)
    out = [f"{'warm path (p50, p95)':<36} {'no daemon':<28} {'daemon':<28} "
           f"(raw CLI floor {floor:.3f} s{', run beside each command' if paired else ''})"]
    for key, name, t_cold, t_hot in FIGURES:
        cells = []
        for side, target in (("no_daemon", t_cold), ("daemon", t_hot)):
            runs = fig[side][key]
            med, p95 = quantile(runs, 0.5), quantile(runs, 0.95)
            if key == "doctor":
                search = quantile(fig[side]["search"], 0.5)
                ratio = med / search
                mark = "ok" if ratio <= 2.0 else "MISSED"
                cells.append(f"{med:.3f} {p95:.3f}  {ratio:4.2f}x srch {mark}")
            else:
                ratio = ratio_of(fig, side, key, floor, quantile)
                mark = "ok" if target is not None and ratio <= target else "MISSED"
                cells.append(f"{med:.3f} {p95:.3f}  {ratio:4.2f}x <={target}x {mark}")
        out.append(f"{name:<36} {cells[0]:<28} {cells[1]:<28}")
    out.append(f"{'daemon start (lease, index, watcher)':<36} {'':<28} "
               f"{fig['daemon_start']:.2f} s")
    return out


def main() -> int:
    import gen_corpus
    import run

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--seed", type=int, default=None,
                   help="the corpus's generator seed (default: the one it was made with)")
    p.add_argument("--cli-repeat", type=int, default=10)
    args = p.parse_args()
    import brief_bench
    import raw_limit

    corpus = args.corpus.resolve()
    exe = run.memidex_exe()
    meta = json.loads((corpus / gen_corpus.CORPUS_META).read_text())
    seed = int(meta.get("seed", 7)) if args.seed is None else args.seed  # its anchor pool
    tests = brief_bench._setup(corpus, int(meta["n"]), seed, 20, prefix="warm-test")
    queries = gen_corpus.make_queries(seed, args.cli_repeat)
    with __import__("tempfile").TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "raw.sqlite")
        raw_limit.raw_1proc(str(corpus), db)
        floor = run.quantile(run.repeat_timed(
            lambda i: [sys.executable, str(BENCH / "raw_limit.py"), "--query", db,
                       queries[i]], len(queries)), 0.5)
        fig = warm_figures(exe, corpus, queries, tests, args.cli_repeat, floor=lambda i: [
            sys.executable, str(BENCH / "raw_limit.py"), "--query", db,
            queries[i % len(queries)]])
    for line in lines(fig, floor, run.quantile):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
