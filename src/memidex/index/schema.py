"""The index schema as named migrations, applied in order and recorded in ``migrations``.

``docs/index.md`` describes the tables; a test checks it lists every table created here.
Secondary indexes are created after a bulk load (``POST_LOAD``), not before.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

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
)

POST_LOAD = """
CREATE INDEX IF NOT EXISTS records_by_id ON records(id);
CREATE INDEX IF NOT EXISTS records_by_product ON records(product, status, kind);
CREATE INDEX IF NOT EXISTS edges_by_dst ON edges(dst);
CREATE INDEX IF NOT EXISTS problems_by_path ON problems(path);
"""

MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS migrations (
    seq  INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
"""

TABLES = ("meta", "files", "records", "records_fts", "records_vocab", "anchors", "edges",
          "policies", "problems", "migrations")
