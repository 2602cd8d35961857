"""The index schema as named migrations, applied in order and recorded in ``migrations``.

``docs/index.md`` describes the tables; a test checks it lists every table created here.
Secondary indexes are created after a bulk load (``POST_LOAD``), not before.
"""

from __future__ import annotations

SCHEMA_VERSION = 4
"""The number of migrations: ``meta.schema_version`` of an index built by this memidex."""

TOKENIZER = "porter unicode61 remove_diacritics 2"

MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0001_initial",
        f"""
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE files (
    path     TEXT PRIMARY KEY,
    kind     TEXT NOT NULL,           -- 'record' or 'policy'
    size     INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ino      INTEGER NOT NULL,
    sha256   TEXT NOT NULL,
    record_rowid INTEGER              -- its row in `records`, if it parsed as a record
) WITHOUT ROWID;

CREATE TABLE records (
    rowid          INTEGER PRIMARY KEY,
    id             TEXT NOT NULL,
    path           TEXT NOT NULL,
    kind           TEXT NOT NULL,
    status         TEXT NOT NULL,
    product        TEXT NOT NULL,
    anchor         TEXT NOT NULL,
    title          TEXT NOT NULL,
    body           TEXT NOT NULL,
    anchors        TEXT NOT NULL,     -- every anchor, one per line, main anchor first
    scope          TEXT NOT NULL,     -- JSON
    source         TEXT NOT NULL,
    confirmations  INTEGER NOT NULL,
    contradictions INTEGER NOT NULL,
    last_confirmed INTEGER,
    valid_from     INTEGER NOT NULL,
    valid_until    INTEGER,
    history        TEXT               -- JSON list of earlier versions, or NULL
);

CREATE VIRTUAL TABLE records_fts USING fts5(
    title, body, anchors,
    content='records', content_rowid='rowid',
    tokenize='{TOKENIZER}'
);

CREATE VIRTUAL TABLE records_vocab USING fts5vocab(records_fts, 'row');

CREATE TABLE anchors (
    anchor       TEXT NOT NULL,
    record_rowid INTEGER NOT NULL,
    main         INTEGER NOT NULL,
    PRIMARY KEY (anchor, record_rowid)
) WITHOUT ROWID;

-- Key columns first: SQLite 3.40's quick_check misreports NOT NULL columns placed
-- between the key columns of a WITHOUT ROWID table.
CREATE TABLE edges (
    record_rowid INTEGER NOT NULL,    -- the record the relation is written in
    rel          TEXT NOT NULL,       -- supersedes | superseded_by | cites | contradicts
    dst          TEXT NOT NULL,       -- the record id it names
    src          TEXT NOT NULL,       -- the id of the record it is written in
    PRIMARY KEY (record_rowid, rel, dst)
) WITHOUT ROWID;

CREATE TABLE policies (
    id       TEXT NOT NULL,
    path     TEXT NOT NULL,
    line     INTEGER NOT NULL,
    rule     TEXT NOT NULL,
    severity TEXT NOT NULL,
    products TEXT NOT NULL,           -- JSON list; empty means every product
    anchors  TEXT NOT NULL,           -- JSON list of glob patterns; empty means all
    PRIMARY KEY (path, id)
) WITHOUT ROWID;

CREATE TABLE problems (
    path   TEXT NOT NULL,
    line   INTEGER NOT NULL,
    reason TEXT NOT NULL
);
""",
    ),
    (
        # Every version of every record, so that a brief at an earlier ordinal is one
        # query; and the runs the learning step will fill (empty until then).
        "0002_versions_runs",
        """
-- The earlier versions (each record's `history`), one row each; the current version is
-- the record's own row, so its text is not stored twice (see the `versions` view).
CREATE TABLE history_versions (
    record_rowid   INTEGER NOT NULL,
    version        INTEGER NOT NULL,  -- 1 = the oldest; the current version is n + 1
    id             TEXT NOT NULL,
    product        TEXT NOT NULL,
    kind           TEXT NOT NULL,
    status         TEXT NOT NULL,
    valid_from     INTEGER NOT NULL,
    valid_until    INTEGER NOT NULL,
    title          TEXT NOT NULL,
    body           TEXT NOT NULL,
    anchors        TEXT NOT NULL,     -- every anchor of that version, main anchor first
    source         TEXT NOT NULL,
    confirmations  INTEGER NOT NULL,
    contradictions INTEGER NOT NULL,
    last_confirmed INTEGER,
    PRIMARY KEY (record_rowid, version)
) WITHOUT ROWID;

CREATE VIEW versions AS
    SELECT rowid AS record_rowid, coalesce(json_array_length(history), 0) + 1 AS version,
           id, product, kind, status, valid_from, valid_until, title, body, anchors,
           source, confirmations, contradictions, last_confirmed, 1 AS current
      FROM records
    UNION ALL
    SELECT record_rowid, version, id, product, kind, status, valid_from, valid_until,
           title, body, anchors, source, confirmations, contradictions, last_confirmed,
           0 AS current
      FROM history_versions;

CREATE TABLE runs (
    run_id    TEXT PRIMARY KEY,
    product   TEXT NOT NULL,
    ordinal   INTEGER NOT NULL,
    build_tag TEXT,
    ci        INTEGER NOT NULL,       -- 1 when the run was on CI
    tests     INTEGER NOT NULL,       -- how many tests, then how many of each verdict
    passed    INTEGER NOT NULL,
    failed    INTEGER NOT NULL,
    skipped   INTEGER NOT NULL,
    path      TEXT NOT NULL,          -- the frozen run file, under the state folder
    sha256    TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE run_tests (
    run_id     TEXT NOT NULL,
    test_id    TEXT NOT NULL,
    product    TEXT NOT NULL,
    ordinal    INTEGER NOT NULL,
    verdict    TEXT NOT NULL,         -- pass | fail | skip
    root_cause TEXT,                  -- app-bug | test-bug | flaky | environment | unknown
    steps      INTEGER NOT NULL,
    failure    TEXT,                  -- the failure message, if any
    PRIMARY KEY (run_id, test_id)
) WITHOUT ROWID;
""",
    ),
    (
        # The highest run ordinal the records know of, per product, in one index lookup:
        # a clone without the local run counters still serves (and numbers runs) after
        # every ordinal in its records. Created after a bulk load (POST_LOAD); an older
        # index is rebuilt rather than migrated, so this step has no DDL of its own.
        "0003_ordinal_floor",
        "-- records_by_ordinal: see POST_LOAD",
    ),
    (
        # Search by meaning (docs/vectors.md): one vector per record of the model in use,
        # and each record's sparse tf·idf norm; both derived, both emptied for a record
        # by the triggers whenever its row goes (a refresh deletes and re-inserts a
        # changed record), so a vector is never older than its record. Additive: an
        # older index is migrated in place.
        "0004_vectors",
        """
CREATE TABLE vectors (
    record_rowid INTEGER PRIMARY KEY,
    model_id     TEXT NOT NULL,      -- name@digest (memidex.vectors.Manifest.model_id)
    dim          INTEGER NOT NULL,
    content_key  BLOB NOT NULL,      -- sha256 of the model id and the masked text embedded
    vector       BLOB NOT NULL       -- float16, little-endian, 2 * dim bytes
);
CREATE INDEX vectors_by_model ON vectors(model_id);

CREATE TABLE sparse_norms (
    record_rowid INTEGER PRIMARY KEY,
    norm         REAL NOT NULL       -- sqrt(sum((1 + ln tf)^2)) over the record's FTS5 terms
);

CREATE VIRTUAL TABLE records_vocab_i USING fts5vocab(records_fts, 'instance');

INSERT OR IGNORE INTO meta(key, value) VALUES ('vectors_generation', '0');

CREATE TRIGGER records_drop_vectors AFTER DELETE ON records BEGIN
    DELETE FROM vectors WHERE record_rowid = old.rowid;
    DELETE FROM sparse_norms WHERE record_rowid = old.rowid;
    UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vectors_generation';
END;

CREATE TRIGGER records_change_vectors AFTER UPDATE OF title, body, anchors ON records BEGIN
    DELETE FROM vectors WHERE record_rowid = old.rowid;
    DELETE FROM sparse_norms WHERE record_rowid = old.rowid;
    UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vectors_generation';
END;
""",
    ),
)

REBUILT_BY: frozenset[str] = frozenset({"0002_versions_runs", "0003_ordinal_floor"})
"""Migrations an older index is rebuilt for rather than migrated in place: they change
what the rows hold (0002 fills `history_versions` from every record file and validates
history windows and evidence more strictly), which only re-reading the files can do."""

POST_LOAD = """
CREATE INDEX IF NOT EXISTS records_by_id ON records(id);
CREATE INDEX IF NOT EXISTS records_by_product ON records(product, status, kind);
CREATE INDEX IF NOT EXISTS records_by_ordinal ON records(
    product, max(valid_from, coalesce(last_confirmed, 0), coalesce(valid_until, 0)));
CREATE INDEX IF NOT EXISTS edges_by_dst ON edges(dst);
CREATE INDEX IF NOT EXISTS problems_by_path ON problems(path);
CREATE INDEX IF NOT EXISTS history_versions_by_product ON history_versions(product, valid_from);
CREATE UNIQUE INDEX IF NOT EXISTS runs_by_ordinal ON runs(product, ordinal);
CREATE INDEX IF NOT EXISTS run_tests_by_test ON run_tests(product, test_id, ordinal);
"""

MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS migrations (
    seq  INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
"""

TABLES = ("meta", "files", "records", "records_fts", "records_vocab", "anchors", "edges",
          "policies", "problems", "history_versions", "versions", "runs", "run_tests",
          "vectors", "sparse_norms", "records_vocab_i", "migrations")
VIEWS = ("versions",)
