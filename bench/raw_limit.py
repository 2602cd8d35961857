"""The raw limit: what a plain Python script does with the same files, for ratios.

    python bench/raw_limit.py CORPUS_DIR [--mode both|1proc|2proc] [--repeat R] [--json]
    python bench/raw_limit.py --query DB_PATH "some words" [--product shop-web]

Rebuild (SPEC §9): read every record file, split the front matter, parse it with PyYAML's
C loader (``yaml.CSafeLoader``), and insert a ``records`` row, an FTS5 row (title, body,
anchors; the same tokenizer memidex uses) and the ``anchors`` rows into a fresh SQLite
file in one transaction — (a) in one process, (b) with a 2-process parse pool feeding
the inserting parent. No validation, no hashing, no stat rows, no policies: a floor, not
a product.

``--query`` is the floor of a CLI search: start Python, open the database, run one FTS5
top-10 query, print the ids. The module imports only what that needs at the top.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from typing import Any

__all__ = [
    "TOKENIZER",
    "fts_query",
    "list_record_files",
    "measure",
    "parse_file",
    "raw_1proc",
    "raw_2proc",
    "raw_search",
    "search_once",
]

RECORDS_DIR = os.path.join("agent-qa-knowledge", "memory", "records")
TOKENIZER = "porter unicode61 remove_diacritics 2"  # as memidex.index.schema
CHUNK = 500

SCHEMA = f"""
CREATE TABLE records (
    rowid INTEGER PRIMARY KEY, id TEXT NOT NULL, path TEXT NOT NULL, kind TEXT NOT NULL,
    status TEXT NOT NULL, product TEXT NOT NULL, anchor TEXT NOT NULL, title TEXT NOT NULL,
    body TEXT NOT NULL, anchors TEXT NOT NULL
);
CREATE VIRTUAL TABLE records_fts USING fts5(
    title, body, anchors, content='records', content_rowid='rowid', tokenize='{TOKENIZER}'
);
CREATE TABLE anchors (
    anchor TEXT NOT NULL, record_rowid INTEGER NOT NULL, main INTEGER NOT NULL,
    PRIMARY KEY (anchor, record_rowid)
) WITHOUT ROWID;
"""
POST_LOAD = """
CREATE INDEX records_by_id ON records(id);
CREATE INDEX records_by_product ON records(product, status, kind);
"""

Row = tuple[str, str, str, str, str, str, str, str, list[str]]


def list_record_files(corpus: str) -> list[str]:
    """Every ``*.md`` under ``records/<kind>/``, sorted."""
    base = os.path.join(corpus, RECORDS_DIR)
    out: list[str] = []
    for kind in sorted(os.listdir(base)):
        d = os.path.join(base, kind)
        if os.path.isdir(d):
            out += [os.path.join(d, e.name) for e in os.scandir(d) if e.name.endswith(".md")]
    out.sort()
    return out


def parse_file(path: str) -> Row | None:
    """(id, path, kind, status, product, anchor, title, body, anchors) or None."""
    import yaml

    with open(path, "rb") as fh:
        text = fh.read().decode("utf-8")
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 3)
    if end < 0:
        return None
    fm: Any = yaml.load(text[4 : end + 1], Loader=yaml.CSafeLoader)  # noqa: S506
    if not isinstance(fm, dict):
        return None
    body = text[end + 5 :].strip()
    anchors = [str(fm["anchor"]), *(str(a) for a in fm.get("anchors") or ())]
    return (str(fm["id"]), path, str(fm["kind"]), str(fm["status"]), str(fm["product"]),
            str(fm["anchor"]), str(fm["title"]), body, anchors)


def _parse_chunk(paths: list[str]) -> list[Row]:
    return [r for r in map(parse_file, paths) if r is not None]


def _open_fresh(db: str) -> sqlite3.Connection:
    for suffix in ("", "-journal", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
                       "PRAGMA cache_size=-65536; PRAGMA temp_store=MEMORY;")
    conn.executescript(SCHEMA)
    conn.execute("BEGIN")
    return conn


def _insert(conn: sqlite3.Connection, rows: list[Row], next_rowid: int) -> int:
    recs, fts, anchors = [], [], []
    for r in rows:
        rowid = next_rowid
        next_rowid += 1
        joined = " ".join(r[8])
        recs.append((rowid, *r[:8], joined))
        fts.append((rowid, r[6], r[7], joined))
        anchors += [(a, rowid, int(i == 0)) for i, a in enumerate(dict.fromkeys(r[8]))]
    conn.executemany("INSERT INTO records VALUES (?,?,?,?,?,?,?,?,?,?)", recs)
    conn.executemany("INSERT INTO records_fts(rowid, title, body, anchors) VALUES (?,?,?,?)",
                     fts)
    conn.executemany("INSERT INTO anchors VALUES (?,?,?)", anchors)
    return next_rowid


def _finish(conn: sqlite3.Connection) -> None:
    for stmt in POST_LOAD.strip().split(";"):
        if stmt.strip():
            conn.execute(stmt)
    conn.execute("COMMIT")
    conn.close()


def raw_1proc(corpus: str, db: str) -> float:
    """Seconds for the one-process parse-and-insert into a fresh ``db``."""
    t0 = time.perf_counter()
    paths = list_record_files(corpus)
    conn = _open_fresh(db)
    rowid = 1
    for i in range(0, len(paths), CHUNK):
        rowid = _insert(conn, _parse_chunk(paths[i : i + CHUNK]), rowid)
    _finish(conn)
    return time.perf_counter() - t0


def raw_2proc(corpus: str, db: str, procs: int = 2) -> float:
    """Seconds for the same with a ``procs``-process parse pool (the parent inserts)."""
    import multiprocessing as mp

    t0 = time.perf_counter()
    paths = list_record_files(corpus)
    chunks = [paths[i : i + CHUNK] for i in range(0, len(paths), CHUNK)]
    conn = _open_fresh(db)
    rowid = 1
    with mp.get_context("fork").Pool(procs) as pool:
        for rows in pool.imap(_parse_chunk, chunks):
            rowid = _insert(conn, rows, rowid)
    _finish(conn)
    return time.perf_counter() - t0


def fts_query(text: str) -> str:
    """Each word as an FTS5 string, implicitly AND-ed."""
    words = [w for w in "".join(c if c.isalnum() else " " for c in text).split() if w]
    return " ".join('"' + w + '"' for w in words)


_SEARCH_SQL = (
    "SELECT r.id, bm25(records_fts) AS s FROM records_fts "
    "JOIN records r ON r.rowid = records_fts.rowid "
    "WHERE records_fts MATCH ? AND r.product = ? ORDER BY s LIMIT ?"
)


def search_once(conn: sqlite3.Connection, text: str, product: str,
                limit: int = 10) -> list[str]:
    return [row[0] for row in conn.execute(_SEARCH_SQL, (fts_query(text), product, limit))]


def raw_search(db: str, queries: list[str], product: str, limit: int = 10) -> list[float]:
    """Seconds per query of a plain FTS5 BM25 top-``limit`` search (connection kept open)."""
    conn = sqlite3.connect(db)
    search_once(conn, queries[0], product, limit)  # warm the page cache
    out = []
    for q in queries:
        t0 = time.perf_counter()
        search_once(conn, q, product, limit)
        out.append(time.perf_counter() - t0)
    conn.close()
    return out


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def measure(corpus: str, db_dir: str, mode: str = "both", repeat: int = 1) -> dict[str, Any]:
    """Run the raw rebuilds ``repeat`` times each; seconds (all runs) and db size."""
    os.makedirs(db_dir, exist_ok=True)
    out: dict[str, Any] = {"files": len(list_record_files(corpus))}
    for name, fn in (("1proc", raw_1proc), ("2proc", raw_2proc)):
        if mode not in ("both", name):
            continue
        db = os.path.join(db_dir, f"raw-{name}.sqlite")
        runs = [fn(corpus, db) for _ in range(repeat)]
        out[name] = {"seconds": runs, "median": _median(runs), "db": db,
                     "db_bytes": os.path.getsize(db)}
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["--query"]:  # the CLI-search floor: keep this path lean
        db, text = argv[1], argv[2]
        product = argv[4] if argv[3:4] == ["--product"] else "shop-web"
        conn = sqlite3.connect(db)
        print("\n".join(search_once(conn, text, product)))
        return 0
    import argparse
    import json
    import resource
    import tempfile

    p = argparse.ArgumentParser(description="The raw parse-and-insert limit (SPEC §9).")
    p.add_argument("corpus")
    p.add_argument("--mode", choices=("both", "1proc", "2proc"), default="both")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--db-dir", default=None, help="where the raw databases go (default: tmp)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    db_dir = args.db_dir or tempfile.mkdtemp(prefix="memidex-raw-")
    res = measure(args.corpus, db_dir, args.mode, args.repeat)
    res["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    res["children_maxrss_kb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if args.json:
        print(json.dumps(res))
    else:
        for name in ("1proc", "2proc"):
            if name in res:
                r = res[name]
                runs = ", ".join(f"{s:.2f}" for s in r["seconds"])
                print(f"raw {name}: {r['median']:.2f} s median ({runs}) for {res['files']} "
                      f"files; db {r['db_bytes'] / 1e6:.1f} MB")
        print(f"peak RSS {res['maxrss_kb'] / 1024:.0f} MB (parent)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
