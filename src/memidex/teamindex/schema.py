"""The team index's PostgreSQL schema (docs/team-index.md, "Tables").

Everything lives in the ``memidex`` schema. Each branch's snapshot is one *generation*
(``gen``): every table but ``snapshots``, ``test_anchors`` and ``run_ordinals`` is keyed by
it first, a push writes the rows of one generation inside one transaction, and
``snapshots`` names the generation a branch is served from — so a reader's
``REPEATABLE READ`` transaction sees one whole snapshot, old or new. Text columns use the
``C`` collation, so ``ORDER BY id, path`` and the prefix ranges compare bytes as SQLite's
``BINARY`` does. The secondary indexes are created after the first load (``POST_LOAD``).
"""

from __future__ import annotations

SCHEMA_VERSION = 1
"""``meta.schema_version`` and each snapshot's ``schema_version``."""

SCHEMA = "memidex"


def secrets_key(branch: str) -> str:
    """The ``meta`` key of the mark of the secrets a branch's push masked its records with
    (:func:`memidex.index.maskmark.secrets_mark`)."""
    return f"secrets:{branch}"

CONFIG = "memidex.words"
"""The text search configuration: a copy of ``simple`` (no stemming, no stopwords). Its
input is the local index's tokens, already stemmed (``text.py``)."""

TSV = (
    f"setweight(to_tsvector('{CONFIG}'::regconfig, split_part(fts, E'\\x1f', 1)), 'A') || "
    f"setweight(to_tsvector('{CONFIG}'::regconfig, split_part(fts, E'\\x1f', 2)), 'B') || "
    f"setweight(to_tsvector('{CONFIG}'::regconfig, split_part(fts, E'\\x1f', 3)), 'D')"
)
"""Title at weight A, anchors at B, body at D (``ts_rank_cd`` weights give the local
index's column weights 10, 5 and 1, see ``read.py``)."""

CREATE = f"""
CREATE SCHEMA {SCHEMA};
CREATE TEXT SEARCH CONFIGURATION {CONFIG} (COPY = pg_catalog.simple);

CREATE TABLE {SCHEMA}.meta (
    key   text COLLATE "C" PRIMARY KEY,
    value text NOT NULL
);

CREATE SEQUENCE {SCHEMA}.generations;

CREATE TABLE {SCHEMA}.snapshots (
    branch          text COLLATE "C" PRIMARY KEY,
    gen             integer NOT NULL UNIQUE,
    commit          text NOT NULL,
    schema_version  integer NOT NULL,
    records         integer NOT NULL,     -- rows in records (BM25's N)
    max_rowid       integer NOT NULL,     -- the highest rowid (the common-word share)
    tokens          bigint NOT NULL,      -- tokens in all records (BM25's average length)
    memidex_version text NOT NULL,
    pushed_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE {SCHEMA}.records (
    gen            integer NOT NULL,
    rowid          integer NOT NULL,
    id             text COLLATE "C" NOT NULL,
    path           text COLLATE "C" NOT NULL,
    kind           text COLLATE "C" NOT NULL,
    status         text COLLATE "C" NOT NULL,
    product        text COLLATE "C" NOT NULL,
    anchor         text COLLATE "C" NOT NULL,
    title          text NOT NULL,
    body           text NOT NULL,
    anchors        text COLLATE "C" NOT NULL,  -- every anchor, one a line, main first
    scope          text NOT NULL,              -- JSON
    source         text NOT NULL,
    confirmations  bigint NOT NULL,
    contradictions bigint NOT NULL,
    last_confirmed bigint,
    valid_from     bigint NOT NULL,
    valid_until    bigint,
    history        text,                       -- JSON list of earlier versions, or NULL
    sha256         text NOT NULL,
    ntokens        integer NOT NULL,           -- BM25's document length
    fts            text NOT NULL,              -- title, anchors, body tokens (text.py)
    tsv            tsvector GENERATED ALWAYS AS ({TSV}) STORED,
    embedding      vector(384),                -- when vectors land; NULL until then
    PRIMARY KEY (gen, rowid)
) WITH (toast_tuple_target = 8160);
ALTER TABLE {SCHEMA}.records ALTER COLUMN tsv SET STORAGE MAIN;

CREATE TABLE {SCHEMA}.anchors (
    gen    integer NOT NULL,
    anchor text COLLATE "C" NOT NULL,
    rowid  integer NOT NULL,
    main   boolean NOT NULL,
    PRIMARY KEY (gen, anchor, rowid)
);

CREATE TABLE {SCHEMA}.edges (
    gen   integer NOT NULL,
    rowid integer NOT NULL,               -- the record the relation is written in
    rel   text COLLATE "C" NOT NULL,      -- supersedes | superseded_by | cites | contradicts
    dst   text COLLATE "C" NOT NULL,      -- the record id it names
    src   text COLLATE "C" NOT NULL,      -- the id of the record it is written in
    PRIMARY KEY (gen, rowid, rel, dst)
);

CREATE TABLE {SCHEMA}.history_versions (
    gen            integer NOT NULL,
    rowid          integer NOT NULL,
    version        integer NOT NULL,      -- 1 = the oldest; the current one is n + 1
    id             text COLLATE "C" NOT NULL,
    product        text COLLATE "C" NOT NULL,
    kind           text COLLATE "C" NOT NULL,
    status         text COLLATE "C" NOT NULL,
    valid_from     bigint NOT NULL,
    valid_until    bigint NOT NULL,
    title          text NOT NULL,
    body           text NOT NULL,
    anchors        text COLLATE "C" NOT NULL,
    source         text NOT NULL,
    confirmations  bigint NOT NULL,
    contradictions bigint NOT NULL,
    last_confirmed bigint,
    PRIMARY KEY (gen, rowid, version)
);

CREATE VIEW {SCHEMA}.versions AS
    SELECT gen, rowid, coalesce(json_array_length(history::json), 0) + 1 AS version,
           id, product, kind, status, valid_from, valid_until, title, body, anchors,
           source, confirmations, contradictions, last_confirmed, true AS current
      FROM {SCHEMA}.records
    UNION ALL
    SELECT gen, rowid, version, id, product, kind, status, valid_from, valid_until,
           title, body, anchors, source, confirmations, contradictions, last_confirmed,
           false AS current
      FROM {SCHEMA}.history_versions;

CREATE TABLE {SCHEMA}.policies (
    gen      integer NOT NULL,
    id       text COLLATE "C" NOT NULL,
    path     text COLLATE "C" NOT NULL,
    line     integer NOT NULL,
    rule     text NOT NULL,
    severity text NOT NULL,
    products text NOT NULL,               -- JSON list; empty means every product
    anchors  text NOT NULL,               -- JSON list of glob patterns; empty means all
    PRIMARY KEY (gen, path, id)
);

CREATE TABLE {SCHEMA}.problems (
    gen    integer NOT NULL,
    path   text COLLATE "C" NOT NULL,
    line   integer NOT NULL,
    reason text NOT NULL
);

CREATE TABLE {SCHEMA}.terms (             -- BM25's document frequencies, per lexeme
    gen   integer NOT NULL,
    term  text COLLATE "C" NOT NULL,
    ndocs integer NOT NULL,
    PRIMARY KEY (gen, term)
);

-- Local state of the machines that push (their run stores), merged: kept per branch
-- across rebuilds, since no commit holds it.
CREATE TABLE {SCHEMA}.test_anchors (
    branch  text COLLATE "C" NOT NULL,
    product text COLLATE "C" NOT NULL,
    test_id text COLLATE "C" NOT NULL,
    anchor  text COLLATE "C" NOT NULL,
    PRIMARY KEY (branch, product, test_id, anchor)
);

CREATE TABLE {SCHEMA}.run_ordinals (
    branch  text COLLATE "C" NOT NULL,
    product text COLLATE "C" NOT NULL,
    next    bigint NOT NULL,
    PRIMARY KEY (branch, product)
);
"""

POST_LOAD = f"""
CREATE INDEX records_tsv ON {SCHEMA}.records USING gin (tsv);
CREATE UNIQUE INDEX records_by_path ON {SCHEMA}.records (gen, path);
CREATE INDEX records_by_id ON {SCHEMA}.records (gen, id);
CREATE INDEX records_by_product ON {SCHEMA}.records (gen, product, status, kind);
CREATE INDEX records_by_ordinal ON {SCHEMA}.records (gen, product,
    greatest(valid_from, coalesce(last_confirmed, 0), coalesce(valid_until, 0)));
CREATE INDEX records_embedding ON {SCHEMA}.records
    USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
CREATE INDEX anchors_by_rowid ON {SCHEMA}.anchors (gen, rowid);
CREATE INDEX edges_by_dst ON {SCHEMA}.edges (gen, dst);
CREATE INDEX problems_by_path ON {SCHEMA}.problems (gen, path);
"""

TABLES = ("meta", "snapshots", "records", "anchors", "edges", "history_versions",
          "policies", "problems", "terms", "test_anchors", "run_ordinals")
GEN_TABLES = ("records", "anchors", "edges", "history_versions", "policies", "problems",
              "terms")
"""The tables whose rows belong to one generation (deleted with it)."""
