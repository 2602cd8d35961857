"""``memidex index push``: bring a branch's team index to the records at its HEAD.

The protocol (docs/team-index.md, "Push"), all of it in **one transaction**, under a
transaction-scoped advisory lock so that two pushes run one after the other:

1. resolve the branch's HEAD commit; create the ``memidex`` schema if the database has
   none (or rebuild it when it was made by an older schema);
2. read the branch's snapshot row (``FOR UPDATE``) and decide:
   * no snapshot: a **full load** into a new generation (``COPY``; on a new schema the
     secondary indexes are built after the load);
   * the same commit: nothing to do (``unchanged``);
   * HEAD descends from the held commit: **incremental** — only the paths
     ``git diff --name-status`` names between the two commits: their rows are deleted
     and the files at HEAD parsed and inserted (new rowids after the highest, as the
     local refresh numbers them); document frequencies adjusted by the same rows;
   * HEAD is an ancestor of the held commit: ``behind`` — nothing is changed (a late CI
     job) unless ``rewind``;
   * otherwise (a force-push, another history, a commit git does not have): **rebuilt** —
     a full load into a new generation, then the old generation's rows deleted;
3. merge the pushing machine's run store (each test's anchors, the products' next run
   ordinals) into the branch's ``test_anchors`` and ``run_ordinals`` (union and maximum:
   no commit holds them, and a machine that ran nothing adds nothing);
4. update the snapshot row (commit, generation, counts) and commit.

A reader's ``REPEATABLE READ`` transaction sees the snapshot row and the rows it names as
of one moment, so it sees the old snapshot or the new one, never a mix; a push that dies
(the client or the server killed) leaves nothing: PostgreSQL rolls it back.

Records are read from git's objects (:mod:`memidex.teamindex.gitread`) and parsed with
memidex's codec (``parse_record_bytes``); a row is a function of one file's bytes, built
by the local index's own projection (``memidex.index.build.record_row``/``history_rows``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memidex._version import __version__
from memidex.errors import Problem, RecordError, StorageError
from memidex.index.maskmark import same_secrets, secrets_mark
from memidex.masking import Masker, secrets_path
from memidex.teamindex import schema as S
from memidex.teamindex.connect import connect, redact, translating
from memidex.teamindex.gitread import BlobReader, GitTree, is_ancestor, resolve
from memidex.teamindex.rows import Rows, iter_rows, parse_span, record_rows, symlink_rows

if TYPE_CHECKING:
    import psycopg

    from memidex.config import Config

__all__ = ["Progress", "PushReport", "push", "record_rows"]

Progress = Callable[[int, int], None]
"""Called with (records done, records to do) while records are loaded."""

LOCK_KEY = 0x6D656D69  # "memi": the advisory lock that serialises pushes


@dataclass(frozen=True)
class PushReport:
    """What one push did. ``action``: ``full``, ``incremental``, ``rebuilt``, ``unchanged``
    or ``behind``."""

    action: str
    branch: str
    commit: str
    previous: str | None
    records: int
    added: int = 0
    changed: int = 0
    deleted: int = 0
    policies: int = 0
    problems: tuple[Problem, ...] = ()
    test_anchors: int = 0
    seconds: float = 0.0
    url: str = ""
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.action, "branch": self.branch, "commit": self.commit,
                "previous": self.previous, "records": self.records, "added": self.added,
                "changed": self.changed, "deleted": self.deleted, "policies": self.policies,
                "problems": [p.as_dict() for p in self.problems],
                "test_anchors": self.test_anchors, "seconds": round(self.seconds, 3),
                "url": self.url, "notes": list(self.notes)}


# --- rows -------------------------------------------------------------------------------


# --- SQL ----------------------------------------------------------------------------------

_RECORD_COLS = ("gen, rowid, id, path, kind, status, product, anchor, title, body, anchors,"
                " scope, source, confirmations, contradictions, last_confirmed, valid_from,"
                " valid_until, history, sha256, ntokens, fts")
_VERSION_COLS = ("gen, rowid, version, id, product, kind, status, valid_from, valid_until,"
                 " title, body, anchors, source, confirmations, contradictions,"
                 " last_confirmed")

def _copy(conn: psycopg.Connection[Any], table: str, cols: str,
          rows: Sequence[tuple[Any, ...]]) -> None:
    if not rows:
        return
    with conn.cursor().copy(f"COPY {S.SCHEMA}.{table} ({cols}) FROM STDIN") as cp:
        for row in rows:
            cp.write_row(row)


def _load_rows(conn: psycopg.Connection[Any], rows: Rows) -> None:
    _copy(conn, "records", _RECORD_COLS, rows.records)
    _copy(conn, "anchors", "gen, anchor, rowid, main", rows.anchors)
    _copy(conn, "edges", "gen, rowid, rel, dst, src", rows.edges)
    _copy(conn, "history_versions", _VERSION_COLS, rows.versions)
    _copy(conn, "problems", "gen, path, line, reason", rows.problems)


def _load_policies(conn: psycopg.Connection[Any], root: Path, tree: GitTree, gen: int
                   ) -> tuple[int, list[tuple[Any, ...]]]:
    """Every policy file of the commit: (policies loaded, problem rows)."""
    from memidex.records.policy import parse_policies

    blobs = tree.policies()
    datas = BlobReader(root).read([b.sha for b in blobs])
    prows: list[tuple[Any, ...]] = []
    problems: list[tuple[Any, ...]] = []
    for blob, data in zip(blobs, datas, strict=True):
        if blob.mode not in ("100644", "100755"):
            problems += symlink_rows(gen, blob).problems
            continue
        try:
            policies = parse_policies(data, blob.path)
        except RecordError as exc:
            problems += [(gen, p.path, p.line, p.reason) for p in exc.problems]
            continue
        # INSERT OR REPLACE locally: the last policy of a file with a repeated id wins
        by_key = {(p.path, p.id): p for p in policies}
        prows += [(gen, p.id, p.path, p.line, p.rule, p.severity, json.dumps(list(p.products)),
                   json.dumps(list(p.anchors))) for p in by_key.values()]
    _copy(conn, "policies", "gen, id, path, line, rule, severity, products, anchors", prows)
    return len(prows), problems


def _term_counts(conn: psycopg.Connection[Any], gen: int, rowids: Sequence[int]
                 ) -> list[tuple[str, int]]:
    if not rowids:
        return []
    return [(str(t), int(n)) for t, n in conn.execute(
        f"SELECT t, count(*) FROM {S.SCHEMA}.records r,"
        " unnest(tsvector_to_array(r.tsv)) t WHERE r.gen = %s AND r.rowid = ANY(%s)"
        " GROUP BY t", (gen, list(rowids)))]


def _apply_terms(conn: psycopg.Connection[Any], gen: int, delta: dict[str, int]) -> None:
    rows = [(gen, t, n) for t, n in sorted(delta.items()) if n]
    if not rows:
        return
    conn.execute(
        f"INSERT INTO {S.SCHEMA}.terms (gen, term, ndocs)"
        " SELECT * FROM unnest(%s::int[], %s::text[], %s::int[])"
        " ON CONFLICT (gen, term) DO UPDATE SET ndocs = terms.ndocs + EXCLUDED.ndocs",
        ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]))
    conn.execute(f"DELETE FROM {S.SCHEMA}.terms WHERE gen = %s AND ndocs <= 0", (gen,))


def _stats(conn: psycopg.Connection[Any], gen: int) -> tuple[int, int, int]:
    row = conn.execute(f"SELECT count(*), coalesce(max(rowid), 0), coalesce(sum(ntokens), 0)"
                       f" FROM {S.SCHEMA}.records WHERE gen = %s", (gen,)).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def _drop_gen(conn: psycopg.Connection[Any], gen: int) -> None:
    for table in S.GEN_TABLES:
        conn.execute(f"DELETE FROM {S.SCHEMA}.{table} WHERE gen = %s", (gen,))


# --- the push ---------------------------------------------------------------------------


def _ensure_schema(conn: psycopg.Connection[Any], notes: list[str]) -> bool:
    """Create the schema when there is none (True: created, so the first load builds the
    secondary indexes after it); rebuild it when an older memidex made it."""
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    if conn.execute("SELECT to_regclass(%s)", (f"{S.SCHEMA}.meta",)).fetchone() == (None,):
        if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                        (S.SCHEMA,)).fetchone() is not None:
            raise StorageError(f"the database already has a schema `{S.SCHEMA}` that memidex "
                               "did not make", hint="use another database for the team index")
        conn.execute(S.CREATE)
        conn.execute(f"INSERT INTO {S.SCHEMA}.meta VALUES ('schema_version', %s)",
                     (str(S.SCHEMA_VERSION),))
        return True
    row = conn.execute(f"SELECT value FROM {S.SCHEMA}.meta WHERE key = 'schema_version'"
                       ).fetchone()
    version = int(row[0]) if row is not None and str(row[0]).isdigit() else 0
    if version > S.SCHEMA_VERSION:
        raise StorageError(f"the team index has schema {version}; this memidex knows schema "
                           f"{S.SCHEMA_VERSION}", hint="push with a newer memidex")
    if version < S.SCHEMA_VERSION:
        notes.append(f"the team index had schema {version}: rebuilt as schema "
                     f"{S.SCHEMA_VERSION} (it is derived: every branch is pushed again)")
        conn.execute(f"DROP SCHEMA {S.SCHEMA} CASCADE")
        return _ensure_schema(conn, notes)
    return False


def _merge_run_store(conn: psycopg.Connection[Any], config: Config, branch: str) -> int:
    """Merge this machine's run store into the branch's; returns the anchors added."""
    from memidex.runstate.ordinals import Counters
    from memidex.runstate.store import runs_dir
    from memidex.runstate.tests import TestsFile

    rows: list[tuple[str, str, str, str]] = []
    folder = runs_dir(config)
    products = sorted(p.name[len("tests-"):-len(".json")] for p in folder.glob("tests-*.json")
                      ) if folder.is_dir() else []
    for product in products:
        for test_id, state in sorted(TestsFile(config, product).load().tests.items()):
            rows += [(branch, product, test_id, a) for a in sorted(state.anchors)]
    added = 0
    if rows:
        cur = conn.execute(
            f"INSERT INTO {S.SCHEMA}.test_anchors SELECT * FROM"
            " unnest(%s::text[], %s::text[], %s::text[], %s::text[]) ON CONFLICT DO NOTHING",
            tuple(list(col) for col in zip(*rows, strict=True)))
        added = max(cur.rowcount, 0)
    ordinals = {p: pc.next for p, pc in Counters.load(config).products.items()}
    if ordinals:
        conn.execute(
            f"INSERT INTO {S.SCHEMA}.run_ordinals SELECT %s, * FROM"
            " unnest(%s::text[], %s::bigint[]) ON CONFLICT (branch, product) DO UPDATE"
            " SET next = greatest(run_ordinals.next, EXCLUDED.next)"
            " WHERE run_ordinals.next < EXCLUDED.next",
            (branch, list(ordinals), list(ordinals.values())))
    return added


def _full_load(conn: psycopg.Connection[Any], root: Path, tree: GitTree, gen: int,
               jobs: int, progress: Progress | None, masker: Masker
               ) -> tuple[int, int, list[Problem]]:
    """Load every record and policy of the commit into generation ``gen``; returns
    (records, policies, problems)."""
    blobs = tree.records()
    total = len(blobs)
    done = 0
    pending = Rows()
    with conn.cursor().copy(f"COPY {S.SCHEMA}.records ({_RECORD_COLS}) FROM STDIN") as cp:
        for rows, files in iter_rows(root, blobs, gen, jobs, masker):
            for row in rows.records:
                cp.write_row(row)
            pending.anchors += rows.anchors
            pending.edges += rows.edges
            pending.versions += rows.versions
            pending.problems += rows.problems
            done += files
            if progress:
                progress(min(done, total), total)
    _load_rows(conn, Rows(anchors=pending.anchors, edges=pending.edges,
                          versions=pending.versions, problems=pending.problems))
    npolicies, pproblems = _load_policies(conn, root, tree, gen)
    _copy(conn, "problems", "gen, path, line, reason", pproblems)
    conn.execute(
        f"INSERT INTO {S.SCHEMA}.terms (gen, term, ndocs) SELECT %s, word, ndoc FROM"
        f" ts_stat(format('SELECT tsv FROM {S.SCHEMA}.records WHERE gen = %%s', %s::int))",
        (gen, gen))
    problems = [Problem(p[1], p[2], p[3]) for p in (*pending.problems, *pproblems)]
    if progress:
        progress(total, total)
    count = conn.execute(f"SELECT count(*) FROM {S.SCHEMA}.records WHERE gen = %s",
                         (gen,)).fetchone()
    return int(count[0]) if count else 0, npolicies, problems


def _incremental(conn: psycopg.Connection[Any], root: Path, tree: GitTree, gen: int,
                 previous: str, masker: Masker
                 ) -> tuple[int, int, int, int | None, list[Problem]]:
    """Apply the changes between ``previous`` and the tree's commit to ``gen``: (added,
    changed, deleted, policies reloaded or None, new problems)."""
    changes = tree.changes_since(previous)
    recs = [c for c in changes if tree.is_record_path(c.path)]
    policy_changed = any(tree.is_policy_path(c.path) for c in changes)
    paths = sorted({c.path for c in recs}, key=lambda p: p.encode("utf-8", "surrogateescape"))
    old = [int(r[0]) for r in conn.execute(
        f"SELECT rowid FROM {S.SCHEMA}.records WHERE gen = %s AND path = ANY(%s)",
        (gen, paths))] if paths else []
    delta: dict[str, int] = {}
    for term, n in _term_counts(conn, gen, old):
        delta[term] = delta.get(term, 0) - n
    if old:
        for table in ("records", "anchors", "edges", "history_versions"):
            conn.execute(f"DELETE FROM {S.SCHEMA}.{table} WHERE gen = %s AND rowid = ANY(%s)",
                         (gen, old))
    if paths:
        conn.execute(f"DELETE FROM {S.SCHEMA}.problems WHERE gen = %s AND path = ANY(%s)",
                     (gen, paths))
    if len(paths) <= 50:
        present = [b for b in map(tree.blob, paths) if b is not None]
    else:  # one ls-tree of the folder beats one per path
        wanted = set(paths)
        present = [b for b in tree.records() if b.path in wanted]
    row = conn.execute(f"SELECT coalesce(max(rowid), 0) + 1 FROM {S.SCHEMA}.records"
                       " WHERE gen = %s", (gen,)).fetchone()
    first = int(row[0]) if row else 1
    rows = parse_span(root, present, gen, first, 0, len(present), True, masker)
    _load_rows(conn, rows)
    for term, n in _term_counts(conn, gen, [r[1] for r in rows.records]):
        delta[term] = delta.get(term, 0) + n
    _apply_terms(conn, gen, delta)
    npolicies: int | None = None
    problems = [Problem(p[1], p[2], p[3]) for p in rows.problems]
    if policy_changed:
        conn.execute(f"DELETE FROM {S.SCHEMA}.policies WHERE gen = %s", (gen,))
        conn.execute(f"DELETE FROM {S.SCHEMA}.problems WHERE gen = %s AND path LIKE %s",
                     (gen, tree.policies_rel.replace("%", r"\%").replace("_", r"\_") + "/%"))
        npolicies, pproblems = _load_policies(conn, root, tree, gen)
        _copy(conn, "problems", "gen, path, line, reason", pproblems)
        problems += [Problem(p[1], p[2], p[3]) for p in pproblems]
    kinds = {c.path: c.status for c in recs}
    added = sum(1 for p in paths if kinds[p] == "A")
    changed = sum(1 for p in paths if kinds[p] == "M")
    deleted = sum(1 for p in paths if kinds[p] == "D")
    return added, changed, deleted, npolicies, problems


def push(root: Path | str, url: str, *, branch: str | None = None,
         progress: Progress | None = None, jobs: int | None = None, rewind: bool = False,
         timeout: float = 10.0) -> PushReport:
    """Bring the team index at ``url`` to the records at ``branch``'s HEAD (default: the
    checked-out branch) of the repository at ``root`` — see the module's protocol.
    Raises a :class:`MemidexError` for a bad URL, refused credentials, a server that
    cannot be reached or went away (nothing of the push is then applied)."""
    from memidex.config import load_config
    from memidex.store.files import Store

    started = time.perf_counter()
    config = load_config(Path(root))
    store = Store(config)
    commit, branch = resolve(config.root, branch)
    tree = GitTree(config.root, commit, store.records_rel, store.policies_rel)
    workers = jobs if jobs is not None else min(2, os.cpu_count() or 1)
    notes: list[str] = []
    conn = connect(url, timeout=timeout, doing="pushing", autocommit=True)
    try:
        with translating(url, "pushing"), conn.transaction():
            conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            created = _ensure_schema(conn, notes)
            snap = conn.execute(
                f"SELECT gen, commit FROM {S.SCHEMA}.snapshots WHERE branch = %s FOR UPDATE",
                (branch,)).fetchone()
            previous = None if snap is None else str(snap[1])
            old_gen = None if snap is None else int(snap[0])
            report = _decide_and_apply(conn, config, tree, branch, old_gen, previous, created,
                                       rewind, workers, progress, notes,
                                       Masker.load(secrets_path(config)))
        return _finish(report, url, started)
    finally:
        conn.close()


def _finish(report: PushReport, url: str, started: float) -> PushReport:
    from dataclasses import replace

    return replace(report, url=redact(url), seconds=time.perf_counter() - started)


def _decide_and_apply(conn: psycopg.Connection[Any], config: Config, tree: GitTree,
                      branch: str, old_gen: int | None, previous: str | None, created: bool,
                      rewind: bool, workers: int, progress: Progress | None,
                      notes: list[str], masker: Masker) -> PushReport:
    root, commit = config.root, tree.commit
    # the records are masked as the local index masks them (the pusher's secrets file):
    # other secrets than the branch was masked with rebuild it, even at the same commit
    got = conn.execute(f"SELECT value FROM {S.SCHEMA}.meta WHERE key = %s",
                       (S.secrets_key(branch),)).fetchone()
    remask = previous is not None and not same_secrets(masker, None if got is None
                                                       else str(got[0]))
    if previous == commit and not remask:
        anchors = _merge_run_store(conn, config, branch)
        count = conn.execute(f"SELECT records FROM {S.SCHEMA}.snapshots WHERE branch = %s",
                             (branch,)).fetchone()
        return PushReport("unchanged", branch, commit, previous, int(count[0]) if count else 0,
                          test_anchors=anchors, notes=tuple(notes))
    descends = None if previous is None else is_ancestor(root, previous, commit)
    if previous is not None and descends is False and not rewind and \
            is_ancestor(root, commit, previous):
        notes.append(f"the team index holds {previous[:12]}, a descendant of {commit[:12]}: "
                     "nothing changed (pass rewind to serve the older commit)")
        count = conn.execute(f"SELECT records FROM {S.SCHEMA}.snapshots WHERE branch = %s",
                             (branch,)).fetchone()
        return PushReport("behind", branch, commit, previous, int(count[0]) if count else 0,
                          notes=tuple(notes))
    added = changed = deleted = 0
    problems: list[Problem] = []
    if previous is not None and descends and old_gen is not None and not remask:
        action, gen = "incremental", old_gen
        added, changed, deleted, npolicies, problems = _incremental(conn, root, tree, gen,
                                                                     previous, masker)
        if npolicies is None:
            got = conn.execute(f"SELECT count(*) FROM {S.SCHEMA}.policies WHERE gen = %s",
                               (gen,)).fetchone()
            npolicies = int(got[0]) if got else 0
    else:
        action = "full" if previous is None else "rebuilt"
        if remask:
            notes.append("the secrets file holds other secrets than the branch was masked "
                         "with: the branch was rebuilt masked with them")
        elif previous is not None and descends is None:
            notes.append(f"git does not have the indexed commit {previous[:12]} (a shallow "
                         "clone, or history rewritten): the branch was rebuilt")
        got = conn.execute(f"SELECT nextval('{S.SCHEMA}.generations')").fetchone()
        assert got is not None
        gen = int(got[0])
        records, npolicies, problems = _full_load(conn, root, tree, gen, workers, progress,
                                                  masker)
        conn.execute(f"INSERT INTO {S.SCHEMA}.meta VALUES (%s, %s) ON CONFLICT (key) DO"
                     " UPDATE SET value = EXCLUDED.value",
                     (S.secrets_key(branch), secrets_mark(masker)))
        added = records
        if created:
            conn.execute(S.POST_LOAD)
        if old_gen is not None:
            _drop_gen(conn, old_gen)
    test_anchors = _merge_run_store(conn, config, branch)
    nrecords, max_rowid, tokens = _stats(conn, gen)
    conn.execute(
        f"INSERT INTO {S.SCHEMA}.snapshots (branch, gen, commit, schema_version, records,"
        " max_rowid, tokens, memidex_version, pushed_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,now())"
        " ON CONFLICT (branch) DO UPDATE SET gen = EXCLUDED.gen, commit = EXCLUDED.commit,"
        " schema_version = EXCLUDED.schema_version, records = EXCLUDED.records,"
        " max_rowid = EXCLUDED.max_rowid, tokens = EXCLUDED.tokens,"
        " memidex_version = EXCLUDED.memidex_version, pushed_at = now()",
        (branch, gen, commit, S.SCHEMA_VERSION, nrecords, max_rowid, tokens, __version__))
    if action != "incremental":
        conn.execute(f"ANALYZE {S.SCHEMA}.records")
    return PushReport(action, branch, commit, previous, nrecords, added=added, changed=changed,
                      deleted=deleted, policies=npolicies, problems=tuple(problems),
                      test_anchors=test_anchors, notes=tuple(notes))
