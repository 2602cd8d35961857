"""The composition root: :class:`Memidex`, the library API the CLI (and servers) call.

Every reading method first brings the index up to date with the files (the staleness
check) and falls back to reading the records directly (``bundle-scan``) when the index
is missing, locked or damaged.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memidex.config import Config, load_config
from memidex.errors import (
    AmbiguousIdError,
    IndexUnavailableError,
    InvalidInputError,
    NotFoundError,
    Problem,
    RecordError,
    UsageError,
)
from memidex.ranking import DEFAULT_STATUSES, SearchHit, SearchQuery
from memidex.records.vocab import KINDS, STATUSES
from memidex.store import LoadedRecord, Store

if TYPE_CHECKING:
    from memidex.records.model import Record

__all__ = [
    "AddResult",
    "CheckReport",
    "LEVELS",
    "Memidex",
    "SearchResult",
    "ShownRecord",
]

LEVELS = ("memidex", "lexical-only", "static-floor", "bundle-scan")
_STALENESS_HOW = {
    "git": "git diff-files, staged and HEAD diffs, untracked files name suspects; "
           "stat, then sha256",
    "stat": "stat every file (size, mtime, inode); sha256 of those that differ",
}
_UNAVAILABLE_LEVELS = {
    "memidex": "no embedding model support in this release",
    "static-floor": "no static embedding model support in this release",
}


@dataclass(frozen=True)
class SearchResult:
    query: str
    product: str | None
    level: str
    results: list[SearchHit]
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "product": self.product,
            "level": self.level,
            "results": [h.as_dict() for h in self.results],
            **({"note": self.note} if self.note else {}),
        }


@dataclass(frozen=True)
class ShownRecord:
    record: Record
    path: str
    text: str
    duplicates: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        r = self.record
        return {
            "id": r.id, "path": self.path, "kind": r.kind, "status": r.status,
            "product": r.product, "scope": dict(r.scope), "anchor": r.anchor,
            "anchors": list(r.anchors), "title": r.title, "body": r.body,
            "trust": {"source": r.trust.source, "confirmations": r.trust.confirmations,
                      "contradictions": r.trust.contradictions,
                      "last_confirmed": r.trust.last_confirmed},
            "valid": {"from": r.valid.from_, "until": r.valid.until},
            "relations": {"supersedes": list(r.relations.supersedes),
                          "superseded_by": r.relations.superseded_by,
                          "cites": list(r.relations.cites),
                          "contradicts": list(r.relations.contradicts)},
            "evidence": [dict(e) for e in r.evidence],
            "history": [{"valid": {"from": h.valid.from_, "until": h.valid.until},
                         "title": h.title, "body": h.body} for h in r.history],
            "duplicates": list(self.duplicates),
        }


@dataclass(frozen=True)
class AddResult:
    id: str
    path: str
    status: str
    change: str  # added | updated | unchanged

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "status": self.status, "change": self.change}


@dataclass
class CheckReport:
    records: int = 0
    policies: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "records": self.records, "policies": self.policies,
                "problems": [p.as_dict() for p in self.problems]}


def _statuses(statuses: Sequence[str] | None) -> tuple[str, ...]:
    if statuses is None:
        return DEFAULT_STATUSES
    if "any" in statuses:
        return ()
    bad = [s for s in statuses if s not in STATUSES]
    if bad:
        raise UsageError(f"unknown status {bad[0]!r}: use {', '.join(STATUSES)} or any")
    return tuple(sorted(set(statuses)))


def _kinds(kinds: Sequence[str]) -> tuple[str, ...]:
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise UsageError(f"unknown kind {bad[0]!r}: use {', '.join(KINDS)}")
    return tuple(sorted(set(kinds)))


class Memidex:
    """One repository's knowledge: records, policies and the derived index."""

    def __init__(self, root: Path | None = None, *, config: Config | None = None,
                 overrides: dict[str, Any] | None = None) -> None:
        self.config = config or load_config(root, overrides=overrides)
        self.store = Store(self.config)
        self._db: Any = None  # memidex.index.db.IndexDB, imported lazily
        self.last_refresh: Any = None
        self.index_note = ""
        self.wait = 10.0  # seconds a record-writing command waits for the writer lease
        # A long-lived process (a server on this facade) re-checks at most this often;
        # each CLI command is a new process and always checks. Our own writes reset it.
        self.recheck_seconds = 1.0
        self._checked_at: float | None = None

    # --- the index -----------------------------------------------------------------

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        self._checked_at = None
        from memidex.staleness import discard_prefetch

        discard_prefetch(str(self.store.root))

    def prefetch(self) -> None:
        """Start the staleness check's git call now, to overlap it with imports and the
        opening of the index (the CLI does this for reading commands)."""
        from memidex.staleness import prefetch

        prefetch(str(self.store.root), [self.store.records_rel, self.store.policies_rel])

    def __enter__(self) -> Memidex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def index(self, *, refresh: bool = True) -> Any:
        """The open, up-to-date index, or ``None`` (and ``index_note`` says why)."""
        from memidex.index.build import refresh as refresh_index
        from memidex.index.db import IndexDB, IndexSwapped

        for _ in range(3):
            if self._db is not None and self._db.swapped():
                self.close()
            if self._db is None:
                try:
                    self._db = IndexDB.open(self.config.index_path, write=True)
                except IndexUnavailableError as exc:
                    self.index_note = exc.message
                    return None
            if not refresh or (self._checked_at is not None and
                               time.monotonic() - self._checked_at < self.recheck_seconds):
                return self._db
            try:
                self.last_refresh = refresh_index(self.store, self._db)
                self._checked_at = time.monotonic()
            except IndexSwapped:
                self.close()
                continue
            except sqlite3.OperationalError as exc:
                self.index_note = f"the index is locked or read-only ({exc})"
                self.close()
                return None
            except sqlite3.DatabaseError as exc:
                self.index_note = f"the index is damaged ({exc})"
                self.close()
                return None
            self.index_note = ""
            return self._db
        self.index_note = "the index kept being replaced"
        return None

    def _damaged(self, exc: Exception) -> None:
        """A query failed on the index: answer from the records this time (bundle-scan)."""
        self.index_note = f"the index is damaged ({exc}); run `memidex knowledge rebuild-index`"
        self.close()

    def rebuild_index(self, *, progress: Callable[[int, int], None] | None = None,
                      jobs: int | None = None) -> Any:
        """Rebuild the index. A maintenance command: refuses at once (exit 3) while another
        live process — a daemon, say — holds the writer lease, and holds it meanwhile."""
        from memidex.index.build import rebuild
        from memidex.writer import writer_session

        self.close()
        with writer_session(self.store, wait=0, ttl=self.config.lease_ttl_seconds,
                            maintenance=True):
            return rebuild(self.store, self.config.index_path, jobs=jobs, progress=progress)

    # --- reading -------------------------------------------------------------------

    def _product(self, product: str | None, all_products: bool) -> str | None:
        if all_products:
            if product:
                raise UsageError("give --product or --all-products, not both")
            return None
        chosen = product or self.config.product
        if not chosen:
            raise UsageError(
                "no product: every search is scoped to one product",
                hint="pass --product NAME, set `product` in memidex.toml, or --all-products",
            )
        return chosen

    def _loaded(self) -> Iterator[LoadedRecord]:
        for item in self.store.iter_records():
            if isinstance(item, LoadedRecord):
                yield item

    def search(self, text: str, *, product: str | None = None, all_products: bool = False,
               kinds: Sequence[str] = (), statuses: Sequence[str] | None = None,
               anchors: Sequence[str] = (), limit: int = 10) -> SearchResult:
        if limit < 1:
            raise UsageError("--limit must be at least 1")
        q = SearchQuery(text=text, product=self._product(product, all_products),
                        kinds=_kinds(kinds), statuses=_statuses(statuses),
                        anchors=tuple(anchors), limit=limit)
        db = self.index()
        if db is not None:
            from memidex.index.query import search

            try:
                return SearchResult(text, q.product, "lexical-only", search(db, q))
            except sqlite3.DatabaseError as exc:
                self._damaged(exc)
        from memidex.scan import scan_search

        return SearchResult(text, q.product, "bundle-scan", scan_search(self._loaded(), q),
                            note=self.index_note)

    def show(self, id_or_prefix: str) -> ShownRecord:
        prefix = id_or_prefix.strip()
        if not prefix:
            raise UsageError("give a record id or a unique prefix of one")
        db = self.index()
        rows = None
        if db is not None:
            from memidex.index.query import find_ids

            try:
                rows = find_ids(db, prefix)
            except sqlite3.DatabaseError as exc:
                self._damaged(exc)
        if rows is not None:
            candidates = [(row.id, row.path) for row in rows]
        else:
            candidates = sorted((lr.record.id, lr.relpath) for lr in self._loaded()
                                if lr.record.id.startswith(prefix))
            exact = [c for c in candidates if c[0] == prefix]
            candidates = exact or candidates
        ids = sorted({c[0] for c in candidates})
        if not ids:
            raise NotFoundError(f"no record with id or prefix {prefix!r}")
        if len(ids) > 1:
            shown = ", ".join(ids[:5]) + (" …" if len(ids) > 5 else "")
            raise AmbiguousIdError(f"{prefix!r} matches {len(ids)} records: {shown}")
        paths = [c[1] for c in candidates if c[0] == ids[0]]
        path = paths[0]
        data = self.store.read_bytes(path)
        from memidex.records.codec import parse_record_bytes

        record = parse_record_bytes(data, path)
        return ShownRecord(record, path, data.decode("utf-8"), tuple(paths[1:]))

    def list_records(self, *, product: str | None = None, all_products: bool = False,
                     kinds: Sequence[str] = (), statuses: Sequence[str] | None = None,
                     anchors: Sequence[str] = (), limit: int | None = None
                     ) -> list[dict[str, Any]]:
        chosen = self._product(product, all_products)
        k, s = _kinds(kinds), (() if statuses is None else _statuses(statuses))
        db = self.index()
        if db is not None:
            from memidex.index.query import list_records

            try:
                return [row.as_dict() for row in list_records(
                    db, product=chosen, kinds=k, statuses=s, anchors=tuple(anchors),
                    limit=limit)]
            except sqlite3.DatabaseError as exc:
                self._damaged(exc)
        from memidex.scan import matches_filters

        out = []
        for lr in sorted(self._loaded(), key=lambda x: (x.record.kind, x.record.id, x.relpath)):
            r = lr.record
            if matches_filters(r, chosen, k, s, tuple(anchors)):
                out.append({
                    "id": r.id, "path": lr.relpath, "kind": r.kind, "status": r.status,
                    "product": r.product, "anchor": r.anchor, "title": r.title,
                    "anchors": list(r.all_anchors),
                    "trust": {"source": r.trust.source,
                              "confirmations": r.trust.confirmations,
                              "contradictions": r.trust.contradictions,
                              "last_confirmed": r.trust.last_confirmed},
                    "valid": {"from": r.valid.from_, "until": r.valid.until},
                })
        return out[:limit] if limit is not None else out

    # --- checking ------------------------------------------------------------------

    def check(self) -> CheckReport:
        """Validate every record and policy from the files themselves (not the index)."""
        report = CheckReport()
        files, scan_problems = self.store.scan_records()
        report.problems.extend(scan_problems)
        by_id: dict[str, list[str]] = {}
        loaded: list[LoadedRecord] = []
        for item in self.store.iter_records(files):
            if isinstance(item, Problem):
                report.problems.append(item)
                continue
            loaded.append(item)
            by_id.setdefault(item.record.id, []).append(item.relpath)
        report.records = len(loaded)
        records_rel = self.store.rel(self.store.records_dir)
        for lr in loaded:
            r = lr.record
            expected = f"{records_rel}/{r.relpath.removeprefix('records/')}"
            if lr.relpath != expected:
                report.problems.append(Problem(
                    lr.relpath, 1, f"a {r.kind} record with id {r.id} belongs at {expected}"))
            for rel, target in r.relations.edges():
                if target not in by_id:
                    report.problems.append(Problem(
                        lr.relpath, _line_of_path(self.store, lr.relpath, "relations"),
                        f"relations.{rel} names {target}, which is not a record here"))
        for rid, paths in sorted(by_id.items()):
            for path in paths[1:]:
                report.problems.append(Problem(path, _line_of_path(self.store, path, "id"),
                                               f"duplicate id {rid} (also in {paths[0]})"))
        policy_files, policy_problems = self.store.load_policies()
        report.problems.extend(policy_problems)
        seen: dict[str, str] = {}
        for _fs, _sha, policies in policy_files:
            for p in policies:
                report.policies += 1
                if p.id in seen:
                    report.problems.append(Problem(p.path, p.line,
                                                   f"duplicate policy id {p.id} (also in "
                                                   f"{seen[p.id]})"))
                seen.setdefault(p.id, p.path)
        report.problems.sort(key=lambda p: (p.path, p.line, p.reason))
        return report

    # --- writing -------------------------------------------------------------------

    def add(self, *, kind: str, product: str, anchors: Sequence[str], title: str,
            body: str = "", scope: dict[str, str] | None = None) -> AddResult:
        """Write a human-authored record (``trust.source: human``, status ``active``).

        The same kind/anchor/product/scope again updates that record: new title and body,
        anchors merged, its trust counts and evidence kept.
        """
        from memidex.masking import Masker
        from memidex.records.ids import ANCHOR_RE, PRODUCT_RE, record_id

        if kind not in KINDS:
            raise UsageError(f"unknown kind {kind!r}: use {', '.join(KINDS)}")
        if not anchors:
            raise UsageError("give at least one --anchor (the first is the main anchor)")
        for a in anchors:
            if not ANCHOR_RE.fullmatch(a) or "\n" in a:
                raise InvalidInputError(f"anchor {a!r} must look like type:value, "
                                        "e.g. el:button:place-order")
        if not PRODUCT_RE.fullmatch(product):
            raise InvalidInputError(f"product {product!r} must be letters, digits, . _ -")
        masker = Masker.load(self.config.root / self.config.secrets_file)
        title = masker.mask(" ".join(title.split()))
        if not title:
            raise UsageError("--title must not be empty")
        body = masker.mask(body).strip("\n").rstrip()
        scope = dict(sorted((scope or {}).items()))
        rid = record_id(kind, anchors[0], product, scope)
        target = self.store.record_path(kind, rid)
        rel = self.store.rel(target)
        existing_hash = self.store.current_hash(target)
        from memidex.records.model import Record, Trust

        old: Record | None = None
        if existing_hash is not None:
            from memidex.records.codec import parse_record_bytes

            try:
                old = parse_record_bytes(target.read_bytes(), rel)
            except RecordError as exc:
                raise RecordError(exc.problems, hint="fix or purge the existing record "
                                  "first; memidex never overwrites a file it cannot read"
                                  ) from None
        extra = tuple(sorted(set(anchors[1:]) - {anchors[0]}))
        if old is None:
            record = Record(id=rid, kind=kind, status="active", product=product,
                            anchor=anchors[0], title=title, scope=tuple(scope.items()),
                            anchors=extra, trust=Trust(source="human"), body=body)
        else:
            merged = tuple(sorted((set(old.anchors) | set(extra)) - {old.anchor}))
            record = replace(old, title=title, body=body or old.body, anchors=merged,
                             status="active", trust=replace(old.trust, source="human"))
        changed = self._write([(record, existing_hash)], command="add")
        change = "unchanged" if not changed else ("added" if old is None else "updated")
        return AddResult(rid, rel, record.status, change)

    def _write(self, records: Sequence[tuple[Record, str | None]], *, command: str) -> int:
        """Write records as one journaled change set under the writer lease (fenced).

        Waits up to ``self.wait`` seconds for another writer; while ``memidex daemon``
        holds the lease, hands the change set to it through ``queue/corrections/`` and
        waits as long for its marker (:func:`memidex.curation.apply_changes`). Returns how
        many files changed. ``expected`` is the content hash read before (None: must not
        exist), so a person's edit made meanwhile is never clobbered (ConflictError).
        """
        from memidex.curation import apply_changes
        from memidex.writer import Write

        done = apply_changes(self.store, [Write(r, expected) for r, expected in records],
                             command=f"knowledge {command}", wait=self.wait,
                             ttl=self.config.lease_ttl_seconds)
        self._checked_at = None  # the next read sees this write
        return sum(1 for changed in done if changed)

    # --- health --------------------------------------------------------------------

    def doctor(self) -> dict[str, Any]:
        from memidex.index.schema import SCHEMA_VERSION
        from memidex.records.yamlfast import yaml_loader

        db = self.index()
        index: dict[str, Any] = {"path": self.store.rel(self.config.index_path),
                                 "exists": self.config.index_path.exists(),
                                 "expected_schema_version": SCHEMA_VERSION}
        errors: list[dict[str, Any]] = []
        record_count = 0
        healthy = True
        if db is not None:
            from memidex.index.query import duplicate_ids, problems

            meta = db.meta()
            counts = db.counts()
            quick = db.quick_check()
            rep = self.last_refresh
            index.update({
                "ok": quick == "ok", "quick_check": quick,
                "schema_version": int(meta.get("schema_version", "0")),
                "tokenizer": meta.get("tokenizer"), "fingerprint": meta.get("fingerprint"),
                "records": counts["records"], "policies": counts["policies"],
                "staleness": {
                    "method": rep.method if rep else "stat",
                    "how": _STALENESS_HOW[rep.method if rep else "stat"],
                    "added": len(rep.added) if rep else 0,
                    "changed": len(rep.changed) if rep else 0,
                    "deleted": len(rep.deleted) if rep else 0,
                },
            })
            healthy = quick == "ok"
            record_count = counts["records"]
            errors = [{"path": p, "line": ln, "reason": r} for p, ln, r in problems(db)]
            for rid, paths in duplicate_ids(db):
                for p in paths[1:]:
                    errors.append({"path": p, "line": 2,
                                   "reason": f"duplicate id {rid} (also in {paths[0]})"})
        else:
            healthy = False
            index.update({"ok": False, "reason": self.index_note})
            for item in self.store.iter_records():
                if isinstance(item, Problem):
                    errors.append(item.as_dict())
                else:
                    record_count += 1
            _, pproblems = self.store.load_policies()
            errors += [p.as_dict() for p in pproblems]
        if errors:
            healthy = False
        loader = yaml_loader().__name__
        level = "lexical-only" if db is not None else "bundle-scan"
        return {
            "healthy": healthy,
            "level": level,
            "levels": {name: ("in use" if name == level else _UNAVAILABLE_LEVELS.get(
                name, "available" if name == "bundle-scan" else "index unavailable"))
                for name in LEVELS},
            "index": index,
            "records": {"count": record_count, "errors": errors},
            "lease": self.lease_status(),
            "yaml": {"loader": loader, "c_loader": loader == "CSafeLoader",
                     "note": "" if loader == "CSafeLoader" else
                     "PyYAML has no C loader here: hand-written records parse 8x slower"},
            "config": self.config.as_dict(),
        }

    def lease_status(self) -> dict[str, Any]:
        from memidex.lease import lease_status

        return lease_status(self.config.knowledge_path)

    # --- curation: human curation commands (memidex.curation; docs/curation.md) -----
    # Each takes a record id or a unique prefix of one, writes through the fenced writer
    # (or hands the change to a running daemon) and returns a CurationResult.

    def confirm(self, id_or_prefix: str, *, run_ordinal: int | None = None) -> Any:
        from memidex.curation import run_confirm

        return self._curated(run_confirm(self, id_or_prefix, run_ordinal))

    def supersede(self, id_or_prefix: str, *, title: str | None = None,
                  body: str | None = None, ordinal: int | None = None,
                  by: str | None = None) -> Any:
        from memidex.curation import run_supersede

        return self._curated(run_supersede(self, id_or_prefix, title=title, body=body,
                                           ordinal=ordinal, by=by))

    def deprecate(self, id_or_prefix: str, *, ordinal: int | None = None) -> Any:
        from memidex.curation import run_deprecate

        return self._curated(run_deprecate(self, id_or_prefix, ordinal))

    def quarantine(self, id_or_prefix: str) -> Any:
        from memidex.curation import run_quarantine

        return self._curated(run_quarantine(self, id_or_prefix))

    def release(self, id_or_prefix: str) -> Any:
        from memidex.curation import run_release

        return self._curated(run_release(self, id_or_prefix))

    def purge(self, id_or_prefix: str) -> Any:
        """Delete a record and every trace of it (refuses at once under a daemon)."""
        from memidex.curation import run_purge

        result = self._curated(run_purge(self, id_or_prefix))
        self.index()  # the refresh drops the file's rows (a missing index: the next build)
        return result

    def _curated(self, result: Any) -> Any:
        self._checked_at = None  # the next read sees this write
        return result

    def daemon(self, *, once: bool = False, stop: Any = None, log: Any = None) -> Any:
        """Run ``memidex daemon`` on this repository (:func:`memidex.daemon.run_daemon`)."""
        from memidex.daemon import run_daemon

        return run_daemon(self.store, wait=self.wait, ttl=self.config.lease_ttl_seconds,
                          once=once, stop=stop, log=log)


def _line_of_path(store: Store, path: str, key: str) -> int:
    from memidex.records.codec import split_front_matter
    from memidex.records.validate import key_line

    try:
        front, _, first = split_front_matter(store.read_bytes(path).decode("utf-8"), path)
    except (OSError, UnicodeDecodeError, RecordError):
        return 1
    return key_line(front, key, first)
