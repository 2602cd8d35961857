"""The brief's benchmark, beside search's figures from the same run.

    python bench/brief_bench.py [--n 100000] [--seed 7] [--corpus DIR] [--tests 200]
                                [--cli-repeat 10] [--keep]

Uses (or generates and commits) the corpus ``run.py`` uses, builds its index when there
is none, then writes what a brief needs and the corpus lacks: ``build-ordinals.json``
(``shop-web``'s next run is 501, past every record's start) and a run store of
``--tests`` tests, each with 4–12 anchors drawn from the corpus's anchor pool (seeded).
It prints, each measured in this run:

* brief in process (``Memidex.brief``), p50/p95/p99, and search in process on the same
  facade — target p95 <= 10 ms at 100k;
* ``memidex brief --json`` end to end, and ``memidex knowledge search --json`` — targets
  <= 0.25 s at 100k, <= 0.12 s at 10k;
* the ratios brief / search.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import gen_corpus  # noqa: E402
import run  # noqa: E402

NEXT = 501


def _setup(corpus: Path, n: int, seed: int, tests: int, prefix: str = "bench-test"
           ) -> list[str]:
    """Give the product a next ordinal and ``tests`` tests with anchors from the corpus's
    anchor pool (seeded), so each brief ranks real records; their names."""
    from memidex.config import load_config
    from memidex.learning.fold import TestState
    from memidex.runstate.tests import TestsFile
    from memidex.store.state import DIRECT

    state = corpus / ".agent-qa"
    state.mkdir(exist_ok=True)
    (state / "build-ordinals.json").write_text(json.dumps(
        {"products": {gen_corpus.DEFAULT_PRODUCT: {"next": NEXT, "builds": {}}}}))
    pool = gen_corpus.anchor_pool(seed, max(20, n // 5))
    rng = random.Random(f"{prefix}:{seed}")
    names = [f"{prefix}-{i:04d}" for i in range(tests)]
    TestsFile(load_config(corpus), gen_corpus.DEFAULT_PRODUCT).save(DIRECT, {
        name: TestState(anchors=set(rng.sample(pool, rng.randint(4, 12))),
                        last_ordinal=NEXT - 1, runs=5) for name in names}, ordinal=0)
    return names


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="memidex brief benchmark")
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--corpus", type=Path, default=None)
    p.add_argument("--tests", type=int, default=200, help="tests (in-process briefs)")
    p.add_argument("--cli-repeat", type=int, default=10)
    p.add_argument("--keep", action="store_true", help="keep a corpus generated now")
    args = p.parse_args(argv)
    corpus = (args.corpus or BENCH / "corpus" / f"n{args.n}-seed{args.seed}").resolve()
    exe = run.memidex_exe()
    run.byte_compile()
    _meta, generated, _secs = run.ensure_corpus(corpus, args.n, args.seed)
    run.commit_corpus(corpus)
    root = ["--root", str(corpus)]
    product = gen_corpus.DEFAULT_PRODUCT
    try:
        if not (corpus / run.INDEX_REL).exists():
            run.run_timed([exe, *root, "knowledge", "rebuild-index"])
        names = _setup(corpus, args.n, args.seed, args.tests)
        print(f"corpus: {args.n} records, seed {args.seed}; {len(names)} tests of 4-12 "
              f"anchors; next ordinal {NEXT}", flush=True)
        from memidex.app import Memidex

        m = Memidex(corpus)
        t0 = time.perf_counter()
        m.brief(names[0], product=product, record=False)
        first = time.perf_counter() - t0
        lat: list[float] = []
        served = 0
        for name in names:
            t0 = time.perf_counter()
            b = m.brief(name, product=product, record=False)
            lat.append(time.perf_counter() - t0)
            served += len(b.records)
        queries = gen_corpus.make_queries(args.seed, len(names))
        slat: list[float] = []
        for q in queries:
            t0 = time.perf_counter()
            m.search(q, product=product, limit=10)
            slat.append(time.perf_counter() - t0)
        m.close()
        search_p95 = run.quantile(slat, 0.95)
        f = run.timed_figure("brief in process", lat, "ms", p99=True,
                             baseline_name="search p95", baseline=search_p95,
                             target=("p95 <= 10 ms", 0.010), target_on="p95",
                             note=f"{served / len(names):.1f} records a brief; first call "
                                  f"{first * 1000:.0f} ms")
        print(run.render(f), flush=True)
        print(run.render(run.timed_figure("search in process", slat, "ms", p99=True)),
              flush=True)
        k = args.cli_repeat
        cli = run.repeat_timed(lambda i: [exe, *root, "brief", names[i % len(names)],
                                          "--json", "--no-record"], k)
        scli = run.repeat_timed(lambda i: [exe, *root, "knowledge", "search", queries[i],
                                           "--json"], k)
        limit = 0.12 if args.n <= 10_000 else 0.25
        print(run.render(run.timed_figure(
            "brief (CLI, end to end)", cli, "s", baseline_name="search CLI",
            baseline=run.quantile(scli, 0.5),
            target=(f"<= {limit:.2f} s at {args.n // 1000}k", limit))), flush=True)
        print(run.render(run.timed_figure("search (CLI, end to end)", scli, "s")), flush=True)
    finally:
        if generated and not args.keep:
            shutil.rmtree(corpus, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
