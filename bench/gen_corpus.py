"""Generate a synthetic memidex repository for the benchmark (deterministic for a seed).

    python bench/gen_corpus.py --n 100000 --out bench/corpus/n100000 [--seed 7] [--jobs 2]

What it writes in ``--out``:

* ``memidex.toml`` (``product = "shop-web"``);
* ``agent-qa-knowledge/memory/records/<kind>/<id>.md`` — N canonical records written with
  :func:`memidex.records.codec.dump_record`: bodies of 400–800 bytes drawn from a Zipf-like
  vocabulary (common English and testing words first, then synthetic words), a main anchor
  plus 2–7 further anchors from a pool of about N/5, all four kinds, five products (most
  records in ``shop-web``), active, candidate, superseded, deprecated and quarantined
  records, evidence, some history and some relations;
* ``policies/*.yaml`` — a handful of policies;
* ``.bench-corpus.json`` — what was generated (n, seed, bytes), so ``run.py`` can reuse it.

The identity of every record (kind, anchor, product, scope, hence the id) is planned in
the parent process from one seeded generator; bodies and the rest are filled in by
fixed-size chunks, each with its own seeded generator, so the output does not depend on
the number of worker processes.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import multiprocessing as mp
import os
import random
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from memidex.records.codec import dump_record
from memidex.records.ids import record_id
from memidex.records.model import HistoryEntry, Record, Relations, Trust, Valid

__all__ = [
    "CORPUS_META",
    "DEFAULT_PRODUCT",
    "RECORDS_DIR",
    "Plan",
    "common_words",
    "generate",
    "make_queries",
    "new_record",
    "vocabulary",
]

DEFAULT_PRODUCT = "shop-web"
RECORDS_DIR = "agent-qa-knowledge/memory/records"
CORPUS_META = ".bench-corpus.json"
GENERATOR_VERSION = 3  # 3: evidence carries check and claim, as learned records do
CHUNK = 2000
VOCAB_SIZE = 20000
ZIPF_S = 1.07
_CHECKS = ("assert-text", "assert-visible", "assert-enabled", "assert-url", "assert-count")

PRODUCTS: tuple[tuple[str, int], ...] = (
    ("shop-web", 60),
    ("shop-ios", 12),
    ("shop-android", 12),
    ("admin-portal", 10),
    ("partner-api", 6),
)
KIND_WEIGHTS: tuple[tuple[str, int], ...] = (
    ("fact", 50),
    ("caution", 20),
    ("procedure", 20),
    ("unknown", 10),
)
STATUS_WEIGHTS: tuple[tuple[str, int], ...] = (
    ("active", 75),
    ("candidate", 10),
    ("superseded", 8),
    ("deprecated", 3),
    ("quarantined", 4),
)
SOURCE_WEIGHTS: tuple[tuple[str, int], ...] = (("local", 60), ("ci", 25), ("human", 10),
                                               ("import", 5))

# Most frequent first: these carry the head of the Zipf curve.
_FUNCTION_WORDS = (
    "the to and a of is on in it not when after for be with that this at by as are from "
    "or until before then if only was but has an its so all can will should must"
).split()
_DOMAIN_WORDS = (
    "button page click test checkout order cart login form field error message user "
    "disabled enabled visible hidden loading spinner timeout retry flaky network request "
    "response status modal dialog submit cancel search results list item price total "
    "payment card address shipping email password account profile settings menu header "
    "footer link banner toast notification tab table row column filter sort select "
    "dropdown checkbox terms accept confirm delete save edit update create product "
    "catalog category image upload download session token cookie redirect api server "
    "client staging environment build deploy release version browser mobile desktop "
    "viewport scroll hover focus keyboard input value label placeholder tooltip badge "
    "counter quantity coupon discount invoice receipt refund wishlist review rating "
    "inventory stock warehouse store locale currency language timezone date calendar "
    "slot booking schedule report chart dashboard export import sync queue worker job "
    "step wait assert expect selector element frame iframe popup captcha otp sms verify "
    "reset logout signup register guest admin role permission denied allowed blocked "
    "slow fast stable intermittent appears shows stays becomes returns fails passes "
    "first second last next previous empty full valid invalid required optional"
).split()
_ONSETS = ("b c d f g h j k l m n p r s t v w z br cl dr fl gr pl pr sk sl sp st tr "
           "ch sh th qu").split()
_VOWELS = "a e i o u ai ea io ou".split()
_CODAS = ("", "", "", "n", "r", "s", "t", "l", "m", "x", "nd", "rt", "st", "ck")
_BLOCKED = ("fuck", "shit", "cunt", "dick", "cock", "slut", "twat", "piss", "tits", "nig",
            "fag", "rape", "kike", "spic")
_EL_TYPES = ("button", "input", "link", "list", "modal", "select", "checkbox", "toast",
             "tab", "table", "image", "banner", "menu", "form")
_HTTP = ("get", "post", "put", "delete", "patch")


@lru_cache(maxsize=4)
def vocabulary(seed: int) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """The ranked vocabulary (most frequent first) and its cumulative Zipf weights."""
    rng = random.Random(f"vocab:{seed}")
    words: list[str] = []
    seen: set[str] = set()
    for w in _FUNCTION_WORDS + _DOMAIN_WORDS:
        if w not in seen:
            seen.add(w)
            words.append(w)
    while len(words) < VOCAB_SIZE:
        n_syll = rng.choice((1, 2, 2, 2, 3, 3, 4))
        w = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(n_syll)
        )
        if w not in seen and 3 <= len(w) <= 14 and not any(b in w for b in _BLOCKED):
            seen.add(w)
            words.append(w)
    cum = list(itertools.accumulate(1.0 / (r**ZIPF_S) for r in range(1, len(words) + 1)))
    return tuple(words), tuple(cum)


def common_words(seed: int, k: int = 8) -> list[str]:
    """The ``k`` most frequent words of the corpus (they occur in most records)."""
    return list(vocabulary(seed)[0][:k])


def make_queries(seed: int, count: int = 200, n_common: int = 10) -> list[str]:
    """``count`` search queries of 1–3 words: mostly from the corpus vocabulary (ranks
    20–5000, so they find something without being stop words), plus ``n_common`` queries
    of the very common words."""
    words, _ = vocabulary(seed)
    rng = random.Random(f"queries:{seed}")
    out: list[str] = []
    top = words[:12]
    for _ in range(n_common):
        out.append(" ".join(rng.sample(top, rng.randint(1, 3))))
    mid = words[20:5000]
    while len(out) < count:
        out.append(" ".join(rng.sample(mid, rng.choice((1, 1, 2, 2, 2, 3)))))
    rng.shuffle(out)
    return out


def _weighted(pairs: tuple[tuple[str, int], ...]) -> tuple[list[str], list[int]]:
    names = [p[0] for p in pairs]
    return names, list(itertools.accumulate(p[1] for p in pairs))


def _slug_words(rng: random.Random, words: tuple[str, ...], k: int) -> str:
    return "-".join(words[rng.randint(30, 3000)] for _ in range(k))


@lru_cache(maxsize=4)
def anchor_pool(seed: int, size: int) -> tuple[str, ...]:
    """``size`` distinct anchors of the usual types (el, page, test, api, flow)."""
    rng = random.Random(f"anchors:{seed}")
    words, _ = vocabulary(seed)
    out: list[str] = []
    seen: set[str] = set()
    types = ["el"] * 40 + ["page"] * 15 + ["test"] * 20 + ["api"] * 15 + ["flow"] * 10
    while len(out) < size:
        t = rng.choice(types)
        if t == "el":
            a = f"el:{rng.choice(_EL_TYPES)}:{_slug_words(rng, words, rng.randint(1, 3))}"
        elif t == "page":
            a = "page:/" + "/".join(_slug_words(rng, words, 1) for _ in range(rng.randint(1, 3)))
        elif t == "test":
            a = f"test:{_slug_words(rng, words, rng.randint(2, 4))}"
        elif t == "api":
            path = "/".join(_slug_words(rng, words, 1) for _ in range(rng.randint(1, 3)))
            a = f"api:{rng.choice(_HTTP)}:/v1/{path}"
        else:
            a = f"flow:{_slug_words(rng, words, rng.randint(1, 3))}"
        if a in seen:
            a = f"{a}-{len(out)}"
        if a not in seen:
            seen.add(a)
            out.append(a)
    return tuple(out)


@lru_cache(maxsize=4)
def _scope_pages(seed: int) -> tuple[str, ...]:
    rng = random.Random(f"pages:{seed}")
    words, _ = vocabulary(seed)
    return tuple(
        "/" + "/".join(_slug_words(rng, words, 1) for _ in range(rng.randint(1, 2)))
        for _ in range(400)
    )


@dataclass(frozen=True, slots=True)
class Plan:
    """The identity of one record and the relations that name other records."""

    index: int
    id: str
    kind: str
    status: str
    product: str
    anchor: str
    scope: tuple[tuple[str, str], ...]
    superseded_by: str | None
    cites: tuple[str, ...]


def _plan(n: int, seed: int) -> list[Plan]:
    rng = random.Random(f"plan:{seed}")
    pool = anchor_pool(seed, max(20, n // 5))
    pages = _scope_pages(seed)
    kinds, kind_cw = _weighted(KIND_WEIGHTS)
    products, prod_cw = _weighted(PRODUCTS)
    statuses, status_cw = _weighted(STATUS_WEIGHTS)
    # Main anchors: a mild skew over the pool, so some subjects have many records.
    pool_cw = list(itertools.accumulate(1.0 / (r**0.6) for r in range(1, len(pool) + 1)))
    idents: list[tuple[str, str, str, str, tuple[tuple[str, str], ...]]] = []
    seen: set[str] = set()
    for _ in range(n):
        kind = rng.choices(kinds, cum_weights=kind_cw)[0]
        product = rng.choices(products, cum_weights=prod_cw)[0]
        anchor = rng.choices(pool, cum_weights=pool_cw)[0]
        scope: tuple[tuple[str, str], ...] = ()
        if rng.random() < 0.45:
            scope = (("page", rng.choice(pages)),)
        rid = record_id(kind, anchor, product, dict(scope))
        tries = 0
        while rid in seen:  # same subject drawn twice: vary the scope, as a runner would
            tries += 1
            scope = (("page", rng.choice(pages)),) if tries < 4 else (
                ("env", f"env-{tries}"), ("page", rng.choice(pages)))
            rid = record_id(kind, anchor, product, dict(scope))
        seen.add(rid)
        idents.append((rid, kind, product, anchor, scope))
    ids = [x[0] for x in idents]
    plans: list[Plan] = []
    for i, (rid, kind, product, anchor, scope) in enumerate(idents):
        status = rng.choices(statuses, cum_weights=status_cw)[0]
        by = None
        if status == "superseded" and n > 1:
            j = rng.randrange(n - 1)
            by = ids[j if j < i else j + 1]
        cites: tuple[str, ...] = ()
        if rng.random() < 0.06 and n > 2:
            cites = tuple(sorted({ids[rng.randrange(n)] for _ in range(rng.randint(1, 2))}
                                 - {rid}))
        plans.append(Plan(i, rid, kind, status, product, anchor, scope, by, cites))
    return plans


def _sentence(rng: random.Random, words: tuple[str, ...], cum: tuple[float, ...],
              total: float, k: int) -> str:
    picks = [words[bisect.bisect(cum, rng.random() * total)] for _ in range(k)]
    return picks[0].capitalize() + " " + " ".join(picks[1:]) + "."


def _body(rng: random.Random, words: tuple[str, ...], cum: tuple[float, ...],
          anchor: str) -> str:
    total = cum[-1]
    target = rng.randint(400, 800)
    parts: list[str] = [f"Seen around `{anchor}`."]
    size = len(parts[0])
    while size < target:
        s = _sentence(rng, words, cum, total, rng.randint(6, 16))
        if rng.random() < 0.15:
            s = s[:-1] + f' ("{words[rng.randint(40, 2000)].capitalize()}" shown).'
        if size >= 400 and size + len(s) + 1 > target:
            break
        parts.append(s)
        size += len(s) + 1
    text = " ".join(parts)
    if len(text) > 800:
        cut = text.rfind(" ", 400, 796)
        text = text[: cut if cut > 0 else 796].rstrip(" .,") + "."
    if len(text) > 300 and rng.random() < 0.5:  # two paragraphs
        mid = text.find(". ", len(text) // 2)
        if 0 < mid < len(text) - 3:
            text = text[: mid + 1] + "\n\n" + text[mid + 2 :]
    return text


def new_record(plan: Plan, rng: random.Random, seed: int, n: int) -> Record:
    """Fill in one planned record (title, body, anchors, trust, evidence, history)."""
    words, cum = vocabulary(seed)
    total = cum[-1]
    pool = anchor_pool(seed, max(20, n // 5))
    extra = {pool[rng.randrange(len(pool))] for _ in range(rng.randint(2, 7))}
    extra.discard(plan.anchor)
    title_words = [words[bisect.bisect(cum, rng.random() * total)] for _ in range(
        rng.randint(4, 9))]
    title = " ".join([title_words[0].capitalize(), *title_words[1:]])
    source = rng.choices([s for s, _ in SOURCE_WEIGHTS],
                         cum_weights=list(itertools.accumulate(w for _, w in SOURCE_WEIGHTS)))[0]
    start = rng.randint(0, 400)
    conf = 0 if plan.status == "candidate" else rng.randint(1, 25)
    contra = rng.choice((0, 0, 0, 0, 0, 0, 1, 2))
    last = None if conf == 0 else start + rng.randint(0, 80)
    until = start + rng.randint(1, 60) if plan.status in ("superseded", "deprecated") else None
    history: list[HistoryEntry] = []
    if plan.status == "active" and rng.random() < 0.06:
        h_from = max(0, start - rng.randint(10, 100))
        if h_from < start:
            history.append(HistoryEntry(
                valid=Valid(from_=h_from, until=start),
                title=_sentence(rng, words, cum, total, rng.randint(4, 8))[:-1],
                body=_sentence(rng, words, cum, total, rng.randint(10, 25)),
            ))
    tests = [a[5:] for a in (plan.anchor, *sorted(extra)) if a.startswith("test:")]
    evidence = []
    for _ in range(rng.randint(1, 2)):
        run = rng.randint(max(1, start), start + 90)
        obs = " ".join(words[rng.randint(40, 3000)] for _ in range(rng.randint(1, 4)))
        item: tuple[tuple[str, object], ...] = (
            ("run", f"r-{run:04d}"),
            ("test", tests[0] if tests else _slug_words(rng, words, 2)),
            ("step", rng.randint(1, 30)),
            ("observed", obs.capitalize() + (" (disabled)" if rng.random() < 0.2 else "")),
        )
        if rng.random() < 0.75:  # as the curator writes a learned record's evidence
            item += (("check", rng.choice(_CHECKS)), ("claim", f"{rng.getrandbits(48):012x}"))
        evidence.append(item)
    evidence.sort(key=lambda e: str(e[0][1]))
    return Record(
        id=plan.id,
        kind=plan.kind,
        status=plan.status,
        product=plan.product,
        anchor=plan.anchor,
        title=title,
        scope=plan.scope,
        anchors=tuple(sorted(extra)),
        trust=Trust(source=source, confirmations=conf, contradictions=contra,
                    last_confirmed=last),
        valid=Valid(from_=start, until=until),
        relations=Relations(superseded_by=plan.superseded_by, cites=plan.cites),
        evidence=tuple(evidence),
        history=tuple(history),
        body=_body(rng, words, cum, plan.anchor),
    )


def _write_chunk(args: tuple[str, int, int, int, list[Plan]]) -> tuple[int, int]:
    out, seed, n, chunk_no, plans = args
    rng = random.Random(f"chunk:{seed}:{chunk_no}")
    base = Path(out) / RECORDS_DIR
    total = 0
    for plan in plans:
        data = dump_record(new_record(plan, rng, seed, n)).encode("utf-8")
        with open(base / plan.kind / f"{plan.id}.md", "wb") as fh:
            fh.write(data)
        total += len(data)
    return len(plans), total


POLICIES: tuple[tuple[str, str], ...] = (
    ("no-real-cards.yaml",
     'id: no-real-cards\nrule: "Only use the test card 4242 4242 4242 4242"\n'
     'applies_to: {products: [shop-web, shop-ios, shop-android], '
     'anchors: ["page:/checkout*"]}\nseverity: must\n'),
    ("staging-only.yaml",
     "id: staging-only\nrule: Run against staging, never production\n"
     "applies_to: {products: [shop-web, admin-portal]}\nseverity: must\n"),
    ("accounts.yaml",
     "- id: use-test-accounts\n  rule: Log in with accounts from the qa pool only\n"
     "  applies_to: {anchors: [\"page:/login*\", \"flow:*\"]}\n  severity: should\n"
     "- id: no-password-reset\n  rule: Do not trigger password reset emails\n"
     "  applies_to: {anchors: [\"el:*reset*\"]}\n  severity: must\n"),
    ("rate-limits.yaml",
     "id: respect-rate-limits\nrule: Keep API calls under 10 per second\n"
     "applies_to: {products: [partner-api], anchors: [\"api:*\"]}\nseverity: should\n"),
    ("screenshots.yaml",
     "id: screenshot-failures\nrule: Take a screenshot on every failed assertion\n"
     "severity: info\n"),
    ("admin.yaml",
     "id: no-admin-deletes\nrule: Never delete data from the admin portal\n"
     "applies_to: {products: [admin-portal]}\nseverity: must\n"),
)


def generate(n: int, out: Path, seed: int = 7, jobs: int | None = None) -> dict[str, Any]:
    """Write the corpus into ``out`` (which must not hold records already); returns meta."""
    t0 = time.perf_counter()
    base = out / RECORDS_DIR
    if base.exists() and any(base.rglob("*.md")):
        raise SystemExit(f"error: {base} already holds records; choose an empty --out")
    for kind, _ in KIND_WEIGHTS:
        (base / kind).mkdir(parents=True, exist_ok=True)
    (out / "policies").mkdir(parents=True, exist_ok=True)
    (out / "memidex.toml").write_text(f'product = "{DEFAULT_PRODUCT}"\n', encoding="utf-8")
    for name, text in POLICIES:
        (out / "policies" / name).write_text(text, encoding="utf-8")
    plans = _plan(n, seed)
    tasks = [(str(out), seed, n, c, plans[i : i + CHUNK])
             for c, i in enumerate(range(0, n, CHUNK))]
    jobs = jobs or min(len(tasks), os.cpu_count() or 1)
    if jobs > 1 and len(tasks) > 1:
        ctx = mp.get_context("fork")
        with ctx.Pool(jobs) as pool:
            results = pool.map(_write_chunk, tasks, chunksize=1)
    else:
        results = [_write_chunk(t) for t in tasks]
    meta: dict[str, Any] = {
        "generator_version": GENERATOR_VERSION,
        "n": sum(r[0] for r in results),
        "seed": seed,
        "record_bytes": sum(r[1] for r in results),
        "product": DEFAULT_PRODUCT,
        "policies": len(POLICIES),
    }
    (out / CORPUS_META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return {**meta, "seconds": round(time.perf_counter() - t0, 3)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=100_000, help="number of records")
    p.add_argument("--out", type=Path, required=True, help="directory to create")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: cores)")
    args = p.parse_args(argv)
    meta = generate(args.n, args.out, args.seed, args.jobs)
    avg = meta["record_bytes"] / max(1, meta["n"])
    print(f"{meta['n']} records ({meta['record_bytes'] / 1e6:.1f} MB, {avg:.0f} B average) "
          f"and {meta['policies']} policy files in {args.out} in {meta['seconds']:.2f} s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
