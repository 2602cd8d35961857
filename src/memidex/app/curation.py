"""The curation service: records a person writes or curates (docs/curation.md).

``knowledge add`` writes a human-authored record; ``confirm``, ``supersede``,
``deprecate``, ``quarantine``, ``release`` apply a pure transition
(:mod:`memidex.records.transitions`) as a read-modify-write — it lands on the bytes it
read, or is computed again from a fresh read when another writer changed the file
meanwhile, a bounded number of times; then the conflict is reported (exit 3). ``purge``
deletes a record and every trace of it. Every write goes through the one write route
(:class:`memidex.write.route.WriteRoute`: the lease here, or the daemon) and the index is
brought up to date after it, the lease released.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from memidex.config import Config
from memidex.errors import ConflictError, InvalidInputError, RecordError, UsageError
from memidex.records.vocab import KINDS
from memidex.store.files import Store

if TYPE_CHECKING:
    from memidex.app.reading import Reading
    from memidex.app.results import AddResult, CurationResult
    from memidex.masking import Masker
    from memidex.records.model import Record
    from memidex.write.route import WriteRoute
    from memidex.write.writer import Change, WriterSession

__all__ = ["PURGE", "Curation", "clean_body"]

RMW_ATTEMPTS = 20
"""How often a curation command re-reads and recomputes a record another writer changed
between its read and its write, before it reports the conflict (exit 3)."""
PURGE = "purge"
"""The purge job (a maintenance command: refused at once under a daemon)."""


def clean_body(text: str) -> str:
    """A body as stored: surrounding blank lines and trailing spaces dropped. A NUL byte
    is refused (the index and snippets cannot keep it; never dropped silently)."""
    if "\x00" in text:
        raise InvalidInputError("the body holds a NUL byte (\\0)",
                                hint="remove it: a record is text")
    return text.strip("\n").rstrip()


class Curation:
    """Writing records by hand, through the write route."""

    def __init__(self, config: Config, store: Store, reading: Reading, route: WriteRoute,
                 masker: Callable[[], Masker], wait: Callable[[], float]) -> None:
        self.config = config
        self.store = store
        self.reading = reading
        self.route = route
        self.masker = masker
        self.wait = wait

    # --- the write boundary --------------------------------------------------------

    def masked(self, record: Record, masker: Masker | None = None) -> Record:
        """The write boundary for a record built from input: every string it stores
        masked (:meth:`memidex.masking.Masker.mask_record`); its subject must already be
        (the id is computed from the masked subject)."""
        masked = (masker or self.masker()).mask_record(record)
        if masked.id != record.id:
            raise InvalidInputError(f"{record.id} holds a secret or a home path in its "
                                    "anchor or scope", hint="edit the record by hand")
        return masked

    def apply(self, changes: Sequence[Change], command: str, *,
              run_id: str | None = None, ordinal: int | None = None) -> list[bool]:
        """One change set through the write route; the next read sees it."""
        try:
            return self.route.apply(changes, command=command, wait=self.wait(),
                                    run_id=run_id, ordinal=ordinal)
        finally:
            self.reading.after_write()

    # --- add -----------------------------------------------------------------------

    def add(self, *, kind: str, product: str | None, anchors: Sequence[str], title: str,
            body: str = "", scope: Mapping[str, str] | None = None) -> AddResult:
        """Write a human-authored record (``trust.source: human``, status ``active``).

        A new record's window begins at the product's current run ordinal. The same
        kind/anchor/product/scope again updates that record
        (:func:`memidex.records.transitions.update`): new title and body, anchors merged,
        its trust counts, evidence, window and history kept — and only when the status
        table allows it. Every string is masked (secrets, home paths) before the id is
        computed; a secret in the product name is refused (exit 4)."""
        from memidex.app.results import AddResult
        from memidex.records.ids import ANCHOR_RE, PRODUCT_RE, record_id

        product = self.reading.one_product(product)
        if kind not in KINDS:
            raise UsageError(f"unknown kind {kind!r}: use {', '.join(KINDS)}")
        if not anchors:
            raise UsageError("give at least one --anchor (the first is the main anchor)")
        masker = self.masker()
        if masker.holds_secret(product):
            raise InvalidInputError("the product name holds a value from the secrets file",
                                    hint="a product is an identifier: use another name")
        if not PRODUCT_RE.fullmatch(product):
            raise InvalidInputError(f"product {product!r} must be letters, digits, . _ -")
        anchors = [masker.mask(a) for a in anchors]
        for a in anchors:
            if not ANCHOR_RE.fullmatch(a) or "\n" in a:
                raise InvalidInputError(f"anchor {a[:80]!r} must look like type:value, "
                                        "e.g. el:button:place-order")
        title = masker.mask(" ".join(title.split()))
        if not title:
            raise UsageError("--title must not be empty")
        body = clean_body(masker.mask(body))
        clean_scope = dict(sorted((masker.mask(k), masker.mask(v))
                                  for k, v in (scope or {}).items()))
        rid = record_id(kind, anchors[0], product, clean_scope)
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
            floor = self.reading.ordinal_floor(product)
            record = Record(id=rid, kind=kind, status="active", product=product,
                            anchor=anchors[0], title=title, scope=tuple(clean_scope.items()),
                            anchors=extra, trust=Trust(source="human"), body=body,
                            valid=Valid(current_ordinal(self.config, product, floor)))
        else:
            from memidex.records.transitions import update

            record = update(old, title=title, body=body, anchors=extra)
        record = self.masked(record, masker)
        from memidex.write.writer import Write

        changed = any(self.apply([Write(record, existing_hash)], "knowledge add"))
        self.reading.settle()
        change = "unchanged" if not changed else ("added" if old is None else "updated")
        return AddResult(rid, rel, record.status, change)

    def _refuse_elsewhere(self, rid: str, canonical: str) -> None:
        """Refuse when a record with id ``rid`` exists at a path other than ``canonical``
        (writing would make a second file with the same id)."""
        def query(db: Any) -> list[str]:
            from memidex.index.query import find_ids

            return [row.path for row in find_ids(db, rid) if row.id == rid]

        paths, _level = self.reading.with_fallback(
            query, lambda: [lr.relpath for lr in self.reading.loaded() if lr.record.id == rid])
        others = sorted(p for p in paths if p != canonical)
        if others:
            raise InvalidInputError(f"{rid} is at {others[0]}, not at {canonical} where "
                                    "memidex writes it", hint="move the file there first")

    # --- transitions ---------------------------------------------------------------

    def load_for_write(self, id_or_prefix: str) -> tuple[Record, str, str]:
        """The record an id (or unique prefix) names, its path and content hash."""
        from memidex.records.codec import content_hash, parse_record_bytes

        shown = self.reading.find(id_or_prefix)
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

    def transition(self, id_or_prefix: str, op: Callable[[Record], Record], command: str,
                   change: str) -> CurationResult:
        from memidex.app.results import CurationResult
        from memidex.write.writer import Write

        deadline = time.monotonic() + max(self.wait(), 0.0)
        for attempt in range(1, RMW_ATTEMPTS + 1):
            r, path, sha = self.load_for_write(id_or_prefix)
            new = op(r)
            try:
                done = self.apply([Write(new, sha)], f"knowledge {command}")
            except ConflictError:
                if attempt == RMW_ATTEMPTS or (attempt >= 3 and time.monotonic() >= deadline):
                    raise
                continue  # the next read sees the other writer's change
            self.reading.settle()
            return CurationResult(new.id, path, new.status,
                                  change if any(done) else "unchanged")
        raise AssertionError("unreachable")

    def confirm(self, id_or_prefix: str, *, run_ordinal: int | None = None) -> CurationResult:
        from memidex.records.transitions import confirm

        return self.transition(id_or_prefix, lambda r: confirm(r, run_ordinal), "confirm",
                               "confirmed")

    def deprecate(self, id_or_prefix: str, *, ordinal: int | None = None) -> CurationResult:
        from memidex.records.transitions import deprecate

        return self.transition(id_or_prefix, lambda r: deprecate(r, ordinal), "deprecate",
                               "deprecated")

    def quarantine(self, id_or_prefix: str) -> CurationResult:
        from memidex.records.transitions import quarantine

        return self.transition(id_or_prefix, quarantine, "quarantine", "quarantined")

    def release(self, id_or_prefix: str) -> CurationResult:
        from memidex.records.transitions import release

        return self.transition(id_or_prefix, release, "release", "released")

    def supersede(self, id_or_prefix: str, *, title: str | None = None,
                  body: str | None = None, ordinal: int | None = None,
                  by: str | None = None) -> CurationResult:
        """A new version of the record (``title``) or its replacement by another (``by``)."""
        from memidex.app.results import CurationResult
        from memidex.records.transitions import supersede_by, supersede_in_place
        from memidex.write.writer import Write

        if (title is None) == (by is None):
            raise UsageError("give --title (a new version of this record) or --by OTHER_ID "
                             "(replaced by another record), not both")
        r, path, sha = self.load_for_write(id_or_prefix)
        if by is not None:
            if body is not None:
                raise UsageError("--body goes with --title, not with --by")
            other, other_path, other_sha = self.load_for_write(by)
            old, new = supersede_by(r, other, ordinal)
            done = self.apply([Write(old, sha), Write(new, other_sha)], "knowledge supersede")
            self.reading.settle()
            return CurationResult(old.id, path, old.status,
                                  "superseded" if any(done) else "unchanged",
                                  (("superseded_by", new.id), ("superseded_by_path", other_path)))
        assert title is not None
        masker = self.masker()
        clean_title = masker.mask(" ".join(title.split()))
        new = self.masked(supersede_in_place(r, title=clean_title,
                                             body=clean_body(masker.mask(body or "")),
                                             ordinal=ordinal), masker)
        done = self.apply([Write(new, sha)], "knowledge supersede")
        self.reading.settle()
        return CurationResult(new.id, path, new.status,
                              "superseded" if any(done) else "unchanged",
                              (("valid_from", new.valid.from_),))

    # --- purge ---------------------------------------------------------------------

    def purge(self, id_or_prefix: str) -> CurationResult:
        """Delete the record file through the fenced writer and every trace of it: its
        queue items and journal entries, and its id in every other record's relations
        (inside the same lease). Refuses at once while a daemon holds the lease."""
        from memidex.app.results import CurationResult
        from memidex.write.route import Job, refuse_under_daemon

        refuse_under_daemon(self.store, "knowledge purge")  # before reading anything
        r, path, sha = self.load_for_write(id_or_prefix)
        local = {"id": r.id, "path": path, "sha": sha,
                 "unreference": self._unreference(r.id)}
        try:
            out = self.route.run(Job(PURGE, "knowledge purge", dict, local=local,
                                     local_only=True), wait=self.wait()).result
        finally:
            self.reading.after_write()
        self.reading.open()  # the refresh drops the file's rows (a missing index: the next build)
        return CurationResult(r.id, path, "purged", "purged" if out["changed"] else "unchanged",
                              (("removed", out["removed"]),))

    def purge_job(self, session: WriterSession, job: Mapping[str, Any]) -> dict[str, Any]:
        """The purge under the lease: the file, the relations naming it, its traces."""
        from memidex.write.route import purge_traces
        from memidex.write.writer import Remove

        changes: list[Change] = [Remove(job["path"], job["sha"]), *job["unreference"]]
        done = session.apply(changes, command="knowledge purge")
        return {"changed": any(done), "removed": purge_traces(self.store, job["id"])}

    def _unreference(self, rid: str) -> list[Change]:
        """Writes that take ``rid`` out of every other record's relations (purge leaves no
        dangling reference), each checked against the bytes it was read from."""
        from memidex.records.model import Relations
        from memidex.write.writer import Write

        out: list[Change] = []
        for lr in list(self.reading.loaded()):
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
