"""Reading the team index: :class:`TeamIndex` holds one connection to one branch's
index; :meth:`TeamIndex.session` opens a :class:`~memidex.teamindex.session.Session` (one
read-only snapshot), and its one-call methods return an :class:`Answer`: the value and the
snapshot (its commit) it came from.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memidex.errors import IndexUnavailableError, UsageError
from memidex.index.query import IndexRow, VersionRow
from memidex.records.model import Policy
from memidex.search.ranking import (
    SearchHit,
    SearchQuery,
)
from memidex.teamindex import schema as S
from memidex.teamindex.connect import DEFAULT_TIMEOUT, connect, redact, translating

if TYPE_CHECKING:
    import psycopg

from memidex.teamindex.session import Answer, Session, Snapshot

__all__ = ["Answer", "Session", "Snapshot", "TeamIndex"]


class TeamIndex:
    """A connection to one branch's team index (one per thread; see the module doc)."""

    def __init__(self, url: str, branch: str | None, timeout: float) -> None:
        self.url = url
        self.branch = branch
        self.timeout = timeout
        self._conn: psycopg.Connection[Any] | None = None

    @classmethod
    def connect(cls, url: str, *, branch: str | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> TeamIndex:
        """Connect now (a bad URL, refused credentials or an unreachable server raise a
        :class:`MemidexError` here); ``branch`` None: the one branch pushed."""
        ti = cls(url, branch, timeout)
        ti._ensure()
        return ti

    def _ensure(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            if self._conn is not None:
                self._conn.close()
            self._conn = connect(self.url, timeout=self.timeout, autocommit=True)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> TeamIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One ``REPEATABLE READ READ ONLY`` transaction on the branch's snapshot."""
        import psycopg
        from psycopg import errors as pe

        conn = self._ensure()
        with translating(self.url):
            try:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                snap = self._snapshot(conn)
            except (pe.UndefinedTable, pe.InvalidSchemaName):
                conn.execute("ROLLBACK")
                raise IndexUnavailableError(
                    f"the team index at {redact(self.url)} holds nothing yet",
                    hint="run `memidex index push` (in CI, after merging)") from None
            except BaseException:
                if not conn.closed and not conn.broken:
                    conn.execute("ROLLBACK")
                raise
        try:
            yield Session(conn, snap, self.url)
        finally:
            if not conn.closed and not conn.broken:
                try:
                    conn.execute("COMMIT")
                except psycopg.Error:
                    pass

    def _snapshot(self, conn: psycopg.Connection[Any]) -> Snapshot:
        version = conn.execute(f"SELECT value FROM {S.SCHEMA}.meta WHERE key = "
                               "'schema_version'").fetchone()
        if version is None or str(version[0]) != str(S.SCHEMA_VERSION):
            raise IndexUnavailableError(
                f"the team index at {redact(self.url)} has schema "
                f"{version[0] if version else '?'}; this memidex reads schema "
                f"{S.SCHEMA_VERSION}", hint="push again with this memidex")
        cols = ("commit, branch, schema_version, records, pushed_at::text, gen, max_rowid,"
                " tokens")
        if self.branch is None:
            rows = conn.execute(f"SELECT {cols} FROM {S.SCHEMA}.snapshots ORDER BY branch"
                                ).fetchall()
            if len(rows) > 1:
                raise UsageError(
                    f"the team index at {redact(self.url)} holds several branches ("
                    f"{', '.join(str(r[1]) for r in rows)}): say which one to read",
                    hint="set [index] branch (or pass branch=...)")
        else:
            rows = conn.execute(f"SELECT {cols} FROM {S.SCHEMA}.snapshots WHERE branch = %s",
                                (self.branch,)).fetchall()
        if not rows:
            what = "nothing yet" if self.branch is None else f"no snapshot of {self.branch}"
            raise IndexUnavailableError(f"the team index at {redact(self.url)} holds {what}",
                                        hint="run `memidex index push` on that branch")
        r = rows[0]
        return Snapshot(str(r[0]), str(r[1]), int(r[2]), int(r[3]), str(r[4]), int(r[5]),
                        int(r[6]), int(r[7]))

    def _answer(self, fn: Any, *args: Any, **kwargs: Any) -> Answer[Any]:
        with self.session() as s:
            return Answer(fn(s, *args, **kwargs), s.snapshot)

    def snapshot(self) -> Snapshot:
        with self.session() as s:
            return s.snapshot

    def search(self, q: SearchQuery) -> Answer[list[SearchHit]]:
        return self._answer(Session.search, q)

    def find_ids(self, id_or_prefix: str) -> Answer[list[IndexRow]]:
        return self._answer(Session.find_ids, id_or_prefix)

    def list_records(self, *, product: str | None, kinds: tuple[str, ...] = (),
                     statuses: tuple[str, ...] = (), anchors: tuple[str, ...] = (),
                     limit: int | None = None) -> Answer[list[IndexRow]]:
        return self._answer(Session.list_records, product=product, kinds=kinds,
                            statuses=statuses, anchors=anchors, limit=limit)

    def brief_candidates(self, anchors: Sequence[str], *, ordinal: int, cap: int = 5000
                         ) -> Answer[tuple[list[VersionRow], bool]]:
        return self._answer(Session.brief_candidates, anchors, ordinal=ordinal, cap=cap)

    def test_anchors(self, product: str, test_id: str) -> Answer[tuple[str, ...]]:
        return self._answer(Session.test_anchors, product, test_id)

    def policies(self, product: str | None = None) -> Answer[list[Policy]]:
        return self._answer(Session.policies, product)
