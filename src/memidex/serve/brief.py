"""Assembling a brief (SPEC §5, docs/brief.md): what a test should know before it runs.

:func:`build_brief` checks the request, reads the test's anchors from the run store,
the policies and the candidate records from the index (:mod:`memidex.index.briefing`),
ranks them (:mod:`memidex.serve.rank`), masks every string, fences the app's text
(:mod:`memidex.fence`), fits the budget (:mod:`memidex.serve.budget`) and records
what it served (:mod:`memidex.runstate.served`). The facade calls it
(:meth:`memidex.app.Memidex.brief`); it never uses vectors, and the same inputs give
the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from memidex.config import Config
from memidex.config.tables import MAX_LIMIT, BriefOptions
from memidex.errors import MemidexError, UsageError
from memidex.plain import Frozen, set_field
from memidex.records.ids import ANCHOR_RE, PRODUCT_RE
from memidex.serve.rank import REASONS, Ranked
from memidex.serve.values import Brief, BriefRecord

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any

    from memidex.index.db import IndexDB
    from memidex.masking import Masker
    from memidex.records.rule import Policy
    from memidex.store.files import Store

__all__ = ["MAX_CANDIDATES", "Brief", "BriefRecord", "BriefRequest", "build_brief"]

MAX_CANDIDATES = 5000
"""At most this many (anchor, record) pairs are read for the test's anchors, and as many
again for the hop anchors; past that a note says the brief looked at the first ones."""
_TEST_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}")  # runs/evidence.py's
_SEVERITY_ORDER = {"must": 0, "should": 1, "info": 2}
_MAX_ANCHOR = 1000


class BriefRequest(Frozen):
    """What a brief is asked for (``brief TEST_ID [options]``)."""

    __slots__ = ("test_id", "product", "anchors", "at", "budget", "limit", "explain")
    test_id: str
    product: str
    anchors: tuple[str, ...]
    at: int | None
    budget: int | None
    limit: int | None
    explain: bool

    def __init__(self, test_id: str, product: str, anchors: tuple[str, ...] = (),
                 at: int | None = None, budget: int | None = None, limit: int | None = None,
                 explain: bool = False) -> None:
        set_field(self, "test_id", test_id)
        set_field(self, "product", product)
        set_field(self, "anchors", anchors)
        set_field(self, "at", at)
        set_field(self, "budget", budget)
        set_field(self, "limit", limit)
        set_field(self, "explain", explain)


def _check(req: BriefRequest) -> None:
    if not _TEST_ID_RE.fullmatch(req.test_id):
        raise UsageError(f"test id {req.test_id!r} is not a test id",
                         hint="a test id is letters, digits and . _ : / @ - (at most 200), "
                         "as in the run evidence, e.g. checkout-happy-path")
    if not PRODUCT_RE.fullmatch(req.product):
        raise UsageError(f"product {req.product!r} must be letters, digits, . _ -",
                         hint="pass --product NAME, e.g. --product shop-web")
    for a in req.anchors:
        if len(a) > _MAX_ANCHOR or not ANCHOR_RE.fullmatch(a) or "\n" in a or "\r" in a:
            raise UsageError(f"malformed anchor {a[:80]!r}",
                             hint="an anchor is type:value with a lowercase type, e.g. "
                             "el:button:place-order or page:/checkout")
    if req.budget is not None and not 1 <= req.budget <= 2**63 - 1:
        raise UsageError(f"--budget must be a whole number of tokens from 1 to {2**63 - 1:,}")
    if req.limit is not None and not 1 <= req.limit <= MAX_LIMIT:
        raise UsageError(f"--limit must be a whole number from 1 to {MAX_LIMIT}")
    if req.at is not None and req.at < 0:
        raise UsageError(f"--at {req.at} is below 0",
                         hint="give a run ordinal from 0 to the product's next one")


def _known_products(config: Config, db: IndexDB | None, policies: Sequence[Policy],
                    ordinals: Mapping[str, Any], product: str) -> bool:
    if product == config.product or product in ordinals:
        return True
    if any(product in p.products for p in policies):
        return True
    from memidex.runstate.tests import TestsFile

    if TestsFile(config, product).exists():
        return True
    if db is None:
        return True  # without the index the records cannot tell: not refused
    from memidex.index.briefing import known_product

    return known_product(db, product)


def _unknown_product(config: Config, db: IndexDB | None, product: str,
                     ordinals: Mapping[str, Any]) -> UsageError:
    names = set(ordinals) | ({config.product} if config.product else set())
    if db is not None:
        from memidex.index.briefing import products

        names |= set(products(db))
    hint = ("known products: " + ", ".join(sorted(names))) if names else \
        "no product has records or runs yet: add a record or ingest a run first"
    return UsageError(f"unknown product {product!r}: no records, runs or policies name it",
                      hint=hint)


def _policies(store: Store, db: IndexDB | None, notes: list[str]) -> list[Policy]:
    if db is not None:
        from memidex.index.briefing import policies

        return policies(db)
    files, problems = store.load_policies()
    if problems:
        notes.append(f"{len(problems)} policy file problem(s): `memidex knowledge check` "
                     "lists them")
    return sorted((p for _fs, _sha, ps in files for p in ps), key=lambda p: (p.path, p.id))


def _run_anchors(config: Config, product: str, test_id: str, notes: list[str]
                 ) -> tuple[str, ...]:
    """The anchors of the test's past runs (:meth:`RunStore.test_anchors`); a tests file
    that cannot be read is a note, and the brief uses ``--anchor`` only."""
    from memidex.runstate.tests import TestsFile

    try:
        return TestsFile(config, product).test_anchors(test_id)
    except (ValueError, TypeError, AttributeError, OSError, MemidexError) as exc:
        notes.append(f"the run store's tests file for {product} cannot be read ({exc}); "
                     "the brief uses --anchor only")
        return ()


def build_brief(config: Config, store: Store, db: IndexDB | None, req: BriefRequest, *,
                masker: Masker, index_note: str = "", record: bool = True,
                floor: int = 0) -> Brief:
    """The brief for ``req``; ``db`` None: the index is missing (policies only).
    ``floor``: the highest ordinal the product's records name, when the caller knows it
    without the index (with the index it is one lookup here)."""
    from memidex.index.query import max_ordinal
    from memidex.runstate.ordinals import Counters

    _check(req)
    options = config.brief
    ordinals = Counters.load(config).products
    counted = ordinals[req.product].current if req.product in ordinals else 0
    # The records' own highest ordinal: a clone without the run counters (a fresh
    # checkout, CI) still serves the current versions (docs/brief.md).
    floor = max(floor, max_ordinal(db, req.product) if db is not None else 0)
    next_ordinal = max(counted, floor) + 1
    ordinal = next_ordinal if req.at is None else req.at
    if ordinal > next_ordinal:
        raise UsageError(f"--at {ordinal} is beyond {req.product}'s next run ordinal "
                         f"({next_ordinal})",
                         hint=f"give a run ordinal from 0 to {next_ordinal}")
    notes: list[str] = []
    policies = _policies(store, db, notes)
    if not _known_products(config, db, policies, ordinals, req.product):
        raise _unknown_product(config, db, req.product, ordinals)
    run_anchors = _run_anchors(config, req.product, req.test_id, notes)
    test_anchors = frozenset((*run_anchors, *req.anchors, f"test:{req.test_id}"))
    if not run_anchors and not req.anchors:
        notes.append(f"no past runs of test {req.test_id} in {req.product} and no --anchor: "
                     f"only records about test:{req.test_id} can be ranked; pass --anchor "
                     "(e.g. --anchor page:/checkout) to say what the test touches")
    # Policies match also on the anchors of the committed records that carry the test:
    # a fresh clone (CI) has no run store, yet its procedure for the test names the pages.
    applying = _applying(policies, req.product, test_anchors | _record_anchors(
        store, db, req.product, req.test_id))
    ranked: list[Ranked] = []
    withheld: dict[str, set[str]] = {reason: set() for reason in REASONS}
    hops: tuple[str, ...] = ()
    level = "lexical-only"
    if db is None:
        level = "bundle-scan"
        notes.append("learned records need the index, which is unavailable"
                     + (f" ({index_note})" if index_note else "")
                     + ": this brief carries the policies only; run `memidex knowledge "
                     "rebuild-index`")
    else:
        ranked, withheld, hops = _candidates(config, db, req.product, ordinal, test_anchors,
                                             options, req.limit or options.limit, notes,
                                             current=ordinal == next_ordinal)
    if index_note and db is not None:
        notes.append(index_note)
    if options.candidates and any(x.candidate for x in ranked):
        notes.append("candidates are served ([brief] candidates = true) and marked as such")
    brief = _assemble(req, ordinal, next_ordinal, level, test_anchors, hops, applying,
                      ranked, withheld, options, masker, notes)
    return _record(config, brief) if record else brief


_FEEDING = ("active", "candidate")
"""The statuses whose records' anchors say what a test touches (never a quarantined,
deprecated or superseded record's)."""


def _record_anchors(store: Store, db: IndexDB | None, product: str, test_id: str
                    ) -> frozenset[str]:
    """Every anchor of ``product``'s current active or candidate records that carry
    ``test:<test_id>`` (docs/brief.md, *Policies*): from the index, else a scan of the
    record files (the brief without an index still carries every policy that applies)."""
    key = f"test:{test_id}"
    if db is not None:
        from memidex.index.briefing import anchor_hits, versions_of

        hits, _capped = anchor_hits(db, [key], cap=MAX_CANDIDATES)
        return frozenset(a for r in versions_of(db, {rowid for _a, rowid in hits})
                         if r.current and r.product == product and r.status in _FEEDING
                         for a in r.anchors)
    from memidex.store import visibility
    from memidex.store.files import LoadedRecord

    out: set[str] = set()
    with visibility.shared(store.knowledge):
        for item in store.iter_records():
            if isinstance(item, LoadedRecord):
                r = item.record
                if r.product == product and r.status in _FEEDING and key in r.all_anchors:
                    out.update(r.all_anchors)
    return frozenset(out)


def _applying(policies: Sequence[Policy], product: str, anchors: frozenset[str]
              ) -> list[Policy]:
    seen: set[str] = set()
    out = []
    ordered = sorted(anchors)
    for p in sorted(policies, key=lambda p: (_SEVERITY_ORDER.get(p.severity, 9), p.id,
                                             p.path)):
        if p.id not in seen and p.applies_to(product, ordered):
            seen.add(p.id)
            out.append(p)
    return out


def _serving(config: Config, product: str) -> Any:
    """What the tests' states say about serving the next run (a tests file that cannot
    be read: nothing withheld for it; the brief's anchors say so in a note already)."""
    from memidex.runstate.tests import Serving, TestsFile

    try:
        return TestsFile(config, product).serving()
    except (OSError, MemidexError):
        return Serving()


def _candidates(config: Config, db: IndexDB, product: str, ordinal: int,
                test_anchors: frozenset[str], options: BriefOptions, limit: int,
                notes: list[str], *, current: bool = True
                ) -> tuple[list[Ranked], dict[str, set[str]], tuple[str, ...]]:
    """The ranked records and the withheld ids. The hop is taken only when the records
    sharing an anchor leave room under ``limit`` (every one of them ranks above any
    record reached by a hop, so those would all be over the limit)."""
    from memidex.index.briefing import anchor_hits, citations, version_texts, versions_of
    from memidex.serve.rank import hop_anchors, rank

    hits, capped = anchor_hits(db, sorted(test_anchors), cap=MAX_CANDIDATES)
    direct = {rowid for _a, rowid in hits}
    rows = versions_of(db, direct)

    stale = _serving(config, product) if current else None

    def ranked_with(rows: list[Any], hops: tuple[str, ...], cited: dict[int, set[str]]
                    ) -> tuple[list[Ranked], dict[str, set[str]]]:
        return rank(rows, product=product, ordinal=ordinal, test_anchors=test_anchors,
                    hops=frozenset(hops), cited=cited, candidates=options.candidates,
                    trust_floor=options.trust_floor, half_life_runs=config.half_life_runs,
                    not_reached=stale.not_reached if stale else frozenset(),
                    failing=stale.failing if stale else frozenset())

    ranked, withheld = ranked_with(rows, (), {})
    hops: tuple[str, ...] = ()
    if len(ranked) < limit:
        hops = hop_anchors(rows, test_anchors, product)
        hop_hits, hop_capped = anchor_hits(db, hops, cap=MAX_CANDIDATES)
        capped = capped or hop_capped
        cited: dict[int, set[str]] = {}
        ids = {r.record_rowid: r.id for r in rows if r.current}
        for src, dst in citations(db, direct):
            if dst not in direct and src in ids:
                cited.setdefault(dst, set()).add(ids[src])
        more = ({rowid for _a, rowid in hop_hits} | set(cited)) - direct
        if more:
            ranked, withheld = ranked_with(rows + versions_of(db, more), hops, cited)
    if capped:
        notes.append(f"the test's anchors name more than {MAX_CANDIDATES} records: the "
                     "brief ranked the first of them (by anchor, then index order)")
    texts = version_texts(db, [(x.row.record_rowid, x.row.version, x.row.current)
                               for x in ranked[:limit]])
    for i, x in enumerate(ranked[:limit]):
        title, body = texts.get((x.row.record_rowid, x.row.version), ("", ""))
        ranked[i] = x.replace(row=x.row.replace(title=title, body=body))
    return ranked, withheld, hops


def _assemble(req: BriefRequest, ordinal: int, next_ordinal: int, level: str,
              test_anchors: frozenset[str], hops: tuple[str, ...],
              policies: list[Policy], ranked: list[Ranked],
              withheld_sets: dict[str, set[str]], options: BriefOptions, masker: Masker,
              notes: list[str]) -> Brief:
    from memidex.fence import choose_fence
    from memidex.serve import render
    from memidex.serve.budget import estimate, fit

    m = masker.mask
    limit = req.limit or options.limit
    withheld = {reason: sorted(ids) for reason, ids in withheld_sets.items()}
    over_limit = [x.row.id for x in ranked[limit:]]
    withheld["over_limit"] = sorted(set(withheld["over_limit"]) | set(over_limit))
    records = [BriefRecord(id=x.row.id, kind=x.row.kind, status=x.row.status,
                           title=m(x.row.title), body=m(x.row.body),
                           anchors=tuple(m(a) for a in x.row.anchors), ranked=x, rank=i,
                           shared=tuple(m(a) for a in x.shared),
                           hop=tuple(m(a) for a in (*x.hop, *x.cited)))
               for i, x in enumerate(ranked[:limit], start=1)]
    masked_policies = tuple(p.replace(rule=m(" ".join(p.rule.split())))
                            for p in policies)
    shown_anchors = tuple(sorted(m(a) for a in test_anchors))
    shown_hops = tuple(m(a) for a in hops)
    texts = [*render.fenced_texts(records, shown_anchors, shown_hops),
             *(p.rule for p in masked_policies), req.test_id, *notes]
    fence = choose_fence(render.clean(t) for t in texts)
    draft = Brief(req.test_id, req.product, ordinal, next_ordinal, level, shown_anchors,
                  shown_hops, masked_policies, tuple(records), withheld, fence, req.budget,
                  0, req.explain, tuple(notes))
    costs = [estimate(render.record_block(r, fence, req.explain)) for r in records]
    fixed = estimate(render.head(draft))
    if req.budget is not None:
        # the tail is reserved at its longest: every record cut
        worst = draft.replace(records=(), tokens=req.budget, notes=(
            *notes, _cut_note(len(records), req.budget)), withheld={
            **withheld, "over_budget": [*withheld["over_budget"], *(r.id for r in records)]})
        fixed += estimate(render.tail(worst))
    kept, used = fit(fixed, costs, req.budget)
    cut = [records[i].id for i in range(len(records)) if i not in set(kept)]
    if cut:
        withheld["over_budget"] = sorted(set(withheld["over_budget"]) | set(cut))
        notes.append(_cut_note(len(cut), req.budget))
    final = tuple(records[i].replace(tokens=costs[i], rank=n)
                  for n, i in enumerate(kept, start=1))
    return draft.replace(records=final, withheld=withheld, tokens=used, notes=tuple(notes))


def _cut_note(count: int, budget: int | None) -> str:
    return (f"{count} record(s) did not fit --budget {budget} (tokens counted as "
            "characters / 4)")


def _record(config: Config, brief: Brief) -> Brief:
    """Append what ``brief`` served to the product's served file; a failure to record
    becomes a note (the brief itself is still given)."""
    from memidex.runstate.served import record_served

    try:
        record_served(config, brief.product, brief.test_id, brief.ordinal, brief.ids,
                      brief.level)
    except (OSError, MemidexError) as exc:
        note = f"what was served could not be recorded ({exc})"
        note = note.replace(brief.fence, "untrusted-fence")  # never the fence itself
        return brief.replace(notes=(*brief.notes, note))
    return brief
