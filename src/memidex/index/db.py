"""Opening the derived index safely: migrations, meta, health.

The index lives at ``index/memidex.sqlite`` in rollback-journal mode. A rebuild writes a
new file and renames it over the old one while holding an exclusive lock on the old
file, so no write is in flight on the old inode at the swap. Every writer checks, once it
holds the write lock and before it writes a page, that the path still names the file it
opened (:meth:`IndexDB.begin_write`), so no journal is ever created beside a file that
is not its own.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from memidex.errors import (
    IndexDamagedError,
    IndexLockedError,
    IndexUnavailableError,
    sqlite_fault,
)
from memidex.index.schema import MIGRATIONS, MIGRATIONS_TABLE, SCHEMA_VERSION, TABLES, VIEWS
from memidex.plain import Plain

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any, ParamSpec, TypeVar

__all__ = ["IndexDB", "IndexOutdated", "IndexSwapped", "apply_migrations", "create_schema",
           "file_digest", "in_chunks", "sqlite_error", "team_aware", "translated", "translating",
           "write_meta", "xor_hex"]

IN_CHUNK = 500
"""Values bound to one ``IN (...)`` list: under SQLite's limit of 999 parameters before
3.32, and a handful of statements for thousands."""


def in_chunks(items: Sequence[Any], size: int = IN_CHUNK
              ) -> Iterator[tuple[Sequence[Any], str]]:
    """``items`` in runs of at most ``size``, each with its ``?,?,...`` marks."""
    for start in range(0, len(items), size):
        chunk = items[start:start + size]
        yield chunk, ",".join("?" * len(chunk))

BUSY_TIMEOUT_MS = 3000


class IndexSwapped(Exception):
    """The file this connection opened was replaced by a rebuild; reopen and retry."""


class IndexOutdated(IndexUnavailableError):
    """The index was built by an earlier memidex: its migrations are a strict prefix of
    this one's. ``pending`` names the ones it lacks; the facade brings it up to date
    (:func:`memidex.index.build.upgrade`) instead of falling back to a scan."""

    def __init__(self, message: str, pending: list[str]) -> None:
        super().__init__(message)
        self.pending = pending


SQLITE_ERRORS = (sqlite3.Error, UnicodeDecodeError)
"""What a query on a damaged index raises: SQLite's errors — and a UnicodeDecodeError,
when the error message SQLite builds quotes a name from damaged schema pages."""


def sqlite_error(exc: sqlite3.Error | UnicodeDecodeError,
                 folder: Path | None = None) -> IndexUnavailableError:
    """The memidex error for a SQLite error on the index, by its result code
    (:func:`memidex.errors.sqlite_fault`): the disk full, locked (or read-only), vs damaged
    (corrupt, not a database, a table gone, text that is not text)."""
    if isinstance(exc, UnicodeDecodeError):
        return IndexDamagedError("the index is damaged (its schema holds bytes that are not "
                                 "text); run `memidex knowledge rebuild-index`")
    fault = sqlite_fault(exc, folder)
    if fault == "full":
        return IndexLockedError(f"the index cannot be updated: no space left on the device "
                                f"({exc})", hint="free some space; the records are intact")
    if fault in ("busy", "readonly", "cantopen", "io"):
        return IndexLockedError(f"the index is locked or read-only ({exc})")
    return IndexDamagedError(f"the index is damaged ({exc}); run `memidex knowledge "
                             "rebuild-index`")


@contextmanager
def translated() -> Iterator[None]:
    """Raise SQLite's errors inside the block as :class:`IndexUnavailableError` errors, so no
    caller above ``index/`` handles ``sqlite3`` itself."""
    try:
        yield
    except SQLITE_ERRORS as exc:
        raise sqlite_error(exc) from None


if TYPE_CHECKING:
    P = ParamSpec("P")
    T = TypeVar("T")


def translating(fn: Callable[P, T]) -> Callable[P, T]:
    """:func:`translated` as a decorator, for the index's query functions."""
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except SQLITE_ERRORS as exc:
            raise sqlite_error(exc) from None
    return wrapper


def team_aware(fn: Callable[P, T]) -> Callable[P, T]:
    """A query function that a team-index ``Session`` (:mod:`memidex.teamindex.read`)
    answers when it is given for ``db``: the session's method of the same name, with the
    same arguments and row types (docs/team-index.md). So the brief's code runs unchanged
    on either source."""
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        if args and not isinstance(args[0], IndexDB):
            answer: T = getattr(args[0], name)(*args[1:], **kwargs)
            return answer
        return fn(*args, **kwargs)
    return wrapper


def file_digest(path: str, sha256: str) -> int:
    """One file's share of the sources fingerprint (combined by XOR, order-free)."""
    import hashlib  # here: OpenSSL costs a search's start-up ~2 ms

    return int.from_bytes(hashlib.sha256(f"{path}\0{sha256}".encode()).digest()[:16], "big")


def xor_hex(value: int) -> str:
    return f"{value:032x}"


def create_schema(conn: sqlite3.Connection) -> list[str]:
    """Every migration, on a new empty file (a rebuild): nothing to introspect, so plain
    ``sqlite3`` — ``sqlite_utils`` would cost a rebuild ~80 ms and load ``click``
    (``docs/index.md``). Returns the names applied."""
    conn.executescript(MIGRATIONS_TABLE)
    if conn.execute("SELECT count(*) FROM migrations").fetchone()[0]:
        raise ValueError("create_schema is for a new, empty index file")
    for seq, (name, sql) in enumerate(MIGRATIONS, start=1):
        conn.executescript(sql)
        conn.execute("INSERT INTO migrations(seq, name) VALUES (?, ?)", (seq, name))
    return [name for name, _ in MIGRATIONS]


def apply_migrations(conn: sqlite3.Connection) -> list[str]:
    """Apply the named migrations an existing file has not seen, in order; return their
    names.

    Through ``sqlite_utils`` (imported here: ~80 ms, paid only when an index is migrated
    in place, never by a search of an up-to-date index — ``docs/index.md``). Each
    migration and its ``migrations`` row are one transaction, so a file is never left
    with half of one. Call it outside a transaction.
    """
    import sqlite_utils

    db = sqlite_utils.Database(conn, recursive_triggers=False)
    db.executescript(MIGRATIONS_TABLE)
    done = {row["name"] for row in db["migrations"].rows}
    known = {name for name, _ in MIGRATIONS}
    if done - known:
        raise IndexUnavailableError(
            f"the index was built by a newer memidex (migration {sorted(done - known)[0]})"
        )
    applied = []
    for seq, (name, sql) in enumerate(MIGRATIONS, start=1):
        if name in done:
            continue
        quoted = name.replace("'", "''")
        db.executescript(f"BEGIN;\n{sql}\nINSERT INTO migrations(seq, name) "
                         f"VALUES ({seq}, '{quoted}');\nCOMMIT;")
        applied.append(name)
    return applied


class IndexDB(Plain):
    """One open connection to the index file, remembering which inode it opened;
    ``readonly``: opened read-only (a read-only folder or mount), served while up to
    date."""

    __slots__ = ("path", "conn", "ino", "readonly", "_memo")
    _eq_fields = ("path", "conn", "ino", "readonly")
    _repr_hidden = ("_memo",)

    def __init__(self, path: Path, conn: sqlite3.Connection, ino: int,
                 readonly: bool = False) -> None:
        self.path = path
        self.conn = conn
        self.ino = ino
        self.readonly = readonly
        self._memo: dict[str, tuple[tuple[int, int], Any]] = {}

    def memo(self, name: str, compute: Callable[[], T]) -> T:
        """``compute()`` (a question about the whole index), kept while the index is
        unchanged — no connection committed since: SQLite's ``data_version`` for the
        others, ``total_changes`` for this one. A long-lived process (a warm server) then
        asks doctor's whole-index questions once per change, not once per command. The
        answer is copied, so a caller cannot change the kept one."""
        import copy

        key = (int(self.conn.execute("PRAGMA data_version").fetchone()[0]),
               self.conn.total_changes)
        hit = self._memo.get(name)
        if hit is None or hit[0] != key:
            hit = self._memo[name] = (key, compute())
        return copy.deepcopy(hit[1])

    @classmethod
    def open(cls, path: Path, *, write: bool = False) -> IndexDB:
        """Open an existing index; :class:`IndexUnavailableError` if missing or damaged."""
        for _ in range(3):
            try:
                st = os.stat(path)
            except FileNotFoundError:
                raise IndexUnavailableError(f"no index at {path}") from None
            if not stat.S_ISREG(st.st_mode):
                what = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
                raise IndexUnavailableError(
                    f"{path} is {what}, not an index file",
                    hint="`memidex knowledge rebuild-index` moves it aside and builds the "
                    "index there")
            before = st.st_ino
            mode = "rw" if write else "ro"
            try:
                conn = sqlite3.connect(
                    f"file:{path}?mode={mode}", uri=True, timeout=BUSY_TIMEOUT_MS / 1000,
                    isolation_level=None, check_same_thread=False,
                )
            except sqlite3.Error as exc:
                raise IndexUnavailableError(f"cannot open the index: {exc}") from None
            try:
                conn.execute("PRAGMA schema_version").fetchone()
            except SQLITE_ERRORS as exc:
                conn.close()
                raise IndexUnavailableError(f"the index is damaged or locked: {exc}") from None
            try:
                after = os.stat(path).st_ino
            except FileNotFoundError:
                conn.close()
                raise IndexUnavailableError(f"no index at {path}") from None
            if before == after:
                if write:
                    # Derived data: a power cut may lose the last refresh (the next command
                    # redoes it) but never leaves a half-applied one; fewer fsyncs.
                    try:  # the first statement that reads the schema pages
                        conn.execute("PRAGMA synchronous=NORMAL")
                    except SQLITE_ERRORS as exc:
                        conn.close()
                        raise sqlite_error(exc) from None
                db = cls(path, conn, after, readonly=not write)
                db._check_schema()
                return db
            conn.close()
        raise IndexUnavailableError("the index kept being replaced while opening it")

    def _check_schema(self) -> None:
        try:
            names = [n for (n,) in self.conn.execute("SELECT name FROM migrations ORDER BY seq")]
            version = self.meta().get("schema_version")
        except SQLITE_ERRORS as exc:
            self.close()
            raise IndexUnavailableError(f"the index is damaged: {exc}") from None
        except IndexUnavailableError:
            self.close()
            raise
        known = [name for name, _ in MIGRATIONS]
        if names != known or version != str(SCHEMA_VERSION):
            self.close()
            if len(names) < len(known) and names == known[:len(names)] and version == str(
                    len(names)):
                raise IndexOutdated(
                    f"the index has schema {version} ({len(names)} migrations); this "
                    f"memidex needs schema {SCHEMA_VERSION}", known[len(names):])
            raise IndexUnavailableError(
                f"the index has schema {version or '?'} ({len(names)} migrations); "
                f"this memidex needs schema {SCHEMA_VERSION}"
            )

    def close(self) -> None:
        self.conn.close()

    def swapped(self) -> bool:
        try:
            return os.stat(self.path).st_ino != self.ino
        except FileNotFoundError:
            return True

    @contextmanager
    def begin_write(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` on the file this connection opened, or :class:`IndexSwapped`."""
        self.conn.execute("BEGIN IMMEDIATE")
        if self.swapped():
            self.conn.execute("ROLLBACK")  # nothing written yet, so no journal was made
            raise IndexSwapped(str(self.path))
        try:
            yield self.conn
            self.conn.execute("COMMIT")
        except BaseException:
            # SQLite may have rolled back already (a full disk): keep the first error.
            if self.conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
            raise

    def sanity(self) -> None:
        """A cheap damage check for every reading command (a few µs, whatever the size):
        the core tables exist, and ``records`` is not empty while ``files`` names record
        files. Raises :class:`IndexDamagedError`, so a search answers from the records
        instead of silently returning nothing. Finer damage (some rows lost) is
        :meth:`compare`'s, which doctor runs."""
        try:
            row = self.conn.execute(
                "SELECT (SELECT count(*) FROM sqlite_master WHERE name IN"
                " ('records', 'records_fts', 'files', 'anchors')),"
                " CASE WHEN EXISTS (SELECT 1 FROM records) THEN 0"
                " ELSE EXISTS (SELECT 1 FROM files WHERE record_rowid IS NOT NULL) END"
            ).fetchone()
        except SQLITE_ERRORS as exc:
            raise sqlite_error(exc) from None
        if row[0] != 4:
            raise IndexDamagedError("the index is damaged (a table is missing); run "
                                    "`memidex knowledge rebuild-index`")
        if row[1]:
            raise IndexDamagedError("the index is damaged (its records table is empty "
                                    "while record files are indexed); run `memidex "
                                    "knowledge rebuild-index`")

    @translating
    def compare(self) -> list[str]:
        """Doctor's comparison of the index with the files it was built from, right after
        a refresh brought the ``files`` rows up to date with the disk (so the files on
        disk need no second scan — 0.7 s at 100,000 records): the ``records`` and
        ``records_fts`` rows against the files that produced them. Returns what differs
        (empty: they agree). Counts only, each one SQL statement: recomputing the sources
        fingerprint in Python costs ~0.3 s at 100,000 files and the refresh has just
        compared every file's stat and hash with its row."""
        return self.memo("compare", self._compare)

    def _compare(self) -> list[str]:
        c = self.conn
        out: list[str] = []
        linked = int(c.execute("SELECT count(*) FROM files WHERE record_rowid IS NOT NULL"
                               ).fetchone()[0])
        records = int(c.execute("SELECT count(*) FROM records").fetchone()[0])
        if linked != records:
            out.append(f"{records} rows in records for {linked} indexed record files")
        try:
            docs = int(c.execute("SELECT count(*) FROM records_fts_docsize").fetchone()[0])
        except sqlite3.OperationalError:
            out.append("the full-text table records_fts is missing")
        else:
            if docs != records:
                out.append(f"{docs} rows in records_fts for {records} records")
        return out

    @translating
    def meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta").fetchall())

    def quick_check(self) -> str:
        try:
            rows = self.conn.execute("PRAGMA quick_check").fetchall()
        except SQLITE_ERRORS as exc:
            return str(exc)
        return "; ".join(str(r[0]) for r in rows[:3])

    @translating
    def counts(self) -> dict[str, int]:
        return self.memo("counts", self._counts)

    def _counts(self) -> dict[str, int]:
        c = self.conn
        return {
            "records": int(c.execute("SELECT count(*) FROM records").fetchone()[0]),
            "policies": int(c.execute("SELECT count(*) FROM policies").fetchone()[0]),
            "files": int(c.execute("SELECT count(*) FROM files").fetchone()[0]),
            "problems": int(c.execute("SELECT count(*) FROM problems").fetchone()[0]),
        }

    def introspect(self) -> dict[str, Any]:
        """What ``doctor`` prints about the file: the migrations applied and each table's
        (or view's) row count. Plain SQL: ``sqlite_utils``' introspection gave the same
        and cost every one-shot ``doctor`` ~80 ms of imports."""
        c = self.conn
        try:
            present = {row[0] for row in c.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
            counts: dict[str, int | None] = {}
            for name in TABLES:
                if name not in present:
                    continue
                # Counting a view, or the fts5vocab table, walks every row behind it
                # (85 ms each at 100,000 records) and says nothing new: left out. FTS5's
                # own count(*) walks its index; its docsize table has one row a document.
                if name in ("records_vocab", "records_vocab_i") or name in VIEWS:
                    counts[name] = None
                else:
                    table = "records_fts_docsize" if name == "records_fts" else name
                    counts[name] = int(c.execute(f'SELECT count(*) FROM "{table}"'
                                                 ).fetchone()[0])
            migrations = [row[0] for row in c.execute(
                "SELECT name FROM migrations ORDER BY seq")] if "migrations" in present else []
        except SQLITE_ERRORS as exc:
            raise sqlite_error(exc) from None
        return {"migrations": migrations, "tables": counts,
                "missing": [t for t in TABLES if t not in present]}

    def dump(self) -> dict[str, Any]:
        """The logical contents (no rowids, no build time) — what rebuilds must agree on."""
        c = self.conn
        meta = {k: v for k, v in self.meta().items() if k not in (
            "built_at", "snapshot", "vectors_generation", "secrets")}  # (looks, salted)
        return {
            "meta": meta,
            # mtime and inode are a cache for the staleness check, not content: a file
            # rewritten with the same bytes may keep its old stat here (git says so).
            "files": c.execute("SELECT path, kind, size, sha256,"
                               " record_rowid IS NOT NULL FROM files ORDER BY path").fetchall(),
            "records": c.execute(
                "SELECT id, path, kind, status, product, anchor, title, body, anchors, scope,"
                " source, confirmations, contradictions, last_confirmed, valid_from,"
                " valid_until, history FROM records ORDER BY path").fetchall(),
            "anchors": c.execute(
                "SELECT a.anchor, r.path, a.main FROM anchors a JOIN records r"
                " ON r.rowid = a.record_rowid ORDER BY 1, 2").fetchall(),
            "edges": c.execute(
                "SELECT r.path, e.src, e.rel, e.dst FROM edges e JOIN records r"
                " ON r.rowid = e.record_rowid ORDER BY 1, 2, 3, 4").fetchall(),
            "policies": c.execute("SELECT * FROM policies ORDER BY path, id").fetchall(),
            "problems": c.execute("SELECT * FROM problems ORDER BY 1, 2, 3").fetchall(),
            "versions": c.execute(
                "SELECT r.path, v.version, v.id, v.product, v.kind, v.status, v.valid_from,"
                " v.valid_until, v.title, v.body, v.anchors, v.source, v.confirmations,"
                " v.contradictions, v.last_confirmed, v.current FROM versions v"
                " JOIN records r ON r.rowid = v.record_rowid ORDER BY 1, 2").fetchall(),
            "orphan_versions": c.execute(
                "SELECT count(*) FROM history_versions WHERE record_rowid NOT IN"
                " (SELECT rowid FROM records)").fetchone()[0],
            "runs": c.execute("SELECT * FROM runs ORDER BY run_id").fetchall(),
            "run_tests": c.execute(
                "SELECT * FROM run_tests ORDER BY run_id, test_id").fetchall(),
            "vocab": c.execute(
                "SELECT term, doc, cnt FROM records_vocab ORDER BY term").fetchall(),
        }


def write_meta(conn: sqlite3.Connection, values: dict[str, str]) -> None:
    """Set these keys of the ``meta`` table (in the caller's transaction)."""
    conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                     sorted(values.items()))
