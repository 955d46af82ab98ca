//! The database schema and its versioned migrations.
//!
//! `PRAGMA user_version` records how many entries of [`MIGRATIONS`] a database has applied.
//! Migrations only ever get appended: an applied one is never edited, so a store written by any
//! earlier build upgrades by running the ones it lacks.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{Error, Result};

/// Each entry moves the schema from version `index` to `index + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: the initial schema.
    //
    // `memories.body` holds the whole record as JSON and is the source of truth; the other
    // columns copy the fields that filters and ordering need so that they can be indexed.
    // `seq` is an explicit integer key because the full-text index refers to rows by rowid, and
    // only an INTEGER PRIMARY KEY keeps its value across VACUUM. Times are stored as fixed-width
    // RFC 3339 text with nanoseconds, which sorts as text in time order and loses no precision.
    r#"
    CREATE TABLE memories (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        namespace TEXT NOT NULL,
        kind TEXT NOT NULL,
        status TEXT NOT NULL,
        confidence REAL NOT NULL,
        created_at TEXT NOT NULL,
        occurred_at TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        version INTEGER NOT NULL,
        body TEXT NOT NULL
    );
    CREATE UNIQUE INDEX memories_active_content ON memories (namespace, content_hash) WHERE status = 'active';
    CREATE INDEX memories_created ON memories (created_at, id);
    CREATE INDEX memories_occurred ON memories (occurred_at);

    CREATE TABLE memory_tags (
        memory_id TEXT NOT NULL,
        tag TEXT NOT NULL,
        PRIMARY KEY (memory_id, tag)
    ) WITHOUT ROWID;

    CREATE TABLE memory_versions (
        memory_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        superseded_at TEXT NOT NULL,
        reason TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (memory_id, version)
    ) WITHOUT ROWID;

    -- A rowid table on purpose: a rewrite of a vector gets a new, larger rowid, so the largest
    -- rowid of a memory's vectors is the one written last.
    CREATE TABLE embeddings (
        memory_id TEXT NOT NULL,
        model TEXT NOT NULL,
        dim INTEGER NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (memory_id, model)
    );
    CREATE INDEX embeddings_model ON embeddings (model, dim);

    -- Holds `Memory::search_text()` under rowid = memories.seq. Porter stemming lets a question
    -- about "deploying" find a memory about "deployment".
    CREATE VIRTUAL TABLE memories_fts USING fts5 (
        text,
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    "#,
    // 2: search moves into memory (kenning-index), kept in step through a change sequence.
    //
    // `change_seq` grows with every write of a row's record or vectors (reads recorded by
    // `record_access` leave it alone), so a process finds what changed since it last looked,
    // whichever process wrote it, with one indexed range query. `search_text` is the text the
    // index analyses, kept beside the record so that loading the index needs no JSON decoding.
    // The FTS5 table, which held the same text, goes.
    r#"
    ALTER TABLE memories ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE memories ADD COLUMN search_text TEXT NOT NULL DEFAULT '';
    UPDATE memories SET change_seq = seq,
        search_text = coalesce((SELECT text FROM memories_fts WHERE memories_fts.rowid = memories.seq), '');
    CREATE INDEX memories_change ON memories (change_seq);
    DROP TABLE memories_fts;
    "#,
    // 3: decisions and the graph around them.
    //
    // A decision is also a memory (namespace `decisions`, same id); `decisions.body` holds the
    // structured record as JSON, the other columns what filters and ordering need. Signals and
    // outcomes hang off it. `relations` holds the graph: decision -> signal -> outcome -> lesson
    // -> skill edges (`origin = 'graph'`) and a copy of every memory's own links
    // (`origin = 'link'`, kept in step by every write of the memory), so both can be walked
    // with recursive SQL. The copy of existing links is made here from the records.
    r#"
    CREATE TABLE decisions (
        id TEXT PRIMARY KEY,
        module TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        revision INTEGER NOT NULL,
        body TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX decisions_created ON decisions (created_at, id);
    CREATE INDEX decisions_module ON decisions (module, created_at);

    CREATE TABLE decision_files (
        decision_id TEXT NOT NULL,
        path TEXT NOT NULL,
        PRIMARY KEY (decision_id, path)
    ) WITHOUT ROWID;
    CREATE INDEX decision_files_path ON decision_files (path);

    CREATE TABLE decision_signals (
        id TEXT PRIMARY KEY,
        decision_id TEXT NOT NULL,
        recorded_at TEXT NOT NULL,
        body TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX decision_signals_decision ON decision_signals (decision_id, recorded_at);

    CREATE TABLE decision_outcomes (
        decision_id TEXT PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        module TEXT NOT NULL,
        completed_at TEXT NOT NULL,
        body TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX decision_outcomes_module ON decision_outcomes (module, completed_at);

    CREATE TABLE relations (
        from_kind TEXT NOT NULL,
        from_id TEXT NOT NULL,
        relation TEXT NOT NULL,
        to_kind TEXT NOT NULL,
        to_id TEXT NOT NULL,
        origin TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (from_kind, from_id, relation, to_kind, to_id)
    ) WITHOUT ROWID;
    CREATE INDEX relations_to ON relations (to_kind, to_id);

    INSERT OR IGNORE INTO relations (from_kind, from_id, relation, to_kind, to_id, origin, created_at)
    SELECT 'memory', m.id, json_extract(link.value, '$.relation'), 'urn', json_extract(link.value, '$.target'),
           'link', m.created_at
    FROM memories m, json_each(m.body, '$.links') AS link;
    "#,
    // 4: the store's identity, made once, so that a search index persisted beside the database
    // (`index_file`) is only ever read back for the store it was built from.
    r#"
    CREATE TABLE store_identity (id TEXT NOT NULL);
    INSERT INTO store_identity (id) VALUES (lower(hex(randomblob(16))));
    "#,
    // 5: the store as the index of another source of truth (the git notes of the project domain).
    //
    // `mirror_state` records what the index reflects (`source`: the notes commit) and whether an
    // older store's own records were carried into that source (`migrated`). `mirror_skipped`
    // lists the source's entries that could not be indexed (a corrupt or foreign note), with why,
    // so that status can report them until they change.
    r#"
    CREATE TABLE mirror_state (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE mirror_skipped (
        entry TEXT PRIMARY KEY,
        reason TEXT NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 6: provenance facets (`kenning_core::provenance::facets`: the branch a memory was
    // captured on, the files it is about), one per line, for the branch and file filters. The
    // rows already stored get theirs from `fill_facets` below, which needs the core's rules.
    r#"
    ALTER TABLE memories ADD COLUMN facets TEXT NOT NULL DEFAULT '';
    "#,
    // 7: working state beside the memories (`kenning_core::state`): workflows and protocol
    // sessions, one JSON body per kind and id, with the revision compare-and-swap runs on.
    r#"
    CREATE TABLE state (
        kind TEXT NOT NULL,
        id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        updated_us INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (kind, id)
    ) WITHOUT ROWID;
    CREATE INDEX state_by_time ON state (kind, updated_us DESC, id);
    "#,
    // 8: what each state record is about (`StateRecord::subjects`), kept with the record as a
    // JSON array and once per subject in `state_subjects`, by which `state_about` finds the
    // records of a memory without reading every record of their kind. The contradiction
    // records already stored get theirs from `fill_subjects`, which reads their bodies.
    r#"
    ALTER TABLE state ADD COLUMN subjects TEXT NOT NULL DEFAULT '[]';
    CREATE TABLE state_subjects (
        kind TEXT NOT NULL,
        subject TEXT NOT NULL,
        id TEXT NOT NULL,
        PRIMARY KEY (kind, subject, id)
    ) WITHOUT ROWID;
    CREATE INDEX state_subjects_of_record ON state_subjects (kind, id);
    "#,
];

/// The migration that added the facets column, counted from 1.
const FACETS_MIGRATION: i64 = 6;
/// The migration that added the state records' subjects, counted from 1.
const SUBJECTS_MIGRATION: i64 = 8;

/// Brings the database up to the newest schema. Safe to race: the version is read and bumped
/// inside one write transaction, so when two processes open a new store at once, one migrates
/// and the other finds the work done.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let supported = MIGRATIONS.len() as i64;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if found > supported {
        return Err(Error::NewerSchema { path: path.to_owned(), found, supported });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(sql)?;
        tracing::info!(path = %path.display(), version = index + 1, "migrated memory store schema");
    }
    if found < FACETS_MIGRATION && supported >= FACETS_MIGRATION {
        fill_facets(&tx)?;
    }
    if found < SUBJECTS_MIGRATION && supported >= SUBJECTS_MIGRATION {
        fill_subjects(&tx)?;
    }
    if found < supported {
        // PRAGMA takes no bound parameters; the value is a constant of this build.
        tx.execute_batch(&format!("PRAGMA user_version = {supported}"))?;
    }
    tx.commit()?;
    Ok(())
}

/// Computes the facets of every stored memory (see migration 6).
fn fill_facets(conn: &Connection) -> Result<()> {
    let mut rows = Vec::new();
    {
        let mut statement = conn.prepare("SELECT seq, body FROM memories")?;
        let mut query = statement.query([])?;
        while let Some(row) = query.next()? {
            let memory = crate::codec::decode_memory(&row.get::<_, String>(1)?)?;
            rows.push((row.get::<_, i64>(0)?, crate::codec::encode_facets(&memory)));
        }
    }
    let mut update = conn.prepare("UPDATE memories SET facets = ? WHERE seq = ?")?;
    for (seq, facets) in rows {
        update.execute(rusqlite::params![facets, seq])?;
    }
    Ok(())
}

/// Gives each contradiction record stored before migration 8 its subjects, the URNs of its two
/// memories; a body that does not read as a contradiction is left without any.
fn fill_subjects(conn: &Connection) -> Result<()> {
    let mut filled = Vec::new();
    {
        let mut statement = conn.prepare("SELECT id, body FROM state WHERE kind = 'contradiction'")?;
        let mut query = statement.query([])?;
        while let Some(row) = query.next()? {
            if let Ok(record) = kenning_core::contradiction::Contradiction::from_body(&row.get::<_, String>(1)?) {
                filled.push((row.get::<_, String>(0)?, [record.a, record.b]));
            }
        }
    }
    let mut update = conn.prepare("UPDATE state SET subjects = ? WHERE kind = 'contradiction' AND id = ?")?;
    let mut insert = conn.prepare("INSERT OR IGNORE INTO state_subjects (kind, subject, id) VALUES ('contradiction', ?, ?)")?;
    for (id, subjects) in filled {
        update.execute(rusqlite::params![serde_json::to_string(&subjects).expect("strings serialise"), id])?;
        for subject in &subjects {
            insert.execute(rusqlite::params![subject, id])?;
        }
    }
    Ok(())
}
