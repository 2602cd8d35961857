"""The retrieval evaluation of search with vectors, and the vector speed figures at 100,000 records.

    python bench/retrieval/setup_models.py --cache /tmp/memidex-models   # once
    python bench/retrieval/run.py --models /tmp/memidex-models [--distractors 2000]
                                  [--speed 100000] [--json]

**Quality.** A repository holding the example shop's records
(agent-qa-knowledge/memory/records/, 65 records) plus ``--distractors`` records of the
generated corpus (bench/gen_corpus.py) is indexed by memidex. Each query of
``queries.py`` (135: paraphrases, typos, other word orders, keywords) is answered by:
``lexical`` (memidex's own search, ``Memidex(root).search``), ``sparse`` (tf·idf cosine
over the index's own FTS5 terms), ``static`` (the static floor), ``full`` (the full
model), and the hybrids — the IBEX rule (vector hits at or above the strategy's
``candidate`` threshold first, lexical results appended when the page is unfilled) and
reciprocal-rank fusion. Scope as a search: product shop-web, status active or candidate.
Scored by recall@10 and MRR@10, by query kind.

**Thresholds.** The confidence thresholds are measured here: over every query's top 10,
``reliable`` is the lowest score above which at least 90 % of the hits are relevant,
``candidate`` the lowest above which at least half are. The ``hybrid-cv`` rows use
thresholds calibrated on the other half of the queries (2-fold), to show the hybrid does
not owe its figures to thresholds fitted on its own queries.

**Near duplicates.** Each restated record of ``queries.DUPLICATES`` is a candidate that
must be linked to its original; every servable record (shop and distractors) as a
candidate against the rest is a good record that must not be (a false merge).

**Speed** (``--speed N``): the generated corpus of N records, indexed; hybrid search p95
in process (query embedding + exact top-k by numpy over N vectors + memidex's lexical
search + the merge), the raw limit (the matrix product and top-k alone) measured in the
same run; embedding 475 records with the static floor; vector bytes against record bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from queries import DUPLICATES, QUERIES, resolve  # noqa: E402

import gen_corpus  # noqa: E402
from memidex.app import Memidex  # noqa: E402
from memidex.search.ranking import STOPWORDS  # noqa: E402
from memidex.vectors import (  # noqa: E402
    THRESHOLDS,
    ModelCache,
    SparseModel,
    Thresholds,
    VectorMatrix,
    encode_f16,
    hybrid,
    near_duplicates,
    record_text,
)

PRODUCT = "shop-web"
SERVABLE = ("active", "candidate")
K = 10
TOKENIZER = "porter unicode61 remove_diacritics 2"


def quantile(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def note(msg: str) -> None:
    sys.stderr.write(f"# {msg}\n")
    sys.stderr.flush()


# --- the corpus ---------------------------------------------------------------------

def build_repo(where: Path, distractors: int, seed: int) -> Path:
    root = where / "repo"
    records = root / gen_corpus.RECORDS_DIR
    shutil.copytree(REPO / gen_corpus.RECORDS_DIR, records)
    (root / "memidex.toml").write_text(f'product = "{PRODUCT}"\n', encoding="utf-8")
    if distractors:
        gen = where / "gen"
        gen_corpus.generate(distractors, gen, seed)
        for kind_dir in (gen / gen_corpus.RECORDS_DIR).iterdir():
            for f in kind_dir.iterdir():
                shutil.copyfile(f, records / kind_dir.name / f.name)
    with Memidex(root) as m:
        m.rebuild_index()
    return root


def load_records(root: Path) -> list[dict[str, Any]]:
    db = sqlite3.connect(f"file:{root / 'agent-qa-knowledge/memory/index/memidex.sqlite'}"
                         "?mode=ro", uri=True)
    rows = db.execute("SELECT rowid, id, kind, status, product, anchor, title, body, "
                      "anchors, path FROM records ORDER BY rowid").fetchall()
    db.execute("CREATE VIRTUAL TABLE temp.inst USING fts5vocab(main, records_fts, instance)")
    terms: dict[int, list[str]] = {}
    for term, doc in db.execute("SELECT term, doc FROM temp.inst"):
        terms.setdefault(doc, []).append(term)
    db.close()
    out = []
    for rowid, rid, kind, status, product, anchor, title, body, anchors, path in rows:
        out.append({"rowid": rowid, "id": rid, "kind": kind, "status": status,
                    "product": product, "anchor": anchor, "title": title, "body": body,
                    "anchors": anchors.split("\n") if anchors else [], "path": path,
                    "terms": terms.get(rowid, []),
                    "shop": (REPO / path).is_file()})
    return out


class Stemmer:
    """Query terms as FTS5's porter tokenizer makes them (the terms the index holds)."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE q USING fts5(t, tokenize='{TOKENIZER}')")
        self.db.execute("CREATE VIRTUAL TABLE qi USING fts5vocab(q, instance)")
        self.stop = {t for w in STOPWORDS for t in self._raw(w)}

    def _raw(self, text: str) -> list[str]:
        self.db.execute("DELETE FROM q")
        self.db.execute("INSERT INTO q(t) VALUES (?)", (text,))
        return [t for (t,) in self.db.execute("SELECT term FROM qi ORDER BY offset")]

    def __call__(self, text: str) -> list[str]:
        terms = self._raw(text)
        return [t for t in terms if t not in self.stop] or terms


# --- scoring ------------------------------------------------------------------------

def score(ranked: Sequence[str], relevant: set[str]) -> tuple[float, float]:
    top = list(ranked)[:K]
    recall = len(relevant & set(top)) / len(relevant)
    rr = next((1.0 / (i + 1) for i, r in enumerate(top) if r in relevant), 0.0)
    return recall, rr


def calibrate(pairs: Sequence[tuple[float, bool]], target: float) -> float:
    """The lowest score s such that at least ``target`` of the hits scoring >= s are
    relevant (rounded down to 0.01); 1.0 when no score reaches it."""
    best = None
    hits = rel = 0
    for s, r in sorted(pairs, key=lambda p: -p[0]):
        hits += 1
        rel += r
        if rel / hits >= target and hits >= 5:
            best = s
    return 1.0 if best is None else float(np.floor(best * 100) / 100)


def thresholds(pairs: Sequence[tuple[float, bool]]) -> Thresholds:
    rel = calibrate(pairs, 0.9)
    cand = min(calibrate(pairs, 0.5), rel)
    return Thresholds(reliable=max(rel, cand), candidate=cand)


def floor(pairs: Sequence[tuple[float, bool]]) -> float:
    """The lowest score above which at least a fifth of the hits are relevant: below it
    a vector hit is noise (the IBEX rule's min_similarity)."""
    return calibrate(pairs, 0.2)


class Hit:
    __slots__ = ("id", "score")

    def __init__(self, id: str, score: float) -> None:
        self.id, self.score = id, score


def evaluate(root: Path, cache: ModelCache) -> dict[str, Any]:
    records = load_records(root)
    ids = [r["id"] for r in records]
    alias = resolve(r["id"] for r in records if r["shop"])
    product_of = {r["id"]: r["product"] for r in records}
    queries = [(kind, q, {alias[a] for a in rel}) for kind, q, rel in QUERIES]
    # each query is scoped to the product of its records (shop-web, or shop-admin for
    # the three admin records), as an agent's search is
    scope: list[str] = []
    for _, q, rel in queries:
        products = {product_of[r] for r in rel}
        if len(products) != 1:
            raise SystemExit(f"query {q!r}: relevant records of several products")
        scope.append(products.pop())
    masks = {p: np.array([r["product"] == p and r["status"] in SERVABLE for r in records])
             for p in set(scope)}
    allowed_of = {p: {r["id"] for r, ok in zip(records, mk, strict=True) if ok}
                  for p, mk in masks.items()}
    servable = np.array([r["status"] in SERVABLE for r in records])
    for (_, q, rel), p in zip(queries, scope, strict=True):
        missing = rel - allowed_of[p]
        if missing:
            raise SystemExit(f"query {q!r}: relevant records not servable: {missing}")
    texts = [record_text(r["title"], r["body"], r["anchors"]) for r in records]
    stem = Stemmer()
    sparse = SparseModel.fit((r["id"], r["terms"]) for r in records)
    out: dict[str, Any] = {"records": len(records), "shop_records": sum(r["shop"] for r in
                                                                          records),
                           "queries": len(queries), "timings": {}}
    rankings: dict[str, list[list[Hit]]] = {}
    m = Memidex(root)
    t0 = time.perf_counter()
    rankings["lexical"] = [[Hit(h.id, h.score) for h in
                            m.search(q, product=p, limit=K).results]
                           for (_, q, _), p in zip(queries, scope, strict=True)]
    out["timings"]["lexical_s"] = time.perf_counter() - t0
    rankings["sparse"] = [[Hit(h.id, h.score) for h in
                           sparse.query(stem(q), K, allowed=allowed_of[p].__contains__)]
                          for (_, q, _), p in zip(queries, scope, strict=True)]
    embedders = {}
    for label, kind in (("full", "onnx"), ("static", "static")):
        entry = next((e for e in cache.of_kind(kind) if e.ok), None)  # type: ignore[arg-type]
        if entry is None:
            note(f"no {kind} model in {cache.root}: {label} skipped")
            continue
        emb = cache.load(entry)
        t0 = time.perf_counter()
        vecs = emb.embed(texts)
        out["timings"][f"{label}_embed_{len(texts)}_s"] = time.perf_counter() - t0
        vm = VectorMatrix(ids, vecs, model_id=emb.model_id)
        embedders[label] = (emb, vm)
        rankings[label] = [[Hit(h.id, h.score) for h in
                            vm.top_k(emb.embed_query(q), K, masks[p])]
                           for (_, q, _), p in zip(queries, scope, strict=True)]
        out[f"{label}_model"] = emb.model_id
    # thresholds, on all queries and per half (for the 2-fold hybrid)
    level_of = {"sparse": "sparse", "static": "static-floor", "full": "memidex"}
    measured: dict[str, Thresholds] = {}
    floors: dict[str, float] = {}
    folds: dict[str, list[float]] = {}
    for strat in [s for s in ("sparse", "static", "full") if s in rankings]:
        pairs_by_q = [[(h.score, h.id in rel) for h in ranked]
                      for ranked, (_, _, rel) in zip(rankings[strat], queries, strict=True)]
        flat = [p for ps in pairs_by_q for p in ps]
        measured[strat] = thresholds(flat)
        floors[strat] = floor(flat)
        folds[strat] = [floor([p for i, ps in enumerate(pairs_by_q) if i % 2 == f
                               for p in ps]) for f in (0, 1)]
    out["thresholds"] = {level_of[s]: {"reliable": t.reliable, "candidate": t.candidate,
                                       "floor": floors[s]} for s, t in measured.items()}
    for strat, t in measured.items():
        variants = ((f"hybrid-{strat}", [floors[strat]] * 2),
                    (f"hybrid-{strat}-cv", [folds[strat][1], folds[strat][0]]),
                    (f"hybrid-{strat}@candidate", [t.candidate] * 2))
        for name, cuts in variants:
            rankings[name] = []
            for i, (vec, lex) in enumerate(zip(rankings[strat], rankings["lexical"],
                                               strict=True)):
                cut = cuts[i % 2]  # -cv: fold f's queries use the other fold's floor
                kept = [h for h in vec if h.score >= cut]
                rankings[name].append([Hit(h.id, h.score) for h in
                                       hybrid(kept, lex, K).hits])  # type: ignore[arg-type]
        rankings[f"rrf-{strat}"] = [[Hit(h.id, h.score) for h in hybrid(
            vec, lex, K, fusion="rrf").hits]  # type: ignore[arg-type]
            for vec, lex in zip(rankings[strat], rankings["lexical"], strict=True)]
    table: dict[str, dict[str, dict[str, float]]] = {}
    kinds = ["paraphrase", "typo", "reorder", "keyword", "all"]
    for name, ranked_lists in rankings.items():
        row: dict[str, dict[str, float]] = {}
        for kind in kinds:
            sel = [(r, rel) for r, (k, _, rel) in zip(ranked_lists, queries, strict=True)
                   if kind in ("all", k)]
            scores = [score([h.id for h in r], rel) for r, rel in sel]
            row[kind] = {"recall@10": statistics.fmean(s[0] for s in scores),
                         "mrr": statistics.fmean(s[1] for s in scores), "n": len(sel)}
        table[name] = row
    out["table"] = table
    out["duplicates"] = duplicates(records, embedders, alias, servable)
    return out


def duplicates(records: list[dict[str, Any]], embedders: dict[str, Any],
               alias: dict[str, str], servable: np.ndarray) -> dict[str, Any]:
    anchors = {r["id"]: r["anchor"] for r in records}
    kinds = np.array([r["kind"] for r in records])
    products = np.array([r["product"] for r in records])
    index = {r["id"]: i for i, r in enumerate(records)}
    out: dict[str, Any] = {}
    grid = [round(x, 2) for x in np.arange(0.50, 1.0, 0.01)]
    for label, (emb, vm) in embedders.items():
        pos_scores = []
        for a, anchor, title, body in DUPLICATES:
            target = alias[a]
            cand = emb.embed([record_text(title, body, [anchor])])[0]
            mask = servable & (kinds == records[index[target]]["kind"]) & (
                products == records[index[target]]["product"])
            links = near_duplicates(cand, anchor, vm, anchors, threshold=-1.0, limit=1,
                                    mask=mask)
            # the score at which the original is the best link proposed
            pos_scores.append(links[0].score if links and links[0].id == target else -1.0)
        neg_scores = []
        for i, r in enumerate(records):
            if not servable[i]:
                continue
            mask = servable & (kinds == r["kind"]) & (products == r["product"])
            mask[i] = False
            links = near_duplicates(vm.matrix[i], r["anchor"], vm, anchors, threshold=-1.0,
                                    limit=1, mask=mask)
            neg_scores.append((links[0].score if links else -1.0, r["shop"], r["id"],
                               links[0].id if links else None))
        rows = []
        for t in grid:
            found = sum(s >= t for s in pos_scores) / len(pos_scores)
            fm_all = sum(s >= t for s, *_ in neg_scores) / len(neg_scores)
            fm_shop = [s >= t for s, shop, *_ in neg_scores if shop]
            rows.append({"threshold": t, "duplicates_found": found,
                         "false_merges": fm_all,
                         "false_merges_shop": sum(fm_shop) / max(1, len(fm_shop))})
        ok = [r for r in rows if r["false_merges"] <= 0.01]
        chosen = ok[0] if ok else rows[-1]
        at88 = next(r for r in rows if r["threshold"] == 0.88)
        worst = sorted((x for x in neg_scores if x[1]), key=lambda x: -x[0])[:5]
        out[label] = {"chosen": chosen, "at_0.88": at88, "good_records": len(neg_scores),
                      "restated": len(pos_scores),
                      "closest_good_pairs": [{"candidate": c, "nearest": n,
                                              "score": round(s, 3)} for s, _, c, n in worst],
                      "grid": rows}
    return out


# --- speed --------------------------------------------------------------------------

def speed(n: int, seed: int, cache: ModelCache, workdir: Path) -> dict[str, Any]:
    corpus = workdir / f"speed-n{n}"
    if not (corpus / gen_corpus.CORPUS_META).exists():
        note(f"generating {n} records")
        gen_corpus.generate(n, corpus, seed)
    index = corpus / "agent-qa-knowledge/memory/index/memidex.sqlite"
    if not index.exists():
        note("indexing")
        with Memidex(corpus) as m:
            m.rebuild_index()
    records = load_records(corpus)
    record_bytes = sum((corpus / r["path"]).stat().st_size for r in records)
    texts = [record_text(r["title"], r["body"], r["anchors"]) for r in records]
    ids = [r["id"] for r in records]
    mask = np.array([r["product"] == PRODUCT and r["status"] in SERVABLE for r in records])
    out: dict[str, Any] = {"n": len(records), "record_bytes": record_bytes}
    full = next(e for e in cache.of_kind("onnx") if e.ok)
    static = next(e for e in cache.of_kind("static") if e.ok)
    femb, semb = cache.load(full), cache.load(static)
    t0 = time.perf_counter()
    svecs = semb.embed(texts)
    out["static_embed_all_s"] = time.perf_counter() - t0
    sample = texts[:475]
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        semb.embed(sample)
        runs.append(time.perf_counter() - t0)
    out["static_embed_475_s"] = statistics.median(runs)
    t0 = time.perf_counter()
    femb.embed(sample)
    out["full_embed_475_s"] = time.perf_counter() - t0
    # full-model-shaped vectors: embedding 100k texts with the full model takes ~1 h on
    # this machine; the search cost depends on the shape only, so random unit vectors
    rng = np.random.default_rng(seed)
    fvecs = rng.normal(size=(len(records), femb.dim)).astype(np.float32)
    t0 = time.perf_counter()
    blobs = [encode_f16(v) for v in fvecs]
    out["encode_f16_all_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    fmat = VectorMatrix.from_blobs(ids, blobs, femb.dim)
    fmat = VectorMatrix(ids, fmat.matrix)
    out["matrix_from_blobs_s"] = time.perf_counter() - t0
    smat = VectorMatrix(ids, svecs)
    out["vector_bytes"] = {
        f"f16 {femb.dim}-d": len(records) * femb.dim * 2,
        f"i8 {femb.dim}-d": len(records) * (femb.dim + 4),
        f"f16 {semb.dim}-d": len(records) * semb.dim * 2,
    }
    db_path = workdir / "vectors-size.sqlite"
    db_path.unlink(missing_ok=True)
    db = sqlite3.connect(db_path)
    db.execute("CREATE TABLE vectors (record_rowid INTEGER PRIMARY KEY, model_id TEXT NOT "
               "NULL, content_key TEXT NOT NULL, vector BLOB NOT NULL)")
    db.executemany("INSERT INTO vectors VALUES (?, ?, ?, ?)",
                   ((r["rowid"], femb.model_id, "sha256:" + "0" * 64, b)
                    for r, b in zip(records, blobs, strict=True)))
    db.commit()
    db.close()
    out["vectors_table_bytes_f16_384"] = db_path.stat().st_size
    queries = gen_corpus.make_queries(seed, 200)
    m = Memidex(corpus)
    db = m.index()  # the index query itself: the facade's once-a-second staleness check
    assert db is not None  # (a full scan at 100k) belongs to the refresh figure
    from memidex.index.query import search as index_search
    from memidex.search.ranking import SearchQuery

    def lexical(q: str) -> list[Any]:
        return index_search(db, SearchQuery(text=q, product=PRODUCT, limit=K))

    # the lead keeps a product's records together: one contiguous slice of the matrix
    order = sorted(range(len(records)), key=lambda i: (records[i]["product"], i))
    sids = [ids[i] for i in order]
    smask = mask[order]
    pmat = VectorMatrix(sids, fmat.matrix[order], normalise=False)
    prod = [records[i]["product"] for i in order]
    lo, hi = prod.index(PRODUCT), len(prod) - prod[::-1].index(PRODUCT)
    shop = slice(lo, hi)
    qf = {q: femb.embed_query(q) for q in queries}
    qs = {q: semb.embed_query(q) for q in queries}
    lex = {q: lexical(q) for q in queries}
    vh = {q: fmat.top_k(qf[q], K, mask, min_score=THRESHOLDS["memidex"].floor)
          for q in queries}
    floor_full = THRESHOLDS["memidex"].floor
    floor_static = THRESHOLDS["static-floor"].floor

    def hybrid_full(q: str) -> object:
        hits = pmat.top_k(femb.embed_query(q), K, smask, min_score=floor_full, rows=shop)
        return hybrid(hits, lexical(q), K)

    def hybrid_static(q: str) -> object:
        hits = smat.top_k(semb.embed_query(q), K, mask, min_score=floor_static)
        return hybrid(hits, lexical(q), K)

    parts: dict[str, Callable[[str], object]] = {
        "raw: matrix @ q + argpartition (384-d)":
            lambda q: np.argpartition(-(fmat.matrix @ qf[q]), K)[:K],
        "embed query (full model)": femb.embed_query,
        "embed query (static floor)": semb.embed_query,
        "top-k 384-d, whole matrix + mask": lambda q: fmat.top_k(qf[q], K, mask),
        "top-k 384-d, product rows + mask": lambda q: pmat.top_k(qf[q], K, smask, rows=shop),
        "top-k 256-d static, whole matrix + mask": lambda q: smat.top_k(qs[q], K, mask),
        "lexical search (the index query)": lexical,
        "hybrid merge only": lambda q: hybrid(vh[q], lex[q], K),
        "hybrid, full model (embed + top-k + lexical + merge)": hybrid_full,
        "hybrid, static floor (embed + top-k + lexical + merge)": hybrid_static,
    }
    samples: dict[str, list[float]] = {k: [] for k in parts}
    for _ in range(3):  # interleaved, so a burst of load on this shared machine hits all
        for q in queries:
            for name, fn in parts.items():
                t0 = time.perf_counter()
                fn(q)
                samples[name].append((time.perf_counter() - t0) * 1000)
    out["latency_ms"] = {k: {"p50": quantile(v, 0.5), "p95": quantile(v, 0.95),
                             "p99": quantile(v, 0.99)} for k, v in samples.items()}
    out["blas_threads"] = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    out["load_average"] = os.getloadavg()
    out["matrix_mb"] = fmat.matrix.nbytes / 1e6
    return out


# --- output -------------------------------------------------------------------------

def print_report(res: dict[str, Any], w: Any) -> None:
    if "quality" in res:
        print_quality(res["quality"], w)
    if "speed" in res:
        print_speed(res["speed"], w)


def print_quality(q: dict[str, Any], w: Any) -> None:
    w.write(f"\nretrieval: {q['records']} records ({q['shop_records']} of the example shop), "
            f"{q['queries']} queries; recall@10 / MRR@10\n")
    kinds = ["paraphrase", "typo", "reorder", "keyword", "all"]
    counts = {k: q["table"]["lexical"][k]["n"] for k in kinds}
    w.write(f"{'strategy':26}" + "".join(f"{f'{k} ({counts[k]})':>19}" for k in kinds)
            + "\n")
    for name, row in q["table"].items():
        w.write(f"{name:26}" + "".join(f"{row[k]['recall@10']:>10.3f} /{row[k]['mrr']:6.3f} "
                                       for k in kinds) + "\n")
    lex = q["table"]["lexical"]["paraphrase"]["recall@10"]
    for name, row in q["table"].items():
        if name.startswith(("hybrid", "rrf")) and not name.endswith("-cv"):
            gain = (row["paraphrase"]["recall@10"] - lex) * 100
            w.write(f"  {name}: paraphrase recall@10 {gain:+.1f} points over lexical\n")
    w.write(f"thresholds measured: {json.dumps(q['thresholds'])}\n")
    for label, d in q["duplicates"].items():
        c, a = d["chosen"], d["at_0.88"]
        w.write(f"near duplicates ({label}): threshold {c['threshold']:.2f} -> "
                f"{c['duplicates_found']:.0%} of {d['restated']} restated records linked, "
                f"{c['false_merges']:.1%} false merges among {d['good_records']} good "
                f"records (shop {c['false_merges_shop']:.1%}); at 0.88: "
                f"{a['duplicates_found']:.0%} linked, {a['false_merges']:.1%} false merges\n")


def print_speed(s: dict[str, Any], w: Any) -> None:
    w.write(f"\nspeed at {s['n']} records ({s['record_bytes'] / 1e6:.1f} MB of records; "
            f"matrix {s['matrix_mb']:.0f} MB float32; BLAS threads {s['blas_threads']}; "
            f"load average {s['load_average'][0]:.1f}):\n")
    raw = s["latency_ms"]["raw: matrix @ q + argpartition (384-d)"]["p95"]
    for name, d in s["latency_ms"].items():
        w.write(f"  {name:55} p50 {d['p50']:7.2f} ms  p95 {d['p95']:7.2f} ms  "
                f"p99 {d['p99']:7.2f} ms  ({d['p95'] / raw:5.1f}x raw)\n")
    w.write(f"  static floor: 475 records embedded in {s['static_embed_475_s']:.3f} s "
            f"(target <= 0.5 s); all {s['n']} in {s['static_embed_all_s']:.1f} s; full "
            f"model: 475 in {s['full_embed_475_s']:.1f} s\n")
    for k, v in s["vector_bytes"].items():
        w.write(f"  vectors {k}: {v / 1e6:.1f} MB = {v / s['record_bytes']:.2f}x the "
                "records' bytes (target <= 0.5x)\n")
    t = s["vectors_table_bytes_f16_384"]
    w.write(f"  a SQLite vectors table (f16 384-d + model id + key): {t / 1e6:.1f} MB = "
            f"{t / s['record_bytes']:.2f}x\n")
    w.write(f"  matrix from {s['n']} blobs: {s['matrix_from_blobs_s']:.2f} s\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=Path, required=True, help="a model cache "
                    "(setup_models.py fills one)")
    ap.add_argument("--distractors", type=int, default=2000)
    ap.add_argument("--speed", type=int, default=0, help="records for the speed figures "
                    "(0: skip)")
    ap.add_argument("--speed-only", action="store_true", help="skip the quality part")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workdir", type=Path, default=None, help="keep corpora here "
                    "(reused between runs)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    cache = ModelCache(args.models)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="memidex-retrieval-"))
    work.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"machine": {"cpus": os.cpu_count()}}
    if not args.speed_only:
        eval_dir = work / f"eval-d{args.distractors}-s{args.seed}"
        if eval_dir.exists():
            shutil.rmtree(eval_dir)
        eval_dir.mkdir()
        note(f"indexing the example shop + {args.distractors} distractors")
        res["quality"] = evaluate(build_repo(eval_dir, args.distractors, args.seed), cache)
    if args.speed:
        res["speed"] = speed(args.speed, args.seed, cache, work)
    if args.json:
        json.dump(res, sys.stdout, indent=1)
        sys.stdout.write("\n")
        print_report(res, sys.stderr)
    else:
        print_report(res, sys.stdout)
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
