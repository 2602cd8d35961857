"""The change ledger: what every landed change set did, long after the journal forgot it.

Layout under the knowledge folder's ``queue/ledger/`` (ignored by git, local state):

* ``ledger.jsonl`` — append-only, one fsynced JSON line per change set that landed: its
  id, command, run id, ordinal, epoch and, per op, the path, the record id, ``write`` or
  ``remove`` and the content hashes before and after (``null``: no file); a rollback's
  change set names the runs it undid (``rollback_of``). The first line
  of a new file is a ``start`` line: history before it is in git, not here.
* ``blobs/<2 hex>/<64 hex>`` — content-addressed bytes: every record's bytes before and
  after each change, saved (fsynced) *before* the change set is journaled, so the bytes a
  change replaced can be restored byte for byte even when the process died mid-install.

An entry is appended after the change set's fence transaction committed and before the
journal forgets it; a replay after a crash appends it only when no line has its id yet,
so each landed change set has exactly one entry. A change set abandoned on replay (a
person's edit met half-way) gets an ``abandoned`` entry naming only the files it did
change, never a ``landed`` one.

A damaged line (a torn append, garbage) is skipped and counted; the next append starts on
a fresh line. A deleted ledger starts again with a new ``start`` line: writes never wait
for it. A ledger that cannot be appended to (disk full) fails the command *after* its
records landed: the change set stays in the journal and the next writer's recovery
appends the entry, so the ledger is never silently short of a landed change.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from memidex.plain import Frozen, Plain, set_field
from memidex.records.digest import HASH_TAG, content_hash, verify_hash
from memidex.store import fsio

__all__ = ["Entry", "Ledger", "LedgerOp", "LedgerStats"]


VERSION = 1
_PACK_MAGIC = b"memidex-blob-pack 1\n"


class LedgerOp(Frozen):
    """What one change did to one record file."""

    path: str  # relative to the repository root
    record_id: str
    op: str  # write | remove
    before: str | None  # content hash before (None: there was no file)
    after: str | None  # content hash after (None: the file was removed)

    __slots__ = ("path", "record_id", "op", "before", "after")

    def __init__(self, path: str, record_id: str, op: str, before: str | None,
                 after: str | None) -> None:
        set_field(self, "path", path)
        set_field(self, "record_id", record_id)
        set_field(self, "op", op)
        set_field(self, "before", before)
        set_field(self, "after", after)

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "record": self.record_id, "op": self.op,
                "before": self.before, "after": self.after}


class Entry(Frozen):
    """One change set in the ledger."""

    id: str  # the journal's change-set id
    command: str
    run_id: str | None
    ordinal: int | None
    epoch: int
    outcome: str  # landed | abandoned
    ops: tuple[LedgerOp, ...]
    at: float  # wall-clock seconds (local state: never in a record)
    seq: int  # position in the ledger file (0-based, lines that parsed)
    rollback_of: tuple[str, ...]  # a rollback's change set: the runs it undid

    __slots__ = ("id", "command", "run_id", "ordinal", "epoch", "outcome", "ops", "at",
                 "seq", "rollback_of")

    def __init__(self, id: str, command: str, run_id: str | None, ordinal: int | None,
                 epoch: int, outcome: str, ops: tuple[LedgerOp, ...], at: float = 0.0,
                 seq: int = 0, rollback_of: tuple[str, ...] = ()) -> None:
        set_field(self, "id", id)
        set_field(self, "command", command)
        set_field(self, "run_id", run_id)
        set_field(self, "ordinal", ordinal)
        set_field(self, "epoch", epoch)
        set_field(self, "outcome", outcome)
        set_field(self, "ops", ops)
        set_field(self, "at", at)
        set_field(self, "seq", seq)
        set_field(self, "rollback_of", rollback_of)

    @property
    def landed(self) -> bool:
        return self.outcome == "landed"

    @property
    def is_rollback(self) -> bool:
        """A rollback's change set (named by ``rollback_of``; before that field existed,
        by its command)."""
        return bool(self.rollback_of) or self.command == "knowledge rollback"

    def as_dict(self) -> dict[str, Any]:
        return {"v": VERSION, "type": "change", "id": self.id, "command": self.command,
                "run_id": self.run_id, "ordinal": self.ordinal, "epoch": self.epoch,
                "outcome": self.outcome, "at": self.at,
                **({"rollback_of": list(self.rollback_of)} if self.rollback_of else {}),
                "ops": [op.as_dict() for op in self.ops]}


class LedgerStats(Plain):
    __slots__ = ("entries", "starts", "damaged_lines", "duplicates")
    entries: int
    starts: int  # how often the ledger (re)started: > 1 means it was lost meanwhile
    damaged_lines: int
    duplicates: int

    def __init__(self, entries: int = 0, starts: int = 0, damaged_lines: int = 0,
                 duplicates: int = 0) -> None:
        self.entries = entries
        self.starts = starts
        self.damaged_lines = damaged_lines
        self.duplicates = duplicates


def _entry(data: Any, seq: int) -> Entry:
    """Raises KeyError/TypeError/ValueError on anything malformed."""
    ops = tuple(LedgerOp(str(o["path"]), str(o["record"]), str(o["op"]),
                         _opt_hash(o["before"]), _opt_hash(o["after"])) for o in data["ops"])
    if any(op.op not in ("write", "remove") for op in ops):
        raise ValueError("unknown op")
    outcome = str(data["outcome"])
    if outcome not in ("landed", "abandoned"):
        raise ValueError("unknown outcome")
    ordinal = data.get("ordinal")
    run_id = data.get("run_id")
    return Entry(id=str(data["id"]), command=str(data.get("command", "")),
                 run_id=None if run_id is None else str(run_id),
                 ordinal=None if ordinal is None else int(ordinal),
                 epoch=int(data["epoch"]), outcome=outcome, ops=ops,
                 at=float(data.get("at", 0.0)), seq=seq,
                 rollback_of=tuple(str(r) for r in data.get("rollback_of") or ()))


def _opt_hash(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith(HASH_TAG):
        raise ValueError("not a content hash")
    return value


def record_id_of(path: str) -> str:
    """``records/<kind>/<id>.md`` → ``<id>``."""
    name = path.rsplit("/", 1)[-1]
    return name[:-3] if name.endswith(".md") else name


class Ledger(Plain):
    """The ``queue/ledger`` folder of one knowledge folder."""
    __slots__ = ("queue_dir", "dir", "file", "blobs_dir")

    queue_dir: Path
    dir: Path
    file: Path
    blobs_dir: Path

    def __init__(self, queue_dir: Path) -> None:
        self.queue_dir = queue_dir
        self.__post_init__()

    def __post_init__(self) -> None:
        self.dir = self.queue_dir / "ledger"
        self.file = self.dir / "ledger.jsonl"
        self.blobs_dir = self.dir / "blobs"

    # --- blobs: the bytes before and after ---

    def blob_path(self, sha: str) -> Path:
        hexdigest = sha.removeprefix(HASH_TAG)
        if len(hexdigest) != 64 or not all(c in "0123456789abcdef" for c in hexdigest):
            raise ValueError(f"{sha!r} is not a content hash")
        return self.blobs_dir / hexdigest[:2] / hexdigest

    def save_blobs(self, contents: Iterable[bytes],
                   hashes: Iterable[str] | None = None) -> list[str]:
        """Save each content durably; their content hashes (``hashes``: the caller's, one
        per content, when it has them). A change set's new contents go into ONE pack file
        (``blobs/pack-<digest>.pack``: one file created and fsynced, however many records
        the change set writes); a content already saved loose (``blobs/<2 hex>/<hex>``,
        as earlier versions wrote) is not saved again."""
        out: list[str] = []
        fresh: dict[str, bytes] = {}
        try:  # the loose blobs' folders: none in a ledger this version began
            loose = {n for n in os.listdir(self.blobs_dir) if len(n) == 2}
        except (FileNotFoundError, NotADirectoryError):
            loose = set()
        given = iter(hashes) if hashes is not None else None
        for data in contents:
            sha = next(given) if given is not None else content_hash(data)
            out.append(sha)
            if sha not in fresh and not (sha[len(HASH_TAG):len(HASH_TAG) + 2] in loose
                                         and self.blob_path(sha).exists()):
                fresh[sha] = data
        if fresh:
            body = b"".join(f"{sha} {len(data)}\n".encode() + data + b"\n"
                            for sha, data in sorted(fresh.items()))
            pack = _PACK_MAGIC + body
            name = f"pack-{hashlib.sha256(pack).hexdigest()[:20]}.pack"
            target = self.blobs_dir / name
            if not target.exists():
                self.blobs_dir.mkdir(parents=True, exist_ok=True)
                fsio.atomic_write(target, pack, temp_dir=self.dir)
        return out

    def _packs(self) -> list[Path]:
        try:
            return sorted(self.blobs_dir.glob("pack-*.pack"), reverse=True)
        except OSError:
            return []

    @staticmethod
    def _read_pack(path: Path) -> Iterator[tuple[str, bytes]]:
        """(content hash, bytes) of each blob in a pack; stops at the first damage."""
        try:
            raw = path.read_bytes()
        except OSError:
            return
        if not raw.startswith(_PACK_MAGIC):
            return
        pos = len(_PACK_MAGIC)
        while pos < len(raw):
            end = raw.find(b"\n", pos)
            if end < 0:
                return
            try:
                sha, size_text = raw[pos:end].decode("ascii").split(" ")
                size = int(size_text)
            except ValueError:
                return
            data = raw[end + 1:end + 1 + size]
            if len(data) != size:
                return
            yield sha, data
            pos = end + 1 + size + 1

    def blob(self, sha: str) -> bytes | None:
        """The saved bytes with content hash ``sha``, or None (missing or damaged)."""
        try:
            data = self.blob_path(sha).read_bytes()
        except (OSError, ValueError):
            data = None
        if data is not None and verify_hash(data, sha):
            return data
        for pack in self._packs():
            for found, data in self._read_pack(pack):
                if found == sha and verify_hash(data, sha):
                    return data
        return None

    def all_blobs(self) -> list[bytes]:
        """Every saved content (loose and packed), sorted: for tests and audits."""
        out = [p.read_bytes() for p in self.blobs_dir.glob("??/*") if p.is_file()]
        for pack in self._packs():
            out.extend(data for _sha, data in self._read_pack(pack))
        return sorted(out)

    def _forget_blobs(self, hashes: set[str]) -> int:
        removed = 0
        for sha in sorted(hashes):
            with contextlib.suppress(OSError, ValueError):
                self.blob_path(sha).unlink()
                removed += 1
        for pack in self._packs():
            items = list(self._read_pack(pack))
            keep = [(sha, data) for sha, data in items if sha not in hashes]
            if len(keep) == len(items):
                continue
            removed += len(items) - len(keep)
            if not keep:
                pack.unlink(missing_ok=True)
                continue
            body = b"".join(f"{sha} {len(data)}\n".encode() + data + b"\n"
                            for sha, data in keep)
            fsio.atomic_write(pack, _PACK_MAGIC + body, temp_dir=self.dir)
        return removed

    # --- entries ---

    def append(self, entry: Entry) -> None:
        """Append ``entry`` durably (fsynced) on a line of its own."""
        self.dir.mkdir(parents=True, exist_ok=True)
        line = fsio.dump_json(entry.as_dict())
        try:
            size = self.file.stat().st_size
        except FileNotFoundError:
            size = 0
        if size == 0:  # a new (or lost) ledger: say where its history starts
            start = {"v": VERSION, "type": "start", "at": round(time.time(), 3),
                     "epoch": entry.epoch}
            line = fsio.dump_json(start) + line
        elif not self._ends_with_newline(size):
            line = b"\n" + line  # a torn last line stays torn, alone on its line
        fsio.append_durable(self.file, line)

    def _ends_with_newline(self, size: int) -> bool:
        try:
            with open(self.file, "rb") as f:
                f.seek(size - 1)
                return f.read(1) == b"\n"
        except OSError:
            return False

    def _lines(self) -> Iterator[bytes]:
        try:
            with open(self.file, "rb") as f:
                yield from f
        except FileNotFoundError:
            return

    def scan(self) -> tuple[list[Entry], LedgerStats]:
        """Every entry in order (the first line with an id wins) and what was skipped."""
        stats = LedgerStats()
        seen: set[str] = set()
        out: list[Entry] = []
        for raw in self._lines():
            if not raw.strip():
                continue
            try:
                data = fsio.load_json(raw)
                if data.get("type") == "start":
                    stats.starts += 1
                    continue
                entry = _entry(data, len(out))
            except (ValueError, KeyError, TypeError, AttributeError):
                stats.damaged_lines += 1
                continue
            if entry.id in seen:
                stats.duplicates += 1
                continue
            seen.add(entry.id)
            out.append(entry)
        stats.entries = len(out)
        return out, stats

    def entries(self) -> list[Entry]:
        return self.scan()[0]

    def has(self, cs_id: str) -> bool:
        """Whether change set ``cs_id`` has an entry (a replay must not add a second)."""
        needle = json.dumps(cs_id).encode("utf-8")
        for raw in self._lines():
            if needle in raw:
                with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
                    if _entry(fsio.load_json(raw), 0).id == cs_id:
                        return True
        return False

    def for_record(self, record_id: str) -> list[Entry]:
        """Entries that changed record ``record_id``, oldest first."""
        return [e for e in self.entries() if any(op.record_id == record_id for op in e.ops)]

    def for_run(self, run_id: str) -> list[Entry]:
        """Entries written for run ``run_id``, oldest first."""
        return [e for e in self.entries() if e.run_id == run_id]

    def previous_bytes(self, op: LedgerOp) -> bytes | None:
        """The bytes ``op`` replaced; None when there was no file before it.

        Raises :class:`LookupError` when they were saved but the blob is gone or damaged.
        """
        if op.before is None:
            return None
        data = self.blob(op.before)
        if data is None:
            raise LookupError(f"the previous bytes of {op.path} ({op.before}) are not in "
                              "the ledger")
        return data

    def after_bytes(self, op: LedgerOp) -> bytes | None:
        """The bytes ``op`` left (None: it removed the file); LookupError when lost."""
        if op.after is None:
            return None
        data = self.blob(op.after)
        if data is None:
            raise LookupError(f"the bytes {op.path} got ({op.after}) are not in the ledger")
        return data

    def purge(self, record_id: str) -> int:
        """Forget record ``record_id`` (``knowledge purge``, under the lease): its ops are
        dropped from every entry (an entry left with none is dropped) and its saved bytes
        deleted. The one rewrite of the append-only file (atomic). Returns blobs removed."""
        hashes: set[str] = set()
        keep: list[bytes] = []
        changed = False
        for raw in self._lines():
            try:
                data = fsio.load_json(raw)
                ops = data["ops"] if data.get("type") == "change" else None
            except (ValueError, KeyError, TypeError, AttributeError):
                ops = None
            if isinstance(ops, list):
                mine = [o for o in ops if isinstance(o, dict) and o.get("record") == record_id]
                if mine:
                    changed = True
                    hashes.update(str(o[k]) for o in mine for k in ("before", "after")
                                  if o.get(k))
                    data["ops"] = [o for o in ops if o not in mine]
                    if not data["ops"]:
                        continue
                    raw = fsio.dump_json(data)
            keep.append(raw if raw.endswith(b"\n") else raw + b"\n")
        if changed:
            fsio.atomic_write(self.file, b"".join(keep))
        return self._forget_blobs(hashes)

    def cleanup(self) -> None:
        """Remove temp files a crashed writer left (call while holding the lease)."""
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(self.dir):
                if name.endswith(".tmp"):
                    (self.dir / name).unlink(missing_ok=True)
