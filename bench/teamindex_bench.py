"""The team index's benchmark (SPEC §9's PostgreSQL targets), beside the local
SQLite index and a raw PostgreSQL limit measured in the same run.

    python bench/teamindex_bench.py [--n 100000] [--seed 7] [--corpus DIR] [--clients 20]
                                    [--url postgresql://...] [--keep] [--json]

Uses (or generates and commits) the corpus ``run.py`` uses, then, on a throw-away
PostgreSQL cluster (``tests/pgserver.py``; or ``--url``, a database it may fill):

* **full push** (target ≤ 30 s at 100k), beside the local rebuild and the raw load — a
  plain script that streams the same blobs from ``git cat-file --batch`` into a table
  ``(path, text)`` with a generated ``tsvector`` and builds its GIN index: no parsing,
  no anchors, no versions, a floor;
* **push of 1,000 changed records** (≤ 5 s): a commit rewriting 1,000 bodies;
* **search** (p95 ≤ 50 ms) and **brief** (p95 ≤ 30 ms) over ``--clients`` concurrent
  clients (threads, each with its own connection, closed loop: a client asks again as
  soon as it is answered), beside the same queries on the local index (each thread its
  own SQLite connection) and a raw search (one GIN top-10 query, ``ts_rank_cd``);
* the same through **the real read path**: each client a ``memidex.Memidex`` facade
  with the URL configured, as the CLI, the library and the MCP server use it
  (``app/team.py``: a session per answer, the check that the snapshot is not behind the
  clone, masking, the typed result; every answer checked to be the team index's), beside
  facades on the local index;
* **EXPLAIN**: the plans of the search, lookup and brief queries name the GIN and btree
  indexes they must use.

Every figure is measured in this run; nothing is hard-coded.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))

import brief_bench  # noqa: E402
import gen_corpus  # noqa: E402
import run  # noqa: E402

PRODUCT = gen_corpus.DEFAULT_PRODUCT
RECORDS = gen_corpus.RECORDS_DIR
SETTINGS = {"shared_buffers": "1GB", "max_wal_size": "4GB", "checkpoint_timeout": "30min",
            "maintenance_work_mem": "256MB"}


def _git(root: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@memidex.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@memidex.invalid"}
    import os

    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True, env={**os.environ, **env}).stdout


def _percentiles(xs: Sequence[float]) -> dict[str, float]:
    return {"p50": run.quantile(xs, 0.5) * 1000, "p95": run.quantile(xs, 0.95) * 1000,
            "p99": run.quantile(xs, 0.99) * 1000}


def concurrent(clients: int, make: Callable[[], Any], ask: Callable[[Any, int], None],
               per_client: int) -> tuple[list[float], float]:
    """(latencies, answers a second): ``clients`` threads, each with its own ``make()``,
    each asking ``per_client`` times back to back."""
    lats: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def client(k: int) -> None:
        try:
            handle = make()
            mine = []
            barrier.wait()
            for i in range(per_client):
                t0 = time.perf_counter()
                ask(handle, k * per_client + i)
                mine.append(time.perf_counter() - t0)
            with lock:
                lats.extend(mine)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return lats, len(lats) / wall


def raw_load(root: Path, url: str) -> float:
    """The floor of a full push: blobs into (path, text) + generated tsvector + GIN."""
    import psycopg

    from memidex.teamindex.gitread import BlobReader, GitTree

    t0 = time.perf_counter()
    blobs = GitTree(root, "HEAD", RECORDS, "policies").records()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS raw_records")
        c.execute("CREATE TABLE raw_records (path text, body text, tsv tsvector GENERATED"
                  " ALWAYS AS (to_tsvector('simple', body)) STORED)")
        with c.transaction(), c.cursor().copy("COPY raw_records (path, body) FROM STDIN") as cp:
            for b, data in zip(blobs, BlobReader(root).read([b.sha for b in blobs]),
                               strict=True):
                cp.write_row((b.path, data.decode("utf-8", "replace")))
        c.execute("CREATE INDEX raw_tsv ON raw_records USING gin (tsv)")
        c.execute("ANALYZE raw_records")
    return time.perf_counter() - t0


def change_records(root: Path, count: int, seed: int) -> str:
    files = sorted((root / RECORDS).rglob("*.md"))
    rng = random.Random(f"change:{seed}")
    for f in rng.sample(files, count):
        f.write_bytes(f.read_bytes().rstrip(b"\n") + b" Seen again on a later build.\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", f"{count} records changed")
    return _git(root, "rev-parse", "HEAD").strip()


def explain_checks(url: str, queries: list[str]) -> list[tuple[str, bool, str]]:
    """(what, ok, indexes named) for the plans of the team index's main queries."""
    import psycopg

    from memidex.search.ranking import SearchQuery
    from memidex.teamindex import TeamIndex
    from memidex.teamindex import read as R

    captured: list[tuple[str, Any]] = []
    real = R.Session._q

    def capture(self: Any, sql: str, params: Any = ()) -> list[Any]:
        captured.append((sql, params))
        return real(self, sql, params)

    checks: list[tuple[str, Callable[[R.Session], Any], str, str]] = [
        ("search (GIN)", lambda s: s.search(SearchQuery(queries[0], PRODUCT)),
         "records r WHERE r.gen", "records_tsv"),
        ("find by id prefix (btree)", lambda s: s.find_ids("fact-el-"), "r.id >= ",
         "records_by_id"),
        ("brief: anchor lookup (btree)", lambda s: s.anchor_hits(["page:/x"], cap=10),
         "FROM memidex.anchors", "anchors_pkey"),
        ("brief: versions of records (btree)", lambda s: s.versions_of([1, 2, 3]),
         "UNION ALL", "records_pkey"),
        ("ordinal floor (btree)", lambda s: s.max_ordinal(PRODUCT), "greatest(",
         "records_by_ordinal"),
    ]
    out = []
    R.Session._q = capture  # type: ignore[method-assign]
    try:
        with TeamIndex.connect(url) as ti, psycopg.connect(url) as c:
            for what, call, marker, index in checks:
                captured.clear()
                with ti.session() as s:
                    call(s)
                sql, params = next(((q, p) for q, p in captured if marker in q), ("", ()))
                plan = json.dumps(c.execute("EXPLAIN (FORMAT JSON) " + sql, params
                                            ).fetchone()) if sql else ""
                names = sorted({part.split('"')[0] for part in plan.split('"Index Name": "')[1:]})
                out.append((what, index in names, ", ".join(names) or "(none)"))
    finally:
        R.Session._q = real  # type: ignore[method-assign]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="memidex team index benchmark")
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--corpus", type=Path)
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--per-client", type=int, default=50)
    p.add_argument("--url", help="a PostgreSQL database to use (default: a throw-away cluster)")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    out = sys.stderr if args.json else sys.stdout
    figures: dict[str, Any] = {"n": args.n, "clients": args.clients}

    def line(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    corpus = args.corpus or BENCH / "corpus" / f"n{args.n}-s{args.seed}"
    corpus.mkdir(parents=True, exist_ok=True)
    _meta, generated, _secs = run.ensure_corpus(corpus, args.n, args.seed)
    run.commit_corpus(corpus)
    work = Path(tempfile.mkdtemp(prefix="memidex-teambench-"))
    root = work / "repo"
    _git(work, "clone", "-q", str(corpus), str(root))  # packed objects, as a CI clone
    tests = brief_bench._setup(root, args.n, args.seed, 200)
    server = None
    if args.url:
        url = args.url
    else:
        import pgserver

        server = pgserver.started(SETTINGS)
        url = server.url()
    try:
        _measure(root, url, args, figures, tests, line)
    finally:
        if server is not None:
            server.remove()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
            if generated:
                shutil.rmtree(corpus, ignore_errors=True)
    if args.json:
        sys.stdout.write(json.dumps(figures, indent=1) + "\n")
    return 0


def _measure(root: Path, url: str, args: argparse.Namespace, figures: dict[str, Any],
             tests: list[str], line: Callable[[str], None]) -> None:
    from memidex.config import load_config
    from memidex.index.build import rebuild
    from memidex.index.db import IndexDB
    from memidex.index.query import search as local_search
    from memidex.masking import Masker
    from memidex.search.ranking import SearchQuery
    from memidex.serve.brief import BriefRequest, build_brief
    from memidex.store.files import Store
    from memidex.teamindex import TeamIndex, push

    config = load_config(root)
    store = Store(config)
    local_path = root / "agent-qa-knowledge/memory/index/memidex.sqlite"
    t0 = time.perf_counter()
    rebuild(store, local_path)
    local_rebuild = time.perf_counter() - t0
    raw = raw_load(root, url)
    t0 = time.perf_counter()
    report = push(root, url)
    full = time.perf_counter() - t0
    figures["full_push_s"], figures["raw_load_s"] = full, raw
    figures["local_rebuild_s"] = local_rebuild
    line(f"full push          {full:7.2f} s  x{full / raw:.2f} raw load ({raw:.2f} s); "
         f"local rebuild {local_rebuild:.2f} s; {report.records} records  "
         f"[target <= 30 s: {'ok' if full <= 30 else 'MISSED'}]")
    change_records(root, 1000, args.seed)
    t0 = time.perf_counter()
    inc = push(root, url)
    incremental = time.perf_counter() - t0
    assert inc.action == "incremental" and inc.changed == 1000, inc
    figures["push_1000_s"] = incremental
    line(f"push 1000 changed  {incremental:7.2f} s  x{incremental / raw:.2f} raw load  "
         f"[target <= 5 s: {'ok' if incremental <= 5 else 'MISSED'}]")
    rebuild(store, local_path)  # the local index at the same commit

    queries = gen_corpus.make_queries(args.seed, 200)
    masker = Masker.load(config.root / config.secrets_file)
    n = args.clients
    per = args.per_client

    def team_search(ti: Any, i: int) -> None:
        ti.search(SearchQuery(queries[i % len(queries)], PRODUCT))

    def local_search_one(db: Any, i: int) -> None:
        local_search(db, SearchQuery(queries[i % len(queries)], PRODUCT))

    def raw_search(conn: Any, i: int) -> None:
        words = [w for w in queries[i % len(queries)].split()]
        conn.execute("SELECT path FROM raw_records WHERE tsv @@ plainto_tsquery('simple', %s)"
                     " ORDER BY ts_rank_cd(tsv, plainto_tsquery('simple', %s)) DESC LIMIT 10",
                     (" ".join(words), " ".join(words))).fetchall()

    def team_brief(ti: Any, i: int) -> None:
        with ti.session() as s:
            build_brief(config, store, s, BriefRequest(tests[i % len(tests)], PRODUCT),
                        masker=masker, record=False)

    def local_brief(db: Any, i: int) -> None:
        build_brief(config, store, db, BriefRequest(tests[i % len(tests)], PRODUCT),
                    masker=masker, record=False)

    def team() -> Any:
        return TeamIndex.connect(url)

    def facade(team_url: str | None) -> Callable[[], Any]:
        def make() -> Any:
            from memidex.app import Memidex

            environ = {"MEMIDEX_INDEX_URL": team_url} if team_url else {}
            return Memidex(config=load_config(root, environ=environ))
        return make

    def facade_search(m: Any, i: int) -> None:
        answer = m.search(queries[i % len(queries)], product=PRODUCT)
        assert answer.source == ("team" if m.config.index.url else "local"), answer.warning

    def facade_brief(m: Any, i: int) -> None:
        answer = m.brief(tests[i % len(tests)], product=PRODUCT, record=False)
        assert answer.source == ("team" if m.config.index.url else "local"), answer.warning

    def local() -> Any:
        return IndexDB.open(local_path)

    def raw_conn() -> Any:
        import psycopg

        c = psycopg.connect(url, autocommit=True)
        c.prepare_threshold = None
        return c

    via_team, via_local = facade(url), facade(None)
    for ask, make in ((team_search, team), (local_search_one, local), (team_brief, team),
                      (local_brief, local), (raw_search, raw_conn),
                      (facade_search, via_team), (facade_brief, via_team),
                      (facade_search, via_local), (facade_brief, via_local)):
        concurrent(2, make, ask, 10)  # warm-up
    rows = [("search  team index", team_search, team, 50),
            ("search  local SQLite", local_search_one, local, None),
            ("search  raw PostgreSQL", raw_search, raw_conn, None),
            ("brief   team index", team_brief, team, 30),
            ("brief   local SQLite", local_brief, local, None),
            ("search  facade, team", facade_search, via_team, 50),
            ("search  facade, local", facade_search, via_local, None),
            ("brief   facade, team", facade_brief, via_team, 30),
            ("brief   facade, local", facade_brief, via_local, None)]
    results: dict[str, dict[str, float]] = {}
    for name, ask, make, target in rows:
        lats, rate = concurrent(n, make, ask, per)
        pct = _percentiles(lats)
        results[name] = {**pct, "per_second": rate}
        verdict = "" if target is None else (
            f"  [target p95 <= {target} ms: {'ok' if pct['p95'] <= target else 'MISSED'}]")
        line(f"{name:22s} p50 {pct['p50']:6.1f} ms  p95 {pct['p95']:6.1f} ms  p99 "
             f"{pct['p99']:6.1f} ms  {rate:6.0f}/s over {n} clients{verdict}")
    for single, (ask, make) in {"search  team index, 1 client": (team_search, team),
                                "search  local SQLite, 1 client": (local_search_one, local),
                                "brief   team index, 1 client": (team_brief, team),
                                "search  facade, team, 1 client": (facade_search, via_team),
                                "brief   facade, team, 1 client": (facade_brief, via_team),
                                }.items():
        lats, rate = concurrent(1, make, ask, 200)
        pct = _percentiles(lats)
        results[single] = {**pct, "per_second": rate}
        line(f"{single:31s} p50 {pct['p50']:6.1f} ms  p95 {pct['p95']:6.1f} ms")
    figures["concurrent"] = results
    figures["explain"] = []
    for what, ok, names in explain_checks(url, queries):
        figures["explain"].append({"query": what, "ok": ok, "indexes": names})
        line(f"EXPLAIN {what:36s} {'ok' if ok else 'MISSED'}: {names}")


if __name__ == "__main__":
    raise SystemExit(main())
