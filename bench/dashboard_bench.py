"""The dashboard's benchmark: each page through HTTP at N records,
beside the CLI's ``--json`` for the same data, measured in the same run.

    python bench/dashboard_bench.py [--n 100000] [--seed 7] [--corpus DIR] [--requests 30]
                                    [--cli-repeat 5] [--keep]

Uses (or generates and commits) the corpus ``run.py`` uses and builds its index when there
is none. The corpus has records but no runs, so this writes what the pages need: 12 runs
of 20 tests (product ``shop-web``, builds b1–b3, seeded) whose steps verify anchors of the
corpus and name corpus records among what they were served, some failing as flaky or
environment — ingested through the library, once (the same runs again are a no-op), and
what they taught committed to the corpus's git repository, as a team commits it. Then
it starts ``memidex dashboard --port 0`` and asks each page ``--requests`` times over one
keep-alive HTTP connection, as a browser does, after two warm-up requests. It prints, per
page, p50/p95 — target p95 <= 150 ms — with, as the baseline, the median of the CLI
command that answers the same question with ``--json`` (a fresh process each time, as a
person or an agent runs it):

    overview  doctor --json (the overview shows its level, index and lease, without the
              O(N) quick_check), runs  runs list, build  knowledge diff, run  runs show,
    flakiness runs show (one of the 12 it reads), record  knowledge show, records
              knowledge list --status candidate -n 200, brief  brief --no-record (the page
              makes two), search  knowledge search.

And the overview once more after a second of idleness, when the server re-checks the
files against the index (the staleness check every CLI command pays).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import gen_corpus  # noqa: E402
import run  # noqa: E402

RUNS = 12
TESTS = 20
BUILDS = ("b1", "b2", "b3")


def make_runs(corpus: Path, seed: int, n: int) -> list[dict[str, Any]]:
    """RUNS runs of TESTS tests over the corpus's anchors and records (seeded)."""
    from memidex.app import Memidex

    rng = random.Random(f"dashboard:{seed}")
    pool = gen_corpus.anchor_pool(seed, max(20, n // 5))
    with Memidex(corpus) as m:
        ids = [r.id for r in m.list_records(product=gen_corpus.DEFAULT_PRODUCT,
                                            statuses=["active"], limit=400).records]
    tests = [(f"dash-test-{i:02d}", rng.sample(pool, 4), rng.sample(ids, 3))
             for i in range(TESTS)]
    flaky = {name for name, _a, _r in tests[:4]}
    out = []
    for k in range(RUNS):
        run_tests = []
        for name, anchors, served in tests:
            fail = (name in flaky and rng.random() < 0.4) or rng.random() < 0.03
            hint = rng.choice(("flaky", "environment")) if fail else None
            steps = [{"index": i, "action": "assert", "target": a,
                      "anchors": [f"test:{name}"], "observed": f"{a} is shown",
                      "check": {"kind": "assert-visible", "passed": True},
                      "served_records": served[:1]} for i, a in enumerate(anchors[:3])]
            test: dict[str, Any] = {"test_id": name, "verdict": "fail" if fail else "pass",
                                    "steps": steps}
            if fail:
                steps[-1]["check"]["passed"] = False
                steps[-1].pop("observed")
                steps[-1]["error"] = "TimeoutError: locator.waitFor: Timeout 5000ms exceeded"
                test["failure"] = {"message": steps[-1]["error"], "step": 2, "hint": hint}
            run_tests.append(test)
        out.append({"run_id": f"dash-r-{k:03d}", "product": gen_corpus.DEFAULT_PRODUCT,
                    "build_tag": BUILDS[k * len(BUILDS) // RUNS], "ci": False,
                    "tests": run_tests})
    return out


def ingest(corpus: Path, runs: list[dict[str, Any]], tmp: Path) -> float:
    from memidex.app import Memidex

    t0 = time.perf_counter()
    with Memidex(corpus) as m:
        for r in runs:
            path = tmp / f"{r['run_id']}.json"
            path.write_text(json.dumps(r), encoding="utf-8")
            m.ingest(path)
    return time.perf_counter() - t0


def commit_taught(corpus: Path) -> None:
    """Commit the records the runs taught, as a team does (else every staleness check
    hashes them as untracked files)."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@memidex.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@memidex.invalid"}
    records = "agent-qa-knowledge/memory/records"
    subprocess.run(["git", "add", "-A", records], cwd=corpus, check=True, env=env,
                   capture_output=True)
    staged = subprocess.run(["git", "diff", "--cached", "--quiet"], cwd=corpus, env=env,
                            capture_output=True, check=False)
    if staged.returncode:
        subprocess.run(["git", "commit", "-q", "-m", "what the dashboard benchmark's runs "
                        "taught"], cwd=corpus, check=True, env=env, capture_output=True)
    subprocess.run(["git", "update-index", "-q", "--refresh"], cwd=corpus,
                   capture_output=True, check=False)


class Dashboard:
    """``memidex dashboard --port 0`` on the corpus, and one keep-alive connection."""

    def __init__(self, exe: str, corpus: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
        self.proc = subprocess.Popen([exe, "--root", str(corpus), "dashboard", "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("memidex dashboard: "):
            self.proc.kill()
            raise SystemExit(f"error: the dashboard did not start: {line}"
                             f"{self.proc.stderr.read() if self.proc.stderr else ''}")
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        url = line.split(": ", 1)[1].strip().rstrip("/")
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.address = (host, int(port))
        self.conn = http.client.HTTPConnection(*self.address, timeout=60)

    def get(self, path: str) -> tuple[float, int, int]:
        """Seconds for one page (the whole body read), its status and size. A connection
        the server closed while idle (uvicorn keeps one 5 s) is opened again, as a
        browser does, and the request timed again."""
        for attempt in (1, 2):
            t0 = time.perf_counter()
            try:
                self.conn.request("GET", path)
                resp = self.conn.getresponse()
                body = resp.read()
            except (http.client.RemoteDisconnected, ConnectionError):
                self.conn.close()
                self.conn = http.client.HTTPConnection(*self.address, timeout=60)
                if attempt == 2:
                    raise
                continue
            return time.perf_counter() - t0, resp.status, len(body)
        raise AssertionError("unreachable")

    def stop(self) -> None:
        self.conn.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="memidex dashboard benchmark")
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--corpus", type=Path, default=None)
    p.add_argument("--requests", type=int, default=30, help="requests per page")
    p.add_argument("--cli-repeat", type=int, default=5, help="runs of each CLI command")
    p.add_argument("--keep", action="store_true", help="keep a corpus generated now")
    args = p.parse_args(argv)
    corpus = (args.corpus or BENCH / "corpus" / f"n{args.n}-seed{args.seed}").resolve()
    exe = run.memidex_exe()
    run.byte_compile()
    _meta, generated, _secs = run.ensure_corpus(corpus, args.n, args.seed)
    run.commit_corpus(corpus)
    root = ["--root", str(corpus)]
    product = gen_corpus.DEFAULT_PRODUCT
    tmp = Path(tempfile.mkdtemp(prefix="memidex-dash-bench-"))
    try:
        if not (corpus / run.INDEX_REL).exists():
            run.run_timed([exe, *root, "knowledge", "rebuild-index"])
        runs = make_runs(corpus, args.seed, args.n)
        secs = ingest(corpus, runs, tmp)
        commit_taught(corpus)
        from memidex.app import Memidex

        with Memidex(corpus) as m:
            records = m.record_counts().total()
            one = m.run(runs[-1]["run_id"])
            rid = one.tests[0].served_records[0]
        test_id = runs[0]["tests"][0]["test_id"]
        query = gen_corpus.make_queries(args.seed, 1)[0]
        print(f"corpus: {records} records, seed {args.seed}; {RUNS} runs of {TESTS} tests "
              f"ingested in {secs:.1f} s (a no-op when already there)", flush=True)
        q = urlencode({"product": product})
        pages: list[tuple[str, str, list[str]]] = [
            ("overview", f"/?{q}", ["doctor", "--json"]),
            ("builds and runs", f"/runs?{q}", ["runs", "list", "--json"]),
            ("build diff", f"/builds/{BUILDS[-1]}?{q}",
             ["knowledge", "diff", BUILDS[-1], "--json"]),
            ("run", f"/runs/{runs[-1]['run_id']}", ["runs", "show", runs[-1]["run_id"],
                                                    "--json"]),
            (f"flakiness ({RUNS} runs)", f"/flaky?{q}", ["runs", "show", runs[0]["run_id"],
                                                        "--json"]),
            ("record", f"/records/{quote(rid)}", ["knowledge", "show", rid, "--json"]),
            ("records (candidates)", f"/records?{q}",
             ["knowledge", "list", "--status", "candidate", "-n", "200", "--json"]),
            ("proposals", "/proposals", ["knowledge", "proposals", "--json"]),
            ("brief preview (2 briefs)", f"/brief?{q}&test={test_id}",
             ["brief", test_id, "--json", "--no-record"]),
            ("search", f"/search?{q}&" + urlencode({"q": query}),
             ["knowledge", "search", query, "--json"]),
        ]
        dash = Dashboard(exe, corpus)
        try:
            for name, path, cli in pages:
                for _ in range(2):
                    _s, status, _size = dash.get(path)
                    if status != 200:
                        raise SystemExit(f"error: {path} answered {status}")
                lat = []
                size = 0
                for _ in range(args.requests):
                    secs, status, size = dash.get(path)
                    lat.append(secs)
                cli_runs = run.repeat_timed(lambda i, cli=cli: [exe, *root, *cli],
                                            args.cli_repeat)
                print(run.render(run.timed_figure(
                    f"dashboard {name}", lat, "ms", baseline_name="CLI " + " ".join(
                        c for c in cli if c not in (rid, query, test_id) and
                        not c.startswith("dash-r-")),
                    baseline=run.quantile(cli_runs, 0.5), target=("p95 <= 150 ms", 0.150),
                    target_on="p95", note=f"{size / 1024:.0f} KB")), flush=True)
            idle = []
            for _ in range(5):
                time.sleep(1.1)
                secs, _status, _size = dash.get(f"/?{q}")
                idle.append(secs)
            print(run.render(run.timed_figure(
                "dashboard overview, after 1 s idle", idle, "ms",
                target=("p95 <= 150 ms", 0.150), target_on="p95",
                note="re-checks the files against the index first")), flush=True)
        finally:
            dash.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if generated and not args.keep:
            shutil.rmtree(corpus, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
