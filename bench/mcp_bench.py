"""The MCP server's benchmark: ``brief`` through ``memidex mcp``.

    python bench/mcp_bench.py [--corpus DIR] [--n 2000] [--seed 7] [--calls 200] [--keep]

Starts ``memidex --root CORPUS mcp`` and talks to it over stdio with the MCP SDK's own
client, as an agent's MCP client does. Without ``--corpus`` it generates a small corpus
(``--n`` records, :mod:`gen_corpus`) in ``bench/corpus/`` and deletes it afterwards
unless ``--keep``; with ``--corpus DIR`` it uses (or generates there) the corpus
``run.py`` uses, building its index when there is none. Like ``brief_bench.py`` it writes
what a brief needs and a corpus lacks (the product's next ordinal, tests with 4–12
anchors). It prints, each measured in this run:

* the server's start-up (spawn to ``initialize`` answered);
* ``brief`` answered by the server: a tools/call round trip over stdio (the request,
  the facade's brief, the structured result and the markdown, the response parsed into
  the SDK's ``CallToolResult``), ``--calls`` times over as many tests, p50/p95/p99 —
  target p95 <= 20 ms once started — and, as its baseline, ``search`` the same way (the
  index's own speed, seen through the same protocol);
* ``brief`` through the SDK's ``ClientSession.call_tool``, which also validates every
  result against the tool's output schema on the client (pure-Python ``jsonschema``:
  ~5 ms for a 20-record brief) — what a Python agent pays; a client that trusts the
  server, or validates with a compiled validator, pays the figure above;
* ``brief`` in process on the same corpus (``Memidex.brief``): what the protocol adds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import gen_corpus  # noqa: E402
import run  # noqa: E402

NEXT = 501  # the next run ordinal: past every generated record's start


def _setup(corpus: Path, n: int, seed: int, tests: int) -> list[str]:
    """The brief benchmark's set-up (:func:`brief_bench._setup`), with tests of its own."""
    from brief_bench import _setup as setup

    return setup(corpus, n, seed, tests, prefix="mcp-test")


async def _measure(exe: str, corpus: Path, names: list[str], queries: list[str]
                   ) -> dict[str, Any]:
    import mcp_types as types
    from mcp import ClientSession, StdioServerParameters, stdio_client

    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMIDEX_")}
    params = StdioServerParameters(command=exe, args=["--root", str(corpus), "mcp"], env=env)
    product = gen_corpus.DEFAULT_PRODUCT
    t0 = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        startup = time.perf_counter() - t0
        await session.list_tools()  # the client learns the output schemas it validates
        t0 = time.perf_counter()
        first = await session.call_tool("brief", {"test_id": names[0], "product": product,
                                                  "record": False})
        first_s = time.perf_counter() - t0
        if first.is_error:
            raise SystemExit(f"error: brief failed: {first.content}")

        async def raw(tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
            """tools/call without the client's own output-schema validation."""
            res = await session.send_request(types.CallToolRequest(
                params=types.CallToolRequestParams(name=tool, arguments=arguments)),
                types.CallToolResult)
            if res.is_error:
                raise SystemExit(f"error: {tool} {arguments} failed: {res.content}")
            return res

        lat: list[float] = []
        served = 0
        for name in names:
            t0 = time.perf_counter()
            res = await raw("brief", {"test_id": name, "product": product, "record": False})
            lat.append(time.perf_counter() - t0)
            served += len(res.structured_content["records"])
        slat: list[float] = []
        for q in queries:
            t0 = time.perf_counter()
            await raw("search", {"query": q, "product": product})
            slat.append(time.perf_counter() - t0)
        sdk: list[float] = []
        for name in names:
            t0 = time.perf_counter()
            res = await session.call_tool("brief", {"test_id": name, "product": product,
                                                    "record": False})
            sdk.append(time.perf_counter() - t0)
            if res.is_error:
                raise SystemExit(f"error: brief {name} failed: {res.content}")
    return {"startup": startup, "first": first_s, "brief": lat, "search": slat,
            "sdk": sdk, "served": served}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="memidex mcp benchmark")
    p.add_argument("--corpus", type=Path, default=None,
                   help="a corpus directory (default: generate a small one)")
    p.add_argument("--n", type=int, default=2000, help="records in the corpus")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--calls", type=int, default=200, help="briefs (one test each)")
    p.add_argument("--keep", action="store_true", help="keep a corpus generated now")
    args = p.parse_args(argv)
    import anyio

    corpus = (args.corpus or BENCH / "corpus" / f"n{args.n}-seed{args.seed}").resolve()
    exe = run.memidex_exe()
    run.byte_compile()
    _meta, generated, _secs = run.ensure_corpus(corpus, args.n, args.seed)
    run.commit_corpus(corpus)
    try:
        if not (corpus / run.INDEX_REL).exists():
            run.run_timed([exe, "--root", str(corpus), "knowledge", "rebuild-index"])
        names = _setup(corpus, args.n, args.seed, args.calls)
        queries = gen_corpus.make_queries(args.seed, args.calls)
        print(f"corpus: {args.n} records, seed {args.seed}; {len(names)} tests of 4-12 "
              f"anchors; next ordinal {NEXT}", flush=True)
        got = anyio.run(_measure, exe, corpus, names, queries)
        from memidex.app import Memidex

        with Memidex(corpus) as m:
            m.brief(names[0], product=gen_corpus.DEFAULT_PRODUCT, record=False)
            inproc: list[float] = []
            for name in names:
                t0 = time.perf_counter()
                m.brief(name, product=gen_corpus.DEFAULT_PRODUCT, record=False)
                inproc.append(time.perf_counter() - t0)
        search_p95 = run.quantile(got["search"], 0.95)
        print(run.render(run.timed_figure(
            "mcp brief", got["brief"], "ms", p99=True, baseline_name="mcp search p95",
            baseline=search_p95, target=("p95 <= 20 ms", 0.020), target_on="p95",
            note=f"{got['served'] / len(names):.1f} records a brief; first call "
                 f"{got['first'] * 1000:.0f} ms; server start {got['startup']:.2f} s")),
            flush=True)
        print(run.render(run.timed_figure("mcp search", got["search"], "ms", p99=True)),
              flush=True)
        print(run.render(run.timed_figure(
            "mcp brief (SDK call_tool)", got["sdk"], "ms", p99=True,
            note="with the Python client's output-schema validation")), flush=True)
        print(run.render(run.timed_figure("brief in process (same corpus)", inproc, "ms",
                                          p99=True)), flush=True)
    finally:
        if generated and not args.keep:
            shutil.rmtree(corpus, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
