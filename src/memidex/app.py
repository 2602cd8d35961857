"""The composition root: :class:`Memidex`, the library API the CLI (and servers) call.

Every reading method first brings the index up to date with the files (the staleness
check) and falls back to reading the records directly (``bundle-scan``) when the index
is missing, locked or damaged.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memidex.app_runs import RunsMixin
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
from memidex.records.vocab import KINDS, STATUSES
from memidex.results import AddResult, CheckReport, CurationResult, SearchResult, ShownRecord
from memidex.search.ranking import DEFAULT_STATUSES, SearchQuery
from memidex.store.files import LoadedRecord, Store

if TYPE_CHECKING:
    from memidex.index.build import BuildReport
    from memidex.index.db import IndexDB
    from memidex.index.refresh import RefreshReport
    from memidex.masking import Masker
    from memidex.records.model import Record
    from memidex.write.daemon import DaemonReport
    from memidex.write.writer import Change, WriterSession

__all__ = [
    "AddResult",
    "CheckReport",
    "CurationResult",
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
_RMW_ATTEMPTS = 20
"""How often a curation command re-reads and recomputes a record another writer changed
between its read and its write, before it reports the conflict (exit 3)."""
_UNAVAILABLE_LEVELS = {
    "memidex": "no embedding model support in this release",
    "static-floor": "no static embedding model support in this release",
}


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


class Memidex(RunsMixin):
    """One repository's knowledge: records, policies and the derived index. Learning from
    runs (``runs ingest``, ``knowledge diff|rollback|proposals``) is in
    :class:`memidex.app_runs.RunsMixin`."""

    def __init__(self, root: Path | None = None, *, config: Config | None = None,
                 overrides: dict[str, Any] | None = None, wait: float = 10.0) -> None:
        """``wait``: seconds a record-writing command waits for the writer lease (or for
        a running daemon to apply its change)."""
        self.config = config or load_config(root, overrides=overrides)
        self.store = Store(self.config)
        self._db: IndexDB | None = None  # imported lazily
        self.last_refresh: RefreshReport | None = None
        self.index_note = ""
        self.wait = wait
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
        from memidex.index.staleness import discard_prefetch

        discard_prefetch(str(self.store.root))

    def prefetch(self) -> None:
        """Start the staleness check's git call now, to overlap it with imports and the
        opening of the index (the CLI does this for reading commands)."""
        from memidex.index.staleness import prefetch

        prefetch(str(self.store.root), [self.store.records_rel, self.store.policies_rel])

    def __enter__(self) -> Memidex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def index(self, *, refresh: bool = True) -> IndexDB | None:
        """The open, up-to-date index, or ``None`` (and ``index_note`` says why)."""
        from memidex.index.db import IndexDB, IndexOutdated, IndexSwapped
        from memidex.index.refresh import refresh as refresh_index

        upgraded = False
        for _ in range(3):
            if self._db is not None and self._db.swapped():
                self.close()
            if self._db is None:
                try:
                    self._db = IndexDB.open(self.config.index_path, write=True)
                except IndexOutdated as exc:
                    if upgraded or not self._upgrade_index(exc.pending):
                        self.index_note = self.index_note or exc.message
                        return None
                    upgraded = True
                    continue
                except IndexUnavailableError as exc:
                    self.index_note = exc.message
                    return None
            if not refresh or (self._checked_at is not None and
                               time.monotonic() - self._checked_at < self.recheck_seconds):
                return self._db
            try:
                self.last_refresh = refresh_index(self.store, self._db)
                # A damaged index is never served as an empty one (a few µs).
                self._db.sanity()
                self._checked_at = time.monotonic()
            except IndexSwapped:
                self.close()
                continue
            except IndexUnavailableError as exc:
                self.index_note = exc.message
                self.close()
                return None
            interrupted = self.last_refresh.interrupted if self.last_refresh else None
            self.index_note = "" if interrupted is None else (
                f"a change set ({interrupted}) was interrupted while its files were being "
                "moved into place; the next write finishes it")
            return self._db
        self.index_note = "the index kept being replaced"
        return None

    def _upgrade_index(self, pending: list[str]) -> bool:
        """An index built by an earlier memidex: migrate or rebuild it now (once), so the
        command that found it answers from an up-to-date index. False (and
        ``index_note``) when that fails; the command then scans the records."""
        from memidex.index.build import upgrade

        try:
            upgrade(self.store, self.config.index_path, pending)
        except (OSError, IndexUnavailableError) as exc:
            self.index_note = f"the index is from an earlier memidex and could not be " \
                              f"brought up to date ({exc})"
            return False
        return True

    def _damaged(self, exc: IndexUnavailableError) -> None:
        """A query failed on the index: answer from the records this time (bundle-scan)."""
        self.index_note = exc.message
        self.close()

    def rebuild_index(self, *, progress: Callable[[int, int], None] | None = None,
                      jobs: int | None = None) -> BuildReport:
        """Rebuild the index. A maintenance command: refuses at once (exit 3) while another
        live process — a daemon, say — holds the writer lease, and holds it meanwhile."""
        from memidex.index.build import rebuild
        from memidex.write.writer import writer_session

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
        """Every record that parses, read holding the visibility lock shared, so a change
        set is seen whole (:mod:`memidex.store.visibility`)."""
        from memidex.store import visibility

        with visibility.shared(self.store.knowledge):
            for item in self.store.iter_records():
                if isinstance(item, LoadedRecord):
                    yield item

    def search(self, text: str, *, product: str | None = None, all_products: bool = False,
               kinds: Sequence[str] = (), statuses: Sequence[str] | None = None,
               anchors: Sequence[str] = (), limit: int = 10,
               near: Sequence[str] = ()) -> SearchResult:
        _check_limit(limit)
        q = SearchQuery(text=text, product=self._product(product, all_products),
                        kinds=_kinds(kinds), statuses=_statuses(statuses),
                        anchors=tuple(anchors), limit=limit, near=_near(near))
        db = self.index()
        if db is not None:
            from memidex.index.query import search

            try:
                return SearchResult(text, q.product, "lexical-only",
                                    self._masker().mask_hits(search(db, q)),
                                    note=self.index_note)
            except IndexUnavailableError as exc:
                self._damaged(exc)
        from memidex.search.scan import scan_near, scan_search

        hits = scan_near(list(self._loaded()), q) if q.near else \
            scan_search(self._loaded(), q)
        return SearchResult(text, q.product, "bundle-scan", self._masker().mask_hits(hits),
                            note=self.index_note)

    def _masker(self) -> Masker:
        """The secrets file's masker: what a record-writing command masks, and the secrets
        masked in what a reading command returns (a secret typed by hand into a record).
        One ``stat`` when there is no secrets file; cached by size and mtime."""
        from memidex.masking import Masker

        return Masker.load(self.config.root / self.config.secrets_file)

    def show(self, id_or_prefix: str) -> ShownRecord:
        """The record an id or unique prefix names, secrets masked in what it shows."""
        return self._masker().mask_shown(self._show(id_or_prefix))

    def _show(self, id_or_prefix: str) -> ShownRecord:
        prefix = id_or_prefix.strip()
        if not prefix:
            raise UsageError("give a record id or a unique prefix of one")
        db = self.index()
        rows = None
        if db is not None:
            from memidex.index.query import find_ids

            try:
                rows = find_ids(db, prefix)
            except IndexUnavailableError as exc:
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
        if limit is not None:
            _check_limit(limit)
        db = self.index()
        if db is not None:
            from memidex.index.query import list_records

            try:
                return self._masker().mask_rows([row.as_dict() for row in list_records(
                    db, product=chosen, kinds=k, statuses=s, anchors=tuple(anchors),
                    limit=limit)])
            except IndexUnavailableError as exc:
                self._damaged(exc)
        from memidex.records.shape import summary_of
        from memidex.search.scan import matches_filters

        out = []
        for lr in sorted(self._loaded(), key=lambda x: (x.record.kind, x.record.id, x.relpath)):
            r = lr.record
            if matches_filters(r, chosen, k, s, tuple(anchors)):
                out.append(summary_of(r, lr.relpath))
        return self._masker().mask_rows(out[:limit] if limit is not None else out)

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
        report.problems.extend(_secret_problems(self.store, self.config))  # issue 13: secrets
        report.problems.sort(key=lambda p: (p.path, p.line, p.reason))
        return report

    # --- writing -------------------------------------------------------------------

    def add(self, *, kind: str, product: str, anchors: Sequence[str], title: str,
            body: str = "", scope: dict[str, str] | None = None) -> AddResult:
        """Write a human-authored record (``trust.source: human``, status ``active``).

        A new record's window begins at the product's current run ordinal (the last one
        allocated in ``build-ordinals.json``, 0 if none). The same kind/anchor/product/scope
        again updates that record (:func:`memidex.records.transitions.update`): new title
        and body, anchors merged, its trust counts, evidence, window and history kept — and
        only when the status table allows it (a quarantined, superseded or deprecated
        record is refused, exit 2). Every string is masked (secrets, home paths) before
        the id is computed; a secret in the product name is refused (exit 4).
        """
        from memidex.records.ids import ANCHOR_RE, PRODUCT_RE, record_id

        if kind not in KINDS:
            raise UsageError(f"unknown kind {kind!r}: use {', '.join(KINDS)}")
        if not anchors:
            raise UsageError("give at least one --anchor (the first is the main anchor)")
        masker = self._masker()
        if masker.holds_secret(product):
            raise InvalidInputError("the product name holds a value from the secrets file",
                                    hint="a product is an identifier: use another name")
        if not PRODUCT_RE.fullmatch(product):
            raise InvalidInputError(f"product {product!r} must be letters, digits, . _ -")
        anchors = [masker.mask(a) for a in anchors]
        for a in anchors:
            if not ANCHOR_RE.fullmatch(a) or "\n" in a:
                raise InvalidInputError(f"anchor {a!r} must look like type:value, "
                                        "e.g. el:button:place-order")
        title = masker.mask(" ".join(title.split()))
        if not title:
            raise UsageError("--title must not be empty")
        body = _clean_body(masker.mask(body))
        scope = dict(sorted((masker.mask(k), masker.mask(v))
                            for k, v in (scope or {}).items()))
        rid = record_id(kind, anchors[0], product, scope)
        target = self.store.record_path(kind, rid)
        self.store.check_write_folders(kind)  # before anything is created
        rel = self.store.rel(target)
        self._refuse_elsewhere(rid, rel)
        from memidex.records.model import Record, Trust

        old: Record | None = None
        existing_hash: str | None = None  # None: the file must not exist when written
        try:
            data = target.read_bytes()  # the record and the hash the writer checks: one read
        except FileNotFoundError:
            data = None
        if data is not None:
            from memidex.records.codec import content_hash, parse_record_bytes

            existing_hash = content_hash(data)
            try:
                old = parse_record_bytes(data, rel)
            except RecordError as exc:
                raise RecordError(exc.problems, hint="fix or purge the existing record "
                                  "first; memidex never overwrites a file it cannot read"
                                  ) from None
        extra = tuple(sorted(set(anchors[1:]) - {anchors[0]}))
        if old is None:
            from memidex.records.model import Valid
            from memidex.runstate.ordinals import current_ordinal

            # A new belief begins at the product's current run ordinal (SPEC §2, §3).
            record = Record(id=rid, kind=kind, status="active", product=product,
                            anchor=anchors[0], title=title, scope=tuple(scope.items()),
                            anchors=extra, trust=Trust(source="human"), body=body,
                            valid=Valid(current_ordinal(self.config, product,
                                                        self.ordinal_floor(product))))
        else:
            from memidex.records.transitions import update

            record = update(old, title=title, body=body, anchors=extra)
        record = self._masked(record, masker)
        changed = self._write([(record, existing_hash)], command="add")
        change = "unchanged" if not changed else ("added" if old is None else "updated")
        return AddResult(rid, rel, record.status, change)

    def _masked(self, record: Record, masker: Masker | None = None) -> Record:
        """The write boundary for a record built from input: every string it stores
        masked (:meth:`memidex.masking.Masker.mask_record`); its subject must already be
        (the id is computed from the masked subject)."""
        masker = masker or self._masker()
        masked = masker.mask_record(record)
        if masked.id != record.id:
            raise InvalidInputError(f"{record.id} holds a secret or a home path in its "
                                    "anchor or scope", hint="edit the record by hand")
        return masked

    def _refuse_elsewhere(self, rid: str, canonical: str) -> None:
        """Refuse when a record with id ``rid`` exists at a path other than ``canonical``
        (writing would make a second file with the same id)."""
        db = self.index()
        paths: list[str] | None = None
        if db is not None:
            from memidex.index.query import find_ids

            try:
                paths = [row.path for row in find_ids(db, rid) if row.id == rid]
            except IndexUnavailableError as exc:
                self._damaged(exc)
        if paths is None:
            paths = [lr.relpath for lr in self._loaded() if lr.record.id == rid]
        others = sorted(p for p in paths if p != canonical)
        if others:
            raise InvalidInputError(f"{rid} is at {others[0]}, not at {canonical} where "
                                    "memidex writes it", hint="move the file there first")

    def _write(self, records: Sequence[tuple[Record, str | None]], *, command: str) -> int:
        """Write records as one journaled change set under the writer lease (fenced).

        Waits up to ``self.wait`` seconds for another writer; while ``memidex daemon``
        holds the lease, hands the change set to it through ``queue/corrections/`` and
        waits as long for its marker (:func:`memidex.write.route.apply_changes`). Returns how
        many files changed. ``expected`` is the content hash read before (None: must not
        exist), so a person's edit made meanwhile is never clobbered (ConflictError).
        """
        from memidex.write.writer import Write

        done = self._apply([Write(r, expected) for r, expected in records],
                           f"knowledge {command}")
        return sum(1 for changed in done if changed)

    def _apply(self, changes: Sequence[Change], command: str, *,
               refuse_daemon: bool = False,
               after: Callable[[WriterSession], None] | None = None) -> list[bool]:
        """One change set through :func:`memidex.write.route.apply_changes`; the next read
        sees it."""
        from memidex.write.route import apply_changes

        try:
            return apply_changes(self.store, changes, command=command, wait=self.wait,
                                 ttl=self.config.lease_ttl_seconds,
                                 refuse_daemon=refuse_daemon, after=after)
        finally:
            self._checked_at = None

    # --- health --------------------------------------------------------------------

    def doctor(self) -> dict[str, Any]:
        from memidex.index.build import remove_stale_builds
        from memidex.index.schema import SCHEMA_VERSION
        from memidex.records.yamlfast import yaml_loader

        notes: list[str] = []
        with contextlib.suppress(OSError):
            removed = remove_stale_builds(self.config.index_path)
            if removed:
                notes.append(f"removed {len(removed)} build file(s) a killed rebuild left: "
                             + ", ".join(removed))
        db = self.index()
        index: dict[str, Any] = {"path": self.store.rel(self.config.index_path),
                                 "exists": self.config.index_path.exists(),
                                 "expected_schema_version": SCHEMA_VERSION}
        errors: list[dict[str, Any]] = []
        record_count = 0
        healthy = True
        mismatch: list[str] = []
        if db is not None:
            try:
                mismatch = db.compare()
            except IndexUnavailableError as exc:
                mismatch = [exc.message]
            index["matches_files"] = not mismatch
            if mismatch:
                index["mismatch"] = mismatch
                self._damaged(IndexUnavailableError(
                    "the index does not match the files (" + "; ".join(mismatch) + ")"))
                notes.append("the index does not match the record files; run "
                             "`memidex knowledge rebuild-index`")
                db = None
        if db is not None:
            from memidex.index.query import duplicate_ids, problems

            meta = db.meta()
            counts = db.counts()
            shape = db.introspect()
            quick = db.quick_check()
            rep = self.last_refresh
            index.update({
                "ok": quick == "ok", "quick_check": quick,
                "schema_version": int(meta.get("schema_version", "0")),
                "tokenizer": meta.get("tokenizer"), "fingerprint": meta.get("fingerprint"),
                "records": counts["records"], "policies": counts["policies"],
                "migrations": shape["migrations"], "tables": shape["tables"],
                "staleness": {
                    "method": rep.method if rep else "stat",
                    "how": _STALENESS_HOW[rep.method if rep else "stat"],
                    "added": len(rep.added) if rep else 0,
                    "changed": len(rep.changed) if rep else 0,
                    "deleted": len(rep.deleted) if rep else 0,
                },
            })
            healthy = quick == "ok" and not shape["missing"]
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
        lease = self.lease_status()
        from memidex.write.inbox import inbox_report, live_daemon

        lease["inbox"], waiting = inbox_report(self.store.queue_dir,
                                               daemon_live=live_daemon(self.store) is not None)
        if waiting is not None:
            lease.setdefault("notes", []).append(waiting)
        notes += lease.get("notes", [])
        from memidex.store.gitsetup import merge_driver_status

        merge = merge_driver_status(self.config.root)
        if not merge["ok"]:  # every fresh clone: a note, not a failure (docs/review.md)
            notes.append(f"{merge['problem']}; run `{merge['fix']}` to set it up")
        return {
            "healthy": healthy,
            "level": level,
            "recent_runs": self._recent_runs(),
            "levels": {name: ("in use" if name == level else _UNAVAILABLE_LEVELS.get(
                name, "available" if name == "bundle-scan" else "index unavailable"))
                for name in LEVELS},
            "index": index,
            "records": {"count": record_count, "errors": errors},
            "lease": lease,
            "merge_driver": merge,
            "notes": notes,
            "yaml": {"loader": loader, "c_loader": loader == "CSafeLoader",
                     "note": "" if loader == "CSafeLoader" else
                     "PyYAML has no C loader here: hand-written records parse 8x slower"},
            "config": self.config.to_json(),
        }

    def _recent_runs(self, count: int = 5) -> list[dict[str, Any]]:
        """The last runs ingested (of the default product, else every product) and the
        search level their briefs had (``[]``: no brief was recorded for that run)."""
        from memidex.runstate.served import levels_by_ordinal
        from memidex.runstate.store import RunStore

        try:
            results = RunStore(self.config).results(self.config.product or None)[-count:]
            out = []
            levels: dict[str, dict[int, list[str]]] = {}
            for r in results:
                if r.product not in levels:
                    levels[r.product] = levels_by_ordinal(self.config, r.product)
                out.append({"run_id": r.run_id, "product": r.product, "ordinal": r.ordinal,
                            "levels": levels[r.product].get(r.ordinal, [])})
            return out
        except (OSError, UsageError):
            return []

    def lease_status(self) -> dict[str, Any]:
        from memidex.write.status import lease_status

        return lease_status(self.config.knowledge_path)

    # --- curation: human curation commands (docs/curation.md) ----------------------
    # Each takes a record id or a unique prefix of one, applies a pure transition
    # (memidex.records.transitions), writes through the fenced writer (or hands the
    # change to a running daemon) and returns a CurationResult.

    def _load_for_write(self, id_or_prefix: str) -> tuple[Record, str, str]:
        """The record an id (or unique prefix) names, its path and content hash."""
        from memidex.records.codec import content_hash, parse_record_bytes

        shown = self._show(id_or_prefix)
        r = shown.record
        self.store.check_write_folders(r.kind)  # before the lease creates anything
        canonical = self.store.rel(self.store.record_path(r.kind, r.id))
        if canonical != shown.path and canonical not in shown.duplicates:
            raise InvalidInputError(f"{r.id} is at {shown.path}, not at {canonical} where "
                                    "memidex writes it", hint="move the file there first")
        # The record and the hash the writer checks come from the same bytes.
        if shown.path == canonical:
            return r, canonical, content_hash(shown.text.encode("utf-8"))
        data = self.store.read_bytes(canonical)
        return parse_record_bytes(data, canonical), canonical, content_hash(data)

    def _transition(self, id_or_prefix: str, op: Callable[[Record], Record], command: str,
                    change: str) -> CurationResult:
        from memidex.errors import ConflictError
        from memidex.write.writer import Write

        # A read-modify-write: it lands on the bytes it read, or is computed again from a
        # fresh read when another writer changed the file meanwhile (a concurrent confirm,
        # say), a bounded number of times; then the conflict is reported (exit 3).
        deadline = time.monotonic() + max(self.wait, 0.0)
        for attempt in range(1, _RMW_ATTEMPTS + 1):
            r, path, sha = self._load_for_write(id_or_prefix)
            new = op(r)
            try:
                done = self._apply([Write(new, sha)], f"knowledge {command}")
            except ConflictError:
                if attempt == _RMW_ATTEMPTS or (attempt >= 3 and time.monotonic() >= deadline):
                    raise
                self._checked_at = None  # the next read must see the other writer's change
                continue
            return CurationResult(new.id, path, new.status,
                                  change if any(done) else "unchanged")
        raise AssertionError("unreachable")

    def confirm(self, id_or_prefix: str, *, run_ordinal: int | None = None) -> CurationResult:
        from memidex.records.transitions import confirm

        return self._transition(id_or_prefix, lambda r: confirm(r, run_ordinal), "confirm",
                                "confirmed")

    def deprecate(self, id_or_prefix: str, *, ordinal: int | None = None) -> CurationResult:
        from memidex.records.transitions import deprecate

        return self._transition(id_or_prefix, lambda r: deprecate(r, ordinal), "deprecate",
                                "deprecated")

    def quarantine(self, id_or_prefix: str) -> CurationResult:
        from memidex.records.transitions import quarantine

        return self._transition(id_or_prefix, quarantine, "quarantine", "quarantined")

    def release(self, id_or_prefix: str) -> CurationResult:
        from memidex.records.transitions import release

        return self._transition(id_or_prefix, release, "release", "released")

    def supersede(self, id_or_prefix: str, *, title: str | None = None,
                  body: str | None = None, ordinal: int | None = None,
                  by: str | None = None) -> CurationResult:
        """A new version of the record (``title``) or its replacement by another (``by``)."""
        from memidex.records.transitions import supersede_by, supersede_in_place
        from memidex.write.writer import Write

        if (title is None) == (by is None):
            raise UsageError("give --title (a new version of this record) or --by OTHER_ID "
                             "(replaced by another record), not both")
        r, path, sha = self._load_for_write(id_or_prefix)
        if by is not None:
            if body is not None:
                raise UsageError("--body goes with --title, not with --by")
            other, other_path, other_sha = self._load_for_write(by)
            old, new = supersede_by(r, other, ordinal)
            done = self._apply([Write(old, sha), Write(new, other_sha)], "knowledge supersede")
            return CurationResult(old.id, path, old.status,
                                  "superseded" if any(done) else "unchanged",
                                  (("superseded_by", new.id), ("superseded_by_path", other_path)))
        assert title is not None
        masker = self._masker()
        clean_title = masker.mask(" ".join(title.split()))
        clean_body = _clean_body(masker.mask(body or ""))
        new = self._masked(supersede_in_place(r, title=clean_title, body=clean_body,
                                              ordinal=ordinal), masker)
        done = self._apply([Write(new, sha)], "knowledge supersede")
        return CurationResult(new.id, path, new.status,
                              "superseded" if any(done) else "unchanged",
                              (("valid_from", new.valid.from_),))

    def purge(self, id_or_prefix: str) -> CurationResult:
        """Delete the record file through the fenced writer and every trace of it: its
        queue items and journal entries (inside the same lease). Refuses at once while a
        daemon holds the lease."""
        from memidex.write.route import purge_traces, refuse_under_daemon
        from memidex.write.writer import Remove

        refuse_under_daemon(self.store, "knowledge purge")  # before reading anything
        r, path, sha = self._load_for_write(id_or_prefix)
        traces: list[str] = []

        def clean(_session: WriterSession) -> None:
            traces.extend(purge_traces(self.store, r.id))

        changes: list[Change] = [Remove(path, sha), *self._unreference(r.id)]
        done = self._apply(changes, "knowledge purge", refuse_daemon=True, after=clean)
        self.index()  # the refresh drops the file's rows (a missing index: the next build)
        return CurationResult(r.id, path, "purged", "purged" if any(done) else "unchanged",
                              (("removed", traces),))

    def _unreference(self, rid: str) -> list[Change]:
        """Writes that take ``rid`` out of every other record's relations (purge leaves no
        dangling reference), each checked against the bytes it was read from."""
        from memidex.records.model import Relations
        from memidex.write.writer import Write

        out: list[Change] = []
        for lr in list(self._loaded()):
            rel = lr.record.relations
            if lr.record.id == rid or rid not in (*rel.supersedes, rel.superseded_by,
                                                  *rel.cites, *rel.contradicts):
                continue
            canonical = self.store.rel(self.store.record_path(lr.record.kind, lr.record.id))
            if lr.relpath != canonical:
                raise InvalidInputError(
                    f"{lr.record.id} names {rid} but is at {lr.relpath}, not at {canonical} "
                    "where memidex writes it", hint="move the file there first")
            cleaned = Relations(
                supersedes=tuple(x for x in rel.supersedes if x != rid),
                superseded_by=None if rel.superseded_by == rid else rel.superseded_by,
                cites=tuple(x for x in rel.cites if x != rid),
                contradicts=tuple(x for x in rel.contradicts if x != rid))
            out.append(Write(replace(lr.record, relations=cleaned), lr.sha256))
        return out

    def daemon(self, *, once: bool = False, stop: threading.Event | None = None,
               log: Callable[[str], None] | None = None) -> DaemonReport:
        """Run ``memidex daemon`` on this repository (:func:`memidex.write.daemon.run_daemon`)."""
        from memidex.write.daemon import run_daemon

        return run_daemon(self.store, wait=self.wait, ttl=self.config.lease_ttl_seconds,
                          once=once, stop=stop, log=log)

    # --- serving (issue 12, docs/brief.md) -------------------------------------------

    def brief(self, test_id: str, *, product: str | None = None,
              anchors: Sequence[str] = (), at: int | None = None,
              budget: int | None = None, limit: int | None = None,
              explain: bool = False, record: bool = True) -> Any:
        """The brief for ``test_id`` (:class:`memidex.serve.brief.Brief`): the policies
        that apply, then learned records ranked by trust × anchor overlap, at run ``at``
        (default: the product's next ordinal). ``record``: append the ids served to
        ``<state_dir>/served/<product>.jsonl`` (:func:`memidex.runstate.served.served_at`)."""
        from memidex.serve.brief import BriefRequest, build_brief

        chosen = self._product(product, False)
        assert chosen is not None  # one product, never all of them
        req = BriefRequest(test_id, chosen, tuple(anchors), at, budget, limit, explain)
        db = self.index()
        if db is not None:
            try:
                return build_brief(self.config, self.store, db, req, masker=self._masker(),
                                   index_note=self.index_note, record=record)
            except IndexUnavailableError as exc:
                self._damaged(exc)
        return build_brief(self.config, self.store, None, req, masker=self._masker(),
                           index_note=self.index_note, record=record,
                           floor=self.ordinal_floor(chosen))

    # --- review (issue 13, docs/review.md) -------------------------------------------

    def review(self, base: str | None = None, head: str | None = None) -> Any:
        """What ``head`` (default: the working tree) changes in knowledge since ``base``
        (default: the merge base with the default branch): a
        :class:`memidex.review.changes.ReviewReport`, secrets scanned."""
        from memidex.review.changes import review
        from memidex.review.secrets import allow_list

        masker = self._masker()
        return review(self.config.root, self.store.records_rel, base, head,
                      secrets=masker.secrets, allow=allow_list(self.config))


_MAX_LIMIT = 2**63 - 1  # memidex.records.model.MAX_ORDINAL (not imported on a search)


def _near(near: Sequence[str]) -> tuple[str, ...]:
    """``search --near`` anchors: type:value, or a prefix of one ending in ``*``."""
    from memidex.records.ids import ANCHOR_RE

    for a in near:
        if not (ANCHOR_RE.fullmatch(a.removesuffix("*")) or
                (a.endswith("*") and ":" in a and ANCHOR_RE.fullmatch(a[:-1] + "x"))):
            raise UsageError(f"malformed --near anchor {a[:80]!r}",
                             hint="an anchor is type:value (a trailing * matches a "
                             "prefix), e.g. page:/checkout")
    return tuple(sorted(set(near)))


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= _MAX_LIMIT:
        raise UsageError(f"--limit must be a whole number from 1 to {_MAX_LIMIT}")


def _clean_body(text: str) -> str:
    """A body as stored: surrounding blank lines and trailing spaces dropped. A NUL byte
    is refused (the index and snippets cannot keep it; never dropped silently)."""
    if "\x00" in text:
        raise InvalidInputError("the body holds a NUL byte (\\0)",
                                hint="remove it: a record is text")
    return text.strip("\n").rstrip()


def _line_of_path(store: Store, path: str, key: str) -> int:
    from memidex.records.codec import split_front_matter
    from memidex.records.validate import key_line

    try:
        front, _, first = split_front_matter(store.read_bytes(path).decode("utf-8"), path)
    except (OSError, UnicodeDecodeError, RecordError):
        return 1
    return key_line(front, key, first)


def _secret_problems(store: Store, config: Config) -> list[Problem]:
    """The secret scan of ``knowledge check`` (issue 13; detect-secrets loads only here)."""
    from memidex.review.secrets import secret_problems

    return secret_problems(store, config)
