"""The health service: ``doctor`` (the search level, the index, staleness, record errors,
the lease, the merge driver, the configuration) and ``knowledge check`` (every record
and policy validated from the files themselves)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from memidex.config import Config
from memidex.errors import IndexUnavailableError, Problem, RecordError, UsageError
from memidex.store.files import LoadedRecord, Store

if TYPE_CHECKING:
    from memidex.app.reading import Reading
    from memidex.app.results import CheckReport, DoctorReport, HealthStatus
    from memidex.vectors import LevelReport

__all__ = ["LEVELS", "Health"]

LEVELS = ("memidex", "lexical-only", "static-floor", "bundle-scan")
_STALENESS_HOW = {
    "git": "git diff-files, staged and HEAD diffs, untracked files name suspects; "
           "stat, then sha256",
    "stat": "stat every file (size, mtime, inode); sha256 of those that differ",
    "watch": "a warm server's inotify watcher names the files changed since the last "
             "look; sha256 of each",
}


class Health:
    """``doctor`` and ``check`` of one repository."""

    def __init__(self, config: Config, store: Store, reading: Reading) -> None:
        self.config = config
        self.store = store
        self.reading = reading

    def check(self) -> CheckReport:
        """Validate every record and policy from the files themselves (not the index),
        and the configuration."""
        from memidex.app.results import CheckReport

        problems: list[Problem] = list(self.config.problems)
        files, scan_problems = self.store.scan_records()
        problems.extend(scan_problems)
        by_id: dict[str, list[str]] = {}
        loaded: list[LoadedRecord] = []
        for item in self.store.iter_records(files):
            if isinstance(item, Problem):
                problems.append(item)
                continue
            loaded.append(item)
            by_id.setdefault(item.record.id, []).append(item.relpath)
        records_rel = self.store.rel(self.store.records_dir)
        for lr in loaded:
            r = lr.record
            expected = f"{records_rel}/{r.relpath.removeprefix('records/')}"
            if lr.relpath != expected:
                problems.append(Problem(
                    lr.relpath, 1, f"a {r.kind} record with id {r.id} belongs at {expected}"))
            for rel, target in r.relations.edges():
                if target not in by_id:
                    problems.append(Problem(
                        lr.relpath, _line_of_path(self.store, lr.relpath, "relations"),
                        f"relations.{rel} names {target}, which is not a record here"))
        for rid, paths in sorted(by_id.items()):
            for path in paths[1:]:
                problems.append(Problem(path, _line_of_path(self.store, path, "id"),
                                        f"duplicate id {rid} (also in {paths[0]})"))
        policy_files, policy_problems = self.store.load_policies()
        problems.extend(policy_problems)
        seen: dict[str, str] = {}
        policies = 0
        for _fs, _sha, items in policy_files:
            for p in items:
                policies += 1
                if p.id in seen:
                    problems.append(Problem(p.path, p.line, f"duplicate policy id {p.id} "
                                                            f"(also in {seen[p.id]})"))
                seen.setdefault(p.id, p.path)
        from memidex.review.secrets import secret_problems  # detect-secrets loads only here

        problems.extend(secret_problems(self.store, self.config))
        problems.sort(key=lambda p: (p.path, p.line, p.reason))
        return CheckReport(len(loaded), policies, tuple(problems))

    def doctor(self, *, deep: bool = False) -> DoctorReport:
        """``deep``: also run SQLite's ``PRAGMA quick_check`` over the whole index (it
        reads every page: ~1 s at 100,000 records); without it, only when something
        looks wrong (a table missing)."""
        from memidex.app.results import DoctorReport
        from memidex.index.leftovers import remove_stale_builds
        from memidex.index.schema import SCHEMA_VERSION

        reading = self.reading
        notes: list[str] = []
        with contextlib.suppress(OSError):
            removed = remove_stale_builds(self.config.index_path)
            if removed:
                notes.append(f"removed {len(removed)} build file(s) a killed rebuild left: "
                             + ", ".join(removed))
        db = reading.open()
        index: dict[str, Any] = {"path": self.store.rel(self.config.index_path),
                                 "exists": self.config.index_path.exists(),
                                 "expected_schema_version": SCHEMA_VERSION}
        errors: list[Problem] = list(self.config.problems)
        record_count = 0
        if db is not None:
            try:
                mismatch = db.compare()
            except IndexUnavailableError as exc:
                mismatch = [exc.message]
            index["matches_files"] = not mismatch
            if mismatch:
                index["mismatch"] = mismatch
                reading.damaged(IndexUnavailableError(
                    "the index does not match the files (" + "; ".join(mismatch) + ")"))
                notes.append("the index does not match the record files; run "
                             "`memidex knowledge rebuild-index`")
                db = None
        healthy = True
        if db is not None:
            try:
                healthy, record_count = self._index_health(db, index, errors, deep)
            except IndexUnavailableError as exc:
                reading.damaged(exc)
                db = None
        if db is None:
            healthy = False
            index.update({"ok": False, "reason": reading.note})
            for item in self.store.iter_records():
                if isinstance(item, Problem):
                    errors.append(item)
                else:
                    record_count += 1
            _, pproblems = self.store.load_policies()
            errors += pproblems
        from memidex.runstate.store import RunStore

        with contextlib.suppress(OSError, UsageError):  # local state that cannot be read
            errors += RunStore(self.config).damaged()
        if errors:
            healthy = False
        search = self.reading.semantic.levels(db, None if db is not None else (
            reading.note or "the index cannot be opened"))
        lease = self.lease_report()
        notes += lease.get("notes", [])
        if self.config.problems:
            notes.append(f"{len(self.config.problems)} problem(s) in "
                         f"{self.config.config_file}: each key named is left at its "
                         "default until it is fixed")
        from memidex.store.gitsetup import merge_driver_status

        merge = merge_driver_status(self.config.root)
        if not merge["ok"]:  # every fresh clone: a note, not a failure (docs/review.md)
            notes.append(f"{merge['problem']}; run `{merge['fix']}` to set it up")
        return DoctorReport(
            healthy=healthy, level=search.level, levels=_levels(search),
            vector_strategy=search.vector_strategy, index=index,
            record_count=record_count, errors=tuple(errors), lease=lease,
            merge_driver=merge, notes=tuple(notes), yaml_loader=_yaml_loader_name(),
            config=self.config.to_json(), recent_runs=tuple(self._recent_runs()))

    def _index_health(self, db: Any, index: dict[str, Any], errors: list[Problem],
                      deep: bool) -> tuple[bool, int]:
        from memidex.index.query import duplicate_ids, problems

        meta = db.meta()
        counts = db.counts()
        shape = db.introspect()
        quick = db.quick_check() if deep or shape["missing"] else "skipped"
        rep = self.reading.last_refresh
        index.update({
            "ok": quick in ("ok", "skipped"), "quick_check": quick,
            "schema_version": int(meta.get("schema_version", "0")),
            "tokenizer": meta.get("tokenizer"), "fingerprint": meta.get("fingerprint"),
            "records": counts["records"], "policies": counts["policies"],
            "migrations": shape["migrations"], "tables": shape["tables"],
            "staleness": _staleness(rep),
        })
        errors += [Problem(p, ln, r) for p, ln, r in problems(db)]
        for rid, paths in duplicate_ids(db):
            for p in paths[1:]:
                errors.append(Problem(p, 2, f"duplicate id {rid} (also in {paths[0]})"))
        return quick in ("ok", "skipped") and not shape["missing"], int(counts["records"])

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

    def lease_report(self) -> dict[str, Any]:
        """The lease as ``doctor`` reports it, with the daemon's inbox."""
        from memidex.write.inbox import inbox_report, live_daemon

        lease = self.lease_status()
        lease["inbox"], waiting = inbox_report(self.store.queue_dir,
                                               daemon_live=live_daemon(self.store) is not None)
        if waiting is not None:
            lease.setdefault("notes", []).append(waiting)
        return lease

    def status(self) -> HealthStatus:
        """The search level and why, the index as opened and the lease — what ``doctor``
        reports at no O(N) cost (no ``quick_check``, no comparison with the files), for a
        page that is loaded again and again (the dashboard's overview)."""
        from memidex.app.results import HealthStatus
        from memidex.index.schema import SCHEMA_VERSION

        db = self.reading.open()
        index: dict[str, Any] = {"path": self.store.rel(self.config.index_path),
                                 "exists": self.config.index_path.exists(),
                                 "expected_schema_version": SCHEMA_VERSION}
        if db is not None:
            try:
                meta, counts = db.meta(), db.counts()
                index.update({"schema_version": int(meta.get("schema_version", "0")),
                              "records": counts["records"], "policies": counts["policies"],
                              "problems": counts["problems"],
                              "staleness": _staleness(self.reading.last_refresh)})
            except IndexUnavailableError as exc:
                self.reading.damaged(exc)
                db = None
        if db is None:
            index["reason"] = self.reading.note
        search = self.reading.semantic.levels(db, None if db is not None else (
            self.reading.note or "the index cannot be opened"), load=False)
        return HealthStatus(search.level, _levels(search), self.reading.note, index,
                            self.lease_report())

    def levels(self) -> LevelReport:
        """Each search level and why it is or is not available, the models loaded."""
        db = self.reading.open()
        return self.reading.semantic.levels(db, None if db is not None else (
            self.reading.note or "the index cannot be opened"))


def _levels(report: LevelReport) -> dict[str, str]:
    """Each search level: ``in use``, ``available``, or why not (SPEC §4)."""
    out = {}
    for name in LEVELS:
        s = report.status(name)
        out[name] = ("in use" if name == report.level else "available" if s.available
                     else s.reason or "unavailable")
    return out


def _staleness(rep: Any) -> dict[str, Any]:
    """How the last refresh found changed files, and what it found."""
    method = rep.method if rep else "stat"
    return {"method": method, "how": _STALENESS_HOW[method],
            "added": len(rep.added) if rep else 0,
            "changed": len(rep.changed) if rep else 0,
            "deleted": len(rep.deleted) if rep else 0}


def _line_of_path(store: Store, path: str, key: str) -> int:
    from memidex.records.codec import split_front_matter
    from memidex.records.validate import key_line

    try:
        front, _, first = split_front_matter(store.read_bytes(path).decode("utf-8"), path)
    except (OSError, UnicodeDecodeError, RecordError):
        return 1
    return key_line(front, key, first)


def _yaml_loader_name() -> str:
    """The name of :func:`memidex.records.yamlfast.yaml_loader`'s class, without importing
    PyYAML (~15 ms) when nothing has yet: ``CSafeLoader`` when its C extension
    (``yaml/_yaml`` with an extension suffix) is beside it, the case in which PyYAML
    defines that loader."""
    import sys

    if "yaml" in sys.modules:
        from memidex.records.yamlfast import yaml_loader

        return str(yaml_loader().__name__)
    import importlib.machinery
    import importlib.util
    import os

    spec = importlib.util.find_spec("yaml")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        if any(os.path.exists(os.path.join(folder, "_yaml" + suffix))
               for suffix in importlib.machinery.EXTENSION_SUFFIXES):
            return "CSafeLoader"
    return "SafeLoader"
