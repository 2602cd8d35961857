"""The memidex benchmark: one line per figure, each with its ratio to the raw limit.

    python bench/run.py [--n 100000] [--corpus DIR] [--seed 7] [--json] [--keep]

1. Generate the corpus (``gen_corpus.py``) or reuse ``--corpus`` / ``bench/corpus/n<N>-seed<S>``
   when it already holds the same N and seed.
2. Measure the raw limit in this run (``raw_limit.py`` in a subprocess): a plain
   parse-and-insert script, 1 process and a 2-process parse pool; plain FTS5 queries
   on its database in process; the floor of a CLI search (start Python, open SQLite,
   query); and a bare Python start.
3. Measure memidex as a user runs it: ``knowledge rebuild-index`` end to end, its peak
   memory, the index size, search in process (the facade) and through the CLI, refresh
   after 1 changed + 1 added + 1 deleted record (the next CLI search), ``doctor`` and
   ``memidex --help``.

Every number printed is measured in this run. ``--json`` prints one JSON object on
stdout (the human lines then go to stderr). SPEC §9 targets are shown where it sets one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import gen_corpus  # noqa: E402
import raw_limit  # noqa: E402

INDEX_REL = "agent-qa-knowledge/memory/index/memidex.sqlite"
GNU_TIME = "/usr/bin/time"


# --- statistics and figures ------------------------------------------------------------


def quantile(xs: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (q in [0, 1]) of a non-empty sample."""
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass
class Figure:
    name: str
    unit: str  # "s", "ms", "MB" or "x"
    median: float
    p95: float | None = None
    p99: float | None = None
    runs: list[float] = field(default_factory=list)
    baseline_name: str | None = None
    baseline: float | None = None
    ratio: float | None = None
    target: str | None = None
    ok: bool | None = None
    note: str = ""


def timed_figure(name: str, runs: list[float], unit: str = "s", *, p99: bool = False,
                 baseline_name: str | None = None, baseline: float | None = None,
                 target: tuple[str, float] | None = None, target_on: str = "median",
                 note: str = "") -> Figure:
    scale = 1000.0 if unit == "ms" else 1.0
    vals = [r * scale for r in runs]
    f = Figure(name, unit, quantile(vals, 0.5), runs=vals, note=note)
    if len(vals) > 1:
        f.p95 = quantile(vals, 0.95)
        if p99:
            f.p99 = quantile(vals, 0.99)
    if baseline is not None and baseline > 0:
        f.baseline_name, f.baseline = baseline_name, baseline * scale
        f.ratio = (f.p95 if target_on == "p95" and f.p95 is not None else f.median) / (
            baseline * scale)
    if target is not None:
        label, limit = target
        value = {"median": f.median, "p95": f.p95, "p99": f.p99}[target_on]
        f.target = label
        f.ok = value is not None and value <= limit * scale
    return f


def _num(v: float, unit: str) -> str:
    if unit == "ms":
        return f"{v:.1f} ms" if v < 100 else f"{v:.0f} ms"
    if unit == "s":
        return f"{v:.3f} s" if v < 1 else f"{v:.2f} s"
    if unit == "MB":
        return f"{v:.0f} MB"
    return f"{v:.2f} x"


def render(f: Figure) -> str:
    if f.p95 is None:
        value = _num(f.median, f.unit)
    else:
        value = f"p50 {_num(f.median, f.unit)}  p95 {_num(f.p95, f.unit)}"
        if f.p99 is not None:
            value += f"  p99 {_num(f.p99, f.unit)}"
    line = f"{f.name:<34} {value:<44}"
    if f.ratio is not None and f.baseline is not None:
        line += f" ratio {f.ratio:5.2f} x {f.baseline_name} ({_num(f.baseline, f.unit)})"
    if f.target:
        line += f"   [target {f.target}: {'ok' if f.ok else 'MISSED'}]"
    if f.note:
        line += f"   ({f.note})"
    return line.rstrip()


# --- running things --------------------------------------------------------------------


def run_timed(cmd: Sequence[str], *, capture: bool = True,
              ok_codes: tuple[int, ...] = (0,)) -> tuple[float, str]:
    """Seconds for one subprocess run, and its stdout; raises if it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if proc.returncode not in ok_codes:
        raise SystemExit(f"error: {' '.join(cmd)} exited {proc.returncode}:\n"
                         f"{proc.stderr.strip()[-2000:]}")
    return elapsed, proc.stdout or ""


def repeat_timed(cmd_for: Callable[[int], Sequence[str]], times: int,
                 check: Callable[[str], None] | None = None,
                 ok_codes: tuple[int, ...] = (0,)) -> list[float]:
    out = []
    for i in range(times):
        secs, stdout = run_timed(cmd_for(i), ok_codes=ok_codes)
        if check is not None:
            check(stdout)
        out.append(secs)
    return out


def _proc_tree(root: int) -> list[int]:
    """``root`` and its live descendants, from /proc/*/stat."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
    tree, frontier = [root], [root]
    while frontier:
        kids = [p for p, pp in parents.items() if pp in frontier]
        tree += kids
        frontier = kids
    return tree


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_memory(cmd: Sequence[str]) -> tuple[float, float | None, float]:
    """Run ``cmd`` once: (peak RSS of its largest process in MB, peak PSS summed over its
    process tree in MB sampled every 0.1 s or None, seconds)."""
    tree_peak = [0]
    use_time = os.access(GNU_TIME, os.X_OK)
    with tempfile.NamedTemporaryFile("r", suffix=".time", delete=False) as tf:
        time_out = tf.name
    full = [GNU_TIME, "-v", "-o", time_out, *cmd] if use_time else list(cmd)
    t0 = time.perf_counter()
    proc = subprocess.Popen(full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    done = threading.Event()

    def sample() -> None:
        if not os.path.exists("/proc/self/smaps_rollup"):
            return
        while not done.wait(0.1):
            total = sum(_pss_kb(p) for p in _proc_tree(proc.pid))
            tree_peak[0] = max(tree_peak[0], total)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    elapsed = time.perf_counter() - t0
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} exited {proc.returncode}:\n{err[-2000:]}")
    if use_time:
        text = Path(time_out).read_text(encoding="utf-8", errors="replace")
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
        max_kb = int(m.group(1)) if m else 0
    else:
        import resource

        max_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    Path(time_out).unlink(missing_ok=True)
    tree = tree_peak[0] / 1024 if tree_peak[0] else None
    return max_kb / 1024, tree, elapsed


# --- the corpus ------------------------------------------------------------------------


def ensure_corpus(corpus: Path, n: int, seed: int) -> tuple[dict[str, Any], bool, float | None]:
    """(meta, generated now?, generation seconds)."""
    meta_path = corpus / gen_corpus.CORPUS_META
    if meta_path.exists():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("n") != n or meta.get("seed") != seed or meta.get(
                "generator_version") != gen_corpus.GENERATOR_VERSION:
            raise SystemExit(f"error: {corpus} holds a corpus of n={meta.get('n')} "
                             f"seed={meta.get('seed')}; choose another --corpus")
        return meta, False, None
    if corpus.exists() and any(corpus.iterdir()):
        raise SystemExit(f"error: {corpus} is not empty and holds no generated corpus")
    meta = gen_corpus.generate(n, corpus, seed)
    return meta, True, float(meta["seconds"])


GITIGNORE = """agent-qa-knowledge/memory/index/
agent-qa-knowledge/memory/queue/
agent-qa-knowledge/memory/staging/
agent-qa-knowledge/memory/.lease
agent-qa-knowledge/memory/.epoch
agent-qa-knowledge/memory/.writer-authority.*
.agent-qa/
"""


def commit_corpus(corpus: Path) -> float | None:
    """Commit the corpus to a git repository, as a team's records are (seconds, or None if
    it already is one). memidex then uses its git staleness check."""
    if (corpus / ".git").exists():
        return None
    started = time.perf_counter()
    (corpus / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    from ingest_bench import git_commit

    subprocess.run(["git", "init", "-q"], cwd=corpus, check=True, capture_output=True)
    git_commit(corpus, "benchmark corpus")
    return time.perf_counter() - started


def record_files_bytes(corpus: Path) -> tuple[int, int]:
    files = raw_limit.list_record_files(str(corpus))
    return len(files), sum(os.path.getsize(p) for p in files)


# --- refresh: 1 changed, 1 added, 1 deleted ---------------------------------------------


@dataclass
class Edit:
    changed: Path
    changed_bytes: bytes
    added: Path
    deleted: Path
    deleted_bytes: bytes
    token: str
    added_id: str


def apply_edit(corpus: Path, files: list[str], i: int, seed: int, n: int) -> Edit:
    """Change one record's body, add one new record, delete another (all valid)."""
    import random

    from memidex.records.codec import dump_record
    from memidex.records.ids import record_id

    step = max(1, len(files) // 7)
    changed = Path(files[(17 + i * step) % len(files)])
    deleted = Path(files[(len(files) // 2 + 31 + i * step) % len(files)])
    original = changed.read_bytes()
    changed.write_bytes(original.rstrip(b"\n") + f" Edited by the benchmark ({i}).\n".encode())
    deleted_bytes = deleted.read_bytes()
    deleted.unlink()
    token = f"benchrefresh{i}q{seed}"
    anchor = f"el:button:bench-refresh-{i}"
    product = gen_corpus.DEFAULT_PRODUCT
    rid = record_id("fact", anchor, product, {})
    plan = gen_corpus.Plan(-1, rid, "fact", "active", product, anchor, (), None, ())
    rec = gen_corpus.new_record(plan, random.Random(f"refresh:{seed}:{i}"), seed, n)
    from dataclasses import replace

    rec = replace(rec, body=rec.body + f" The {token} marker.")
    added = corpus / gen_corpus.RECORDS_DIR / "fact" / f"{rid}.md"
    added.write_text(dump_record(rec), encoding="utf-8")
    return Edit(changed, original, added, deleted, deleted_bytes, token, rid)


def undo_edit(e: Edit) -> None:
    e.changed.write_bytes(e.changed_bytes)
    e.added.unlink()
    e.deleted.write_bytes(e.deleted_bytes)


def _confirmed(text: str, run: str) -> str:
    """A record's text with one more confirmation and one more evidence item."""
    import re

    def more(m: re.Match[str]) -> str:
        return f"confirmations: {int(m.group(1)) + 1}"

    text = re.sub(r"confirmations: (\d+)", more, text, count=1)
    head, sep, rest = text.partition("\n---\n")
    item = f"  - {{run: {run}, test: bench-merge, step: 1, observed: seen}}\n"
    if "\nevidence:\n" in head:
        head = head.replace("\nevidence:\n", "\nevidence:\n" + item, 1)
    else:
        head += "\nevidence:\n" + item.rstrip("\n")
    return head + sep + rest


def merge_driver_runs(exe: str, files: list[str], tmp: Path, times: int) -> list[float]:
    """``memidex merge-driver O A B P`` on one record both sides confirmed (a clean merge)."""
    base = Path(files[len(files) // 3]).read_text(encoding="utf-8")
    out: list[float] = []
    for i in range(times):
        o, a, b = (tmp / f"merge-{i}-{x}.md" for x in "OAB")
        o.write_text(base, encoding="utf-8")
        a.write_text(_confirmed(base, "r-bench-a"), encoding="utf-8")
        b.write_text(_confirmed(base, "r-bench-b"), encoding="utf-8")
        secs, _ = run_timed([exe, "merge-driver", str(o), str(a), str(b), "record.md"])
        if "r-bench-b" not in a.read_text(encoding="utf-8"):
            raise SystemExit("error: the merge driver lost the other side's evidence")
        out.append(secs)
    return out


def review_runs(exe: str, corpus: Path, files: list[str], changed: int
                ) -> tuple[list[float], list[float]]:
    """``knowledge review HEAD`` with ``changed`` records confirmed in the working tree,
    beside ``git diff --stat HEAD`` of the same tree; the files are restored after."""
    step = max(1, len(files) // changed)
    picked = [Path(f) for f in files[::step][:changed]]
    saved = [(p, p.read_bytes()) for p in picked]
    try:
        for p, data in saved:
            p.write_text(_confirmed(data.decode("utf-8"), "r-bench-review"), encoding="utf-8")
        reviews: list[float] = []
        diffs: list[float] = []
        for _ in range(3):
            secs, stdout = run_timed([exe, "--root", str(corpus), "knowledge", "review",
                                      "HEAD", "--json"])
            count = json.loads(stdout).get("count")
            if count != changed:
                raise SystemExit(f"error: the review counted {count} changes, not {changed}")
            reviews.append(secs)
            diff, _ = run_timed(["git", "-C", str(corpus), "diff", "--stat", "HEAD"])
            diffs.append(diff)
        return reviews, diffs
    finally:
        for p, data in saved:
            p.write_bytes(data)


# --- main ------------------------------------------------------------------------------


def byte_compile() -> str:
    """Compile memidex's modules to .pyc files when they are not (an editable install with
    PYTHONDONTWRITEBYTECODE set compiles them again in every command, ~30-60 ms)."""
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("memidex")
    if spec is None or not spec.submodule_search_locations:
        return ""
    folder = list(spec.submodule_search_locations)[0]
    ok = compileall.compile_dir(folder, quiet=1)
    return folder if ok else ""


def memidex_exe() -> str:
    candidate = Path(sys.executable).parent / "memidex"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("memidex")
    if not found:
        raise SystemExit("error: no memidex executable next to this Python or on PATH")
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="memidex benchmark (SPEC §9)")
    p.add_argument("--n", type=int, default=100_000, help="records in the corpus")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--corpus", type=Path, default=None,
                   help="corpus directory (default bench/corpus/n<N>-seed<S>); reused if it "
                        "holds the same N and seed")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--keep", action="store_true",
                   help="keep a corpus generated by this run (default: delete it)")
    p.add_argument("--repeat", type=int, default=None,
                   help="runs of each rebuild, raw and memidex (default 3 up to 20k, else 1)")
    p.add_argument("--cli-repeat", type=int, default=10, help="runs of each short CLI figure")
    p.add_argument("--queries", type=int, default=200, help="in-process search queries")
    p.add_argument("--no-git", action="store_true",
                   help="leave the corpus out of git: memidex then stats every file to "
                        "notice changes (its stat method) instead of asking git")
    args = p.parse_args(argv)

    out: TextIO = sys.stderr if args.json else sys.stdout
    repeat = args.repeat or (3 if args.n <= 20_000 else 1)
    corpus: Path = (args.corpus or BENCH / "corpus" / f"n{args.n}-seed{args.seed}").resolve()
    exe = memidex_exe()
    py = sys.executable
    figures: list[Figure] = []

    def note(msg: str) -> None:
        print(f"# {msg}", file=sys.stderr, flush=True)

    compiled = byte_compile()
    if compiled:
        note(f"byte-compiled memidex ({compiled}), as pip does when it installs a package")

    def emit(f: Figure) -> None:
        figures.append(f)
        print(render(f), file=out, flush=True)

    note(f"corpus {corpus} (n={args.n}, seed={args.seed})")
    meta, generated, gen_secs = ensure_corpus(corpus, args.n, args.seed)
    if args.no_git:
        if (corpus / ".git").exists():
            raise SystemExit(f"error: {corpus} is a git repository; --no-git needs another "
                             "--corpus")
    else:
        git_secs = commit_corpus(corpus)
        if git_secs is not None:
            note(f"committed the corpus to git in {git_secs:.1f} s")
    n_files, rec_bytes = record_files_bytes(corpus)
    print(f"corpus: {n_files} records, {rec_bytes / 1e6:.1f} MB "
          f"({rec_bytes / max(1, n_files):.0f} B average), seed {args.seed}"
          + (f", generated in {gen_secs:.2f} s" if gen_secs is not None else ", reused")
          + f"; {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"SQLite {sqlite3.sqlite_version}", file=out, flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="memidex-bench-"))
    mem_root = ["--root", str(corpus)]
    queries = gen_corpus.make_queries(args.seed, args.queries)
    common = set(gen_corpus.common_words(args.seed, 12))
    product = gen_corpus.DEFAULT_PRODUCT
    try:
        # --- the raw limit ---------------------------------------------------------
        note(f"raw limit: parse-and-insert x{repeat} (1 process, then a 2-process pool)")
        secs, stdout = run_timed([py, str(BENCH / "raw_limit.py"), str(corpus), "--repeat",
                                  str(repeat), "--json", "--db-dir", str(tmp)])
        raw = json.loads(stdout)
        raw1, raw2 = raw["1proc"], raw["2proc"]
        raw_mem = raw["maxrss_kb"] / 1024  # the parent, which parses and inserts
        emit(timed_figure("raw limit, 1 process", raw1["seconds"]))
        emit(timed_figure("raw limit, 2-process parse pool", raw2["seconds"],
                          baseline_name="raw-1proc", baseline=raw1["median"]))
        raw_db = raw1["db"]
        raw_search = raw_limit.raw_search(raw_db, queries, product)
        emit(timed_figure("raw FTS5 top-10 query, in process", raw_search, "ms", p99=True))
        cli_q = queries[: args.cli_repeat]
        raw_cli = repeat_timed(
            lambda i: [py, str(BENCH / "raw_limit.py"), "--query", raw_db, cli_q[i]],
            len(cli_q))
        emit(timed_figure("raw CLI search floor", raw_cli, "s",
                          note="python start + sqlite3 + one query"))
        py_start = repeat_timed(lambda i: [py, "-c", "pass"], args.cli_repeat)
        emit(timed_figure("python start (-c pass)", py_start, "s"))
        raw_cli_med = quantile(raw_cli, 0.5)

        # --- rebuild ---------------------------------------------------------------
        note(f"memidex knowledge rebuild-index x{repeat}")
        rebuild_cmd = [exe, *mem_root, "knowledge", "rebuild-index"]
        # each rebuild right after a run of the 2-process script: the ratio (and the
        # target) is the median of those pairs, as this machine's speed drifts
        rebuilds, paired = [], []
        for _ in range(repeat):
            beside, _out = run_timed([py, str(BENCH / "raw_limit.py"), str(corpus), "--mode",
                                      "2proc", "--db-dir", str(tmp)])
            secs, _out = run_timed(rebuild_cmd)
            rebuilds.append(secs)
            paired.append(secs / beside)
        rebuilt = timed_figure("rebuild (end to end)", rebuilds, baseline_name="raw-2proc",
                               baseline=raw2["median"],
                               note=f"{quantile(rebuilds, 0.5) / raw1['median']:.2f} x "
                               f"raw-1proc; paired ratios {min(paired):.2f}-{max(paired):.2f}")
        rebuilt.ratio = quantile(paired, 0.5)
        rebuilt.target, rebuilt.ok = "<= 0.6 x raw-2proc (paired)", rebuilt.ratio <= 0.6
        emit(rebuilt)
        note("rebuild once more for peak memory")
        max_rss, tree_pss, _ = peak_memory(rebuild_cmd)
        mem_note = (f"largest process; whole process tree PSS {tree_pss:.0f} MB"
                    if tree_pss is not None else "largest process")
        emit(Figure("rebuild peak memory", "MB", max_rss, baseline_name="raw-1proc",
                    baseline=raw_mem, ratio=max_rss / raw_mem if raw_mem else None,
                    target="<= 500 MB", ok=max_rss <= 500 and (tree_pss or 0) <= 500,
                    note=mem_note))
        index = corpus / INDEX_REL
        idx_bytes = sum(os.path.getsize(f) for f in (index, Path(f"{index}-wal"))
                        if f.exists())
        emit(Figure("index size / record bytes", "x", idx_bytes / rec_bytes,
                    baseline_name="raw db", baseline=raw1["db_bytes"] / rec_bytes,
                    ratio=idx_bytes / raw1["db_bytes"], target="<= 2 x",
                    ok=idx_bytes <= 2 * rec_bytes,
                    note=f"index {idx_bytes / 1e6:.1f} MB, records {rec_bytes / 1e6:.1f} MB"))

        # --- search in process -----------------------------------------------------
        note(f"search in process: {len(queries)} queries through memidex.app.Memidex")
        from memidex.app import Memidex

        t0 = time.perf_counter()
        m = Memidex(corpus)
        m.search(queries[0], product=product, limit=10)
        first_secs = time.perf_counter() - t0
        lat: list[float] = []
        common_lat: list[float] = []
        hits = 0
        for q in queries:
            t0 = time.perf_counter()
            res = m.search(q, product=product, limit=10)
            dt = time.perf_counter() - t0
            lat.append(dt)
            hits += bool(res.results)
            if all(w in common for w in q.split()):
                common_lat.append(dt)
        m.close()
        f = timed_figure("search in process", lat, "ms", p99=True, baseline_name="raw p95",
                         baseline=quantile(raw_search, 0.95), target_on="p95",
                         note=f"{hits}/{len(queries)} found something; first call "
                              f"{first_secs * 1000:.0f} ms")
        f.target = "p95 <= 10 ms, p99 <= 50 ms"
        f.ok = quantile(lat, 0.95) <= 0.010 and quantile(lat, 0.99) <= 0.050
        emit(f)
        if common_lat:
            emit(timed_figure(f"  of which very common words ({len(common_lat)})", common_lat,
                              "ms", p99=True, target=("p99 <= 50 ms", 0.050),
                              target_on="p99"))

        # --- search through the CLI ------------------------------------------------
        note(f"CLI search x{len(cli_q)}")

        def check_search(stdout: str) -> None:
            data = json.loads(stdout)
            if "results" not in data:
                raise SystemExit(f"error: search --json gave no results key: {stdout[:200]}")

        cli = repeat_timed(
            lambda i: [exe, *mem_root, "knowledge", "search", cli_q[i], "--json"],
            len(cli_q), check_search)
        limit = 0.12 if args.n <= 10_000 else 0.25
        emit(timed_figure("search (CLI, end to end)", cli, "s", baseline_name="raw CLI floor",
                          baseline=raw_cli_med,
                          target=(f"<= {limit:.2f} s at {args.n // 1000}k", limit)))

        # --- refresh ---------------------------------------------------------------
        k = max(3, min(args.cli_repeat, 5))
        note(f"refresh after 1 changed + 1 added + 1 deleted record, x{k}")
        files = raw_limit.list_record_files(str(corpus))
        refresh: list[float] = []
        for i in range(k):
            edit = apply_edit(corpus, files, i, args.seed, args.n)
            try:
                secs, stdout = run_timed([exe, *mem_root, "knowledge", "search", edit.token,
                                          "--json"])
                ids = [r["id"] for r in json.loads(stdout)["results"]]
                if edit.added_id not in ids:
                    raise SystemExit(f"error: the search after the edit did not find the "
                                     f"added record {edit.added_id}: {ids}")
                refresh.append(secs)
            finally:
                undo_edit(edit)
            run_timed([exe, *mem_root, "knowledge", "search", edit.token, "--json"])
        _, doc_out = run_timed([exe, *mem_root, "doctor", "--json"], ok_codes=(0, 1))
        method = json.loads(doc_out)["index"].get("staleness", {}).get("method", "?")
        emit(timed_figure("refresh +1 ~1 -1, next CLI search", refresh, "s",
                          baseline_name="raw CLI floor", baseline=raw_cli_med,
                          target=("<= 0.3 s", 0.3), note=f"staleness method: {method}"))

        # --- doctor and --help -----------------------------------------------------
        note(f"doctor x{args.cli_repeat}")

        def check_doctor(stdout: str) -> None:
            if "healthy" not in json.loads(stdout):
                raise SystemExit(f"error: doctor --json gave no healthy key: {stdout[:200]}")

        # each doctor right after a search in the same state (after the edits above,
        # whose files git names until they are committed): the target is on those pairs
        doctor, doctor_pairs = [], []
        for i in range(args.cli_repeat):
            searched, _out = run_timed([exe, *mem_root, "knowledge", "search",
                                        cli_q[i % len(cli_q)], "--json"])
            secs, stdout = run_timed([exe, *mem_root, "doctor", "--json"], ok_codes=(0, 1))
            check_doctor(stdout)
            doctor.append(secs)
            doctor_pairs.append(secs / searched)
        doctored = timed_figure("doctor (end to end)", doctor, "s",
                                baseline_name="raw CLI floor", baseline=raw_cli_med,
                                note=f"{quantile(doctor_pairs, 0.5):.2f} x the search run "
                                f"just before it ({min(doctor_pairs):.2f}-"
                                f"{max(doctor_pairs):.2f})")
        doctored.target = "<= 2 x a CLI search (paired)"
        doctored.ok = quantile(doctor_pairs, 0.5) <= 2.0
        emit(doctored)
        # each --help right after a Python start, the target judged on those pairs
        helps, help_pairs = [], []
        for _ in range(args.cli_repeat):
            started, _out = run_timed([py, "-c", "pass"])
            secs, _out = run_timed([exe, "--help"])
            helps.append(secs)
            help_pairs.append(secs / started)
        helped = timed_figure("memidex --help", helps, "s", baseline_name="python start",
                              baseline=quantile(py_start, 0.5),
                              note=f"paired ratios {min(help_pairs):.2f}-"
                              f"{max(help_pairs):.2f}")
        helped.ratio = quantile(help_pairs, 0.5)
        helped.target, helped.ok = "<= 8 x python start (paired)", helped.ratio <= 8.0
        emit(helped)

        # --- the merge driver and knowledge review (docs/review.md) --------------------
        note(f"merge driver on one record x{args.cli_repeat}")
        merges = merge_driver_runs(exe, files, tmp, args.cli_repeat)
        emit(timed_figure("merge driver, one record", merges, "s",
                          baseline_name="python start", baseline=quantile(py_start, 0.5),
                          target=("<= 0.15 s", 0.15)))
        changed = min(1000, len(files) // 10)
        note(f"knowledge review of {changed} changed records x3 (and `git diff` of them)")
        reviews, raw_diff = review_runs(exe, corpus, files, changed)
        emit(timed_figure(f"review, {changed} changed records", reviews, "s",
                          baseline_name="git diff --stat", baseline=quantile(raw_diff, 0.5),
                          target=("<= 2 s", 2.0)))

        # --- reading what runners write: runs import (docs/import.md) -------------------
        import import_bench

        import_runs, import_tests = import_bench.runs(import_bench.REPORT, 5)
        emit(timed_figure(f"import {import_tests}-test playwright report", import_runs, "s",
                          target=("<= 1 s", 1.0)))

        # --- serving: brief in process and end to end, and over MCP (docs/brief.md) ------
        if not args.no_git:  # the review figure rewrote files: git's own index is stale
            subprocess.run(["git", "update-index", "-q", "--refresh"], cwd=corpus,
                           capture_output=True, check=False)  # as the next `git status`
        for script in ("brief_bench.py", "mcp_bench.py"):
            note(f"{script} on the corpus")
            done = subprocess.run([py, str(BENCH / script), "--corpus", str(corpus), "--n",
                                   str(args.n)], capture_output=True, text=True, check=False)
            for line in done.stdout.splitlines():
                print(line, file=out, flush=True)
            if done.returncode != 0:
                note(f"{script} failed: {done.stderr.strip()[-500:]}")

        # --- search by meaning (docs/vectors.md): needs a model cache --------------------
        models = Path(os.environ.get("MEMIDEX_MODEL_CACHE_DIR", "/tmp/memidex-models"))
        if models.is_dir():
            note(f"vectors_bench.py on the corpus with the models of {models}")
            done = subprocess.run([py, str(BENCH / "vectors_bench.py"), "--corpus",
                                   str(corpus), "--n", str(args.n), "--models", str(models)],
                                  capture_output=True, text=True, check=False)
            for line in done.stdout.splitlines():
                print(line, file=out, flush=True)
            if done.returncode != 0:
                note(f"vectors_bench.py failed: {done.stderr.strip()[-500:]}")
        else:
            note(f"search by meaning not measured: no model cache at {models} "
                 "(`python bench/retrieval/setup_models.py --cache DIR`, then "
                 "MEMIDEX_MODEL_CACHE_DIR=DIR)")

        # --- the warm path: no daemon and memidex daemon, side by side (docs/warm.md) ---
        import brief_bench
        import warm_bench

        note(f"the warm path: search, edit + search, brief, edit + brief, doctor x"
             f"{args.cli_repeat}, with no daemon and with memidex daemon")
        warm_tests = brief_bench._setup(corpus, args.n, args.seed, 20, prefix="warm-test")
        warm = warm_bench.warm_figures(
            exe, corpus, cli_q, warm_tests, args.cli_repeat,
            floor=lambda i: [py, str(BENCH / "raw_limit.py"), "--query", raw_db,
                             cli_q[i % len(cli_q)]])
        for key, name, t_cold, t_hot in warm_bench.FIGURES:
            for side, label, target in (("no_daemon", "no daemon", t_cold),
                                        ("daemon", "daemon", t_hot)):
                runs = warm[side][key]
                if key == "doctor":
                    base, base_name, tgt = (quantile(warm[side]["search"], 0.5),
                                            f"search, {label}", 2.0)
                else:
                    base, base_name, tgt = (quantile(warm["floors"], 0.5),
                                            "raw CLI floor run beside each", target)
                f = timed_figure(
                    f"{name}, {label}", runs, "s", baseline_name=base_name, baseline=base,
                    target=(f"<= {tgt:g}x", tgt * base) if tgt is not None else None)
                if key != "doctor":  # the ratio of pairs, the target judged on it
                    f.ratio = warm_bench.ratio_of(warm, side, key, base, quantile)
                    f.ok = tgt is not None and f.ratio <= tgt
                figures.append(f)
        for line in warm_bench.lines(warm, raw_cli_med, quantile):
            print(line, file=out, flush=True)

        # --- learning: runs ingest (docs/learning.md) ----------------------------------
        from ingest_bench import TESTS, ingest_figures

        note(f"runs ingest of a {TESTS}-test run x3 into empty repositories and into the "
             "corpus, and the raw write+fsync+rename script for the same files")
        ing = ingest_figures(exe, tmp, corpus, repeat=3)
        raw_ing = quantile(ing["raw"], 0.5)

        def ingest_figure(name: str, key: str, note_: str = "") -> Figure:
            """The median beside the raw runs' median; the ratio (and the 2x target) is
            the median of each run's ratio to the raw runs just before and after it."""
            f = timed_figure(name, ing[key], "s", baseline_name="raw write+fsync+rename",
                             baseline=raw_ing, note=note_)
            pairs = ing["paired"][key]
            f.ratio = quantile(pairs, 0.5)
            f.target, f.ok = "<= 2x raw (paired)", f.ratio <= 2.0
            f.note = (f"{note_}; " if note_ else "") + \
                f"paired ratios {pairs[0]:.2f}-{pairs[-1]:.2f}"
            return f

        emit(ingest_figure(f"ingest {TESTS} tests, empty repo", "add_empty",
                           f"{ing['records_written']} records"))
        emit(ingest_figure("ingest again (confirms), empty", "confirm_empty"))
        emit(ingest_figure(f"ingest {TESTS} tests into memidex daemon", "add_daemon"))
        emit(ingest_figure("ingest again (confirms) into the daemon", "confirm_daemon"))
        into = timed_figure(f"ingest again (confirms), {n_files:,}", ing["confirm_corpus"],
                            "s", baseline_name="the same into its twin (empty, same history)",
                            baseline=quantile(ing["confirm_twin"], 0.5))
        pairs = ing["paired"]["confirm_corpus"]  # each beside the twin's confirm
        into.ratio = quantile(pairs, 0.5)
        into.target, into.ok = "<= 1.2x (paired)", into.ratio <= 1.2
        into.note = f"paired ratios {pairs[0]:.2f}-{pairs[-1]:.2f}"
        emit(into)
        if "confirm_corpus_daemon" in ing:  # the same, each ingest through a daemon
            into_d = timed_figure(f"ingest again (confirms), {n_files:,}, daemon",
                                  ing["confirm_corpus_daemon"], "s",
                                  baseline_name="the same into its twin's daemon",
                                  baseline=quantile(ing["confirm_twin_daemon"], 0.5))
            pairs = ing["paired"]["confirm_corpus_daemon"]
            into_d.ratio = quantile(pairs, 0.5)
            into_d.target, into_d.ok = "<= 1.2x (paired)", into_d.ratio <= 1.2
            into_d.note = f"paired ratios {pairs[0]:.2f}-{pairs[-1]:.2f}"
            emit(into_d)
        pairs = ing["paired"]["raw_corpus"]  # where the files go, without memidex
        note(f"the raw script in the corpus's memory/ folder takes {quantile(pairs, 0.5):.2f}x "
             f"the same in an empty repository's (paired {pairs[0]:.2f}-{pairs[-1]:.2f}): "
             "the disk's own share of the growth with N")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if generated and not args.keep:
            note(f"removing the generated corpus {corpus} (use --keep to keep it)")
            shutil.rmtree(corpus, ignore_errors=True)

    if args.json:
        doc = {
            "n": n_files, "seed": args.seed, "corpus": str(corpus),
            "record_bytes": rec_bytes, "generated_seconds": gen_secs,
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "sqlite": sqlite3.sqlite_version, "platform": platform.platform()},
            "raw": raw,
            "figures": [asdict(f) for f in figures],
        }
        print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
