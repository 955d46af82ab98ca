//! The database schema, its versioned migrations, and the per-model vector indexes.
//!
//! `schema_migrations` records how many entries of [`MIGRATIONS`] a schema has applied.
//! Migrations are only ever appended: an applied one is never edited, so a database written by
//! any earlier build upgrades by running the ones it lacks. Every kenning process runs the
//! check on its first connection, under a transaction-scoped advisory lock, so when several
//! start against a new database at once one migrates and the others find the work done.

use crate::error::{Error, Result};
use crate::sql::Tx;

/// Each entry moves the schema from version `index` to `index + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: memories, their history and their vectors.
    //
    // `body` holds the whole record as JSON text and is the source of truth, except for the
    // read statistics (`access_count`, `last_accessed_at`), which live only in their columns so
    // that recording a read is one UPDATE that never rewrites the record. Times that filters and
    // ordering use are nanoseconds since the epoch: exact, unlike `timestamptz`'s microseconds.
    // `seq` numbers memories in capture order. `search` is the full-text vector of the search
    // text (English stemming), kept by every write. The partial unique index makes exact
    // duplicates among active memories impossible whatever writers race. Vectors are stored
    // untyped, so that models of any dimension sit side by side; each (model, dimension) gets
    // its own HNSW index over `vector::vector(n)` when its first vector arrives.
    r#"
    CREATE TABLE memories (
        seq bigserial PRIMARY KEY,
        id text NOT NULL UNIQUE,
        namespace text NOT NULL,
        kind text NOT NULL,
        status text NOT NULL,
        confidence double precision NOT NULL,
        created_at bigint NOT NULL,
        occurred_at bigint NOT NULL,
        content_hash text NOT NULL,
        version integer NOT NULL,
        tags text[] NOT NULL,
        access_count bigint NOT NULL DEFAULT 0,
        last_accessed_at text,
        search tsvector NOT NULL,
        body text NOT NULL
    );
    CREATE UNIQUE INDEX memories_active_content ON memories (namespace, content_hash) WHERE status = 'active';
    CREATE INDEX memories_created ON memories (created_at DESC, id DESC);
    CREATE INDEX memories_occurred ON memories (occurred_at);
    CREATE INDEX memories_search ON memories USING gin (search);
    CREATE INDEX memories_tags ON memories USING gin (tags);

    CREATE TABLE memory_versions (
        memory_id text NOT NULL,
        version integer NOT NULL,
        superseded_at text NOT NULL,
        reason text NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (memory_id, version)
    );

    CREATE SEQUENCE embedding_writes;
    CREATE TABLE embeddings (
        memory_id text NOT NULL,
        model text NOT NULL,
        dim integer NOT NULL,
        vector vector NOT NULL,
        -- Grows with every write, so a memory's vector written last is the one with the largest.
        written bigint NOT NULL DEFAULT nextval('embedding_writes'),
        PRIMARY KEY (memory_id, model)
    );
    CREATE INDEX embeddings_model ON embeddings (model, dim);
    "#,
    // 2: decisions and the graph around them, as in the SQLite store.
    //
    // A decision is also a memory (namespace `decisions`, same id); `decisions.body` holds the
    // structured record as JSON, the other columns what filters and ordering need. Signals and
    // outcomes hang off it. `relations` holds the decision graph (`origin = 'graph'`) and a copy
    // of every memory's own links (`origin = 'link'`), walked with recursive SQL. Links of
    // memories written under schema 1 are copied here from their records.
    r#"
    CREATE TABLE decisions (
        id text PRIMARY KEY,
        module text NOT NULL,
        status text NOT NULL,
        created_at text NOT NULL,
        revision integer NOT NULL,
        body text NOT NULL
    );
    CREATE INDEX decisions_created ON decisions (created_at, id);
    CREATE INDEX decisions_module ON decisions (module, created_at);

    CREATE TABLE decision_files (
        decision_id text NOT NULL,
        path text NOT NULL,
        PRIMARY KEY (decision_id, path)
    );
    CREATE INDEX decision_files_path ON decision_files (path text_pattern_ops);

    CREATE TABLE decision_signals (
        id text PRIMARY KEY,
        decision_id text NOT NULL,
        recorded_at text NOT NULL,
        body text NOT NULL
    );
    CREATE INDEX decision_signals_decision ON decision_signals (decision_id, recorded_at);

    CREATE TABLE decision_outcomes (
        decision_id text PRIMARY KEY,
        id text NOT NULL UNIQUE,
        module text NOT NULL,
        completed_at text NOT NULL,
        body text NOT NULL
    );
    CREATE INDEX decision_outcomes_module ON decision_outcomes (module, completed_at);

    CREATE TABLE relations (
        from_kind text NOT NULL,
        from_id text NOT NULL,
        relation text NOT NULL,
        to_kind text NOT NULL,
        to_id text NOT NULL,
        origin text NOT NULL,
        created_at text NOT NULL,
        PRIMARY KEY (from_kind, from_id, relation, to_kind, to_id)
    );
    CREATE INDEX relations_to ON relations (to_kind, to_id);

    INSERT INTO relations (from_kind, from_id, relation, to_kind, to_id, origin, created_at)
    SELECT 'memory', m.id, link->>'relation', 'urn', link->>'target', 'link', m.body::jsonb->>'updated_at'
    FROM memories m, jsonb_array_elements(m.body::jsonb->'links') AS link
    ON CONFLICT DO NOTHING;
    "#,
    // 3: provenance facets (`kenning_core::provenance::facets`: the branch a memory was
    // captured on, the files it is about) for the branch and file filters, answered by
    // containment through a GIN index as tags are. The rows already stored get theirs from
    // `fill_facets`, which needs the core's rules.
    r#"
    ALTER TABLE memories ADD COLUMN facets text[] NOT NULL DEFAULT '{}';
    CREATE INDEX memories_facets ON memories USING gin (facets);
    "#,
    // 4: working state beside the memories (`kenning_core::state`): workflows and protocol
    // sessions, one JSON body per kind and id, with the revision compare-and-swap runs on.
    r#"
    CREATE TABLE state (
        kind text NOT NULL,
        id text NOT NULL,
        revision bigint NOT NULL,
        updated_us bigint NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (kind, id)
    );
    CREATE INDEX state_by_time ON state (kind, updated_us DESC, id);
    "#,
    // 5: the change mark (`MemoryStore::change_mark`): a sequence every statement that writes
    // memories moves, through a trigger, so that front ends see the writes of every process.
    // `UPDATE OF body, status` leaves out the access counts a read updates. A rolled-back write
    // moves it too (sequences are not transactional), which costs a needless refresh at most.
    r#"
    CREATE SEQUENCE memory_changes;
    CREATE FUNCTION note_memory_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM nextval('memory_changes');
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER memories_changed AFTER INSERT OR DELETE OR UPDATE OF body, status ON memories
        FOR EACH STATEMENT EXECUTE FUNCTION note_memory_change();
    "#,
    // 6: vectors that join the index in bulk (`vectors.rs`). A vector written one by one has
    // generation 0 and goes into its model's live HNSW index as it is written. A bulk load
    // (`COPY`) gives its vectors a generation of their own from the sequence, which no index
    // covers until a bulk index is built over every generation up to it, in one pass; until
    // then searches compare them exactly, through the index on the backlog.
    r#"
    ALTER TABLE embeddings ADD COLUMN generation bigint NOT NULL DEFAULT 0;
    CREATE SEQUENCE embedding_generations;
    CREATE INDEX embeddings_backlog ON embeddings (model, dim, generation) WHERE generation > 0;
    "#,
    // 7: a short pending list for the full-text index. GIN keeps new entries in an unsorted
    // list until it holds `gin_pending_list_limit` (4 MB by default) and every search reads
    // that whole list: some 300 pages, 2 to 6 ms for each word of a query at 100,000
    // memories, and the planner, counting those pages, walks capture order rather than use
    // the index for a rarer word. 256 kB keeps the read short; the list is merged into the
    // index more often, in smaller batches.
    r#"
    ALTER INDEX memories_search SET (gin_pending_list_limit = 256);
    "#,
    // 8: what each state record is about (`StateRecord::subjects`), kept with the record and
    // found through a GIN index by `state_about`, so that the records of a memory are found
    // without reading every record of their kind. The contradiction records already stored
    // get theirs from `fill_subjects`, which reads their bodies. Without a pending list
    // (`fastupdate = off`): a few records are written at a time, and a lookup through a list
    // of 30,000 unmerged records took 3 to 6 ms against 0.06 ms once they were merged.
    r#"
    ALTER TABLE state ADD COLUMN subjects text[] NOT NULL DEFAULT '{}';
    CREATE INDEX state_subjects ON state USING gin (subjects) WITH (fastupdate = off);
    "#,
];

/// The migration that added the facets column, counted from 1.
const FACETS_MIGRATION: i64 = 3;
/// The migration that added the state records' subjects, counted from 1.
const SUBJECTS_MIGRATION: i64 = 8;

/// The advisory lock key every kenning process takes while it migrates ("kenning" in ASCII).
const MIGRATION_LOCK: i64 = 0x6b65_6e6e_696e_67;

/// Brings `schema` up to `target` migrations (all of them when `None`), creating the schema and
/// the pgvector extension if needed.
/// Runs inside the caller's unit of work (one transaction).
pub(crate) async fn migrate(tx: &Tx, schema: &str, target: Option<usize>) -> Result<()> {
    let target = target.unwrap_or(MIGRATIONS.len()).min(MIGRATIONS.len());
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
    // `schema` passed `validate_schema_name`: a plain lower-case identifier.
    tx
        .batch_execute(&format!(
            "CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public; \
             CREATE SCHEMA IF NOT EXISTS {schema}; \
             SET LOCAL search_path = {schema}, public; \
             CREATE TABLE IF NOT EXISTS schema_migrations (version bigint NOT NULL); \
             INSERT INTO schema_migrations (version) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM schema_migrations);"
        ))
        .await?;
    let found: i64 = tx.query_one("SELECT version FROM schema_migrations", &[]).await?.get(0);
    let supported = MIGRATIONS.len() as i64;
    if found > supported {
        return Err(Error::NewerSchema { schema: schema.to_owned(), found, supported });
    }
    let mut version = found;
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize).take(target.saturating_sub(found as usize)) {
        tx.batch_execute(sql).await?;
        version = index as i64 + 1;
        tracing::info!(schema, version, "migrated organisation store schema");
    }
    if found < FACETS_MIGRATION && version >= FACETS_MIGRATION {
        fill_facets(tx).await?;
    }
    if found < SUBJECTS_MIGRATION && version >= SUBJECTS_MIGRATION {
        fill_subjects(tx).await?;
    }
    if version != found {
        tx.execute("UPDATE schema_migrations SET version = $1", &[&version]).await?;
    }
    Ok(())
}

/// Computes the facets of every stored memory (see migration 3).
async fn fill_facets(tx: &Tx) -> Result<()> {
    for row in tx.query("SELECT seq, body FROM memories", &[]).await? {
        let seq: i64 = row.get(0);
        let memory: kenning_core::Memory = serde_json::from_str(row.get::<_, &str>(1)).map_err(|error| Error::Corrupt(error.to_string()))?;
        tx.execute("UPDATE memories SET facets = $2 WHERE seq = $1", &[&seq, &kenning_core::provenance::facets(&memory)]).await?;
    }
    Ok(())
}

/// Gives each contradiction record stored before migration 8 its subjects, the URNs of its two
/// memories; a body that does not read as a contradiction is left without any.
async fn fill_subjects(tx: &Tx) -> Result<()> {
    for row in tx.query("SELECT id, body FROM state WHERE kind = 'contradiction'", &[]).await? {
        let Ok(record) = kenning_core::contradiction::Contradiction::from_body(row.get::<_, &str>(1)) else { continue };
        let id: String = row.get(0);
        tx.execute("UPDATE state SET subjects = $2 WHERE kind = 'contradiction' AND id = $1", &[&id, &vec![record.a, record.b]]).await?;
    }
    Ok(())
}

/// The schema version `schema` is at (0 for an empty database).
pub(crate) async fn version(tx: &Tx, schema: &str) -> Result<i64> {
    let exists: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'schema_migrations')",
            &[&schema],
        )
        .await?
        .get(0);
    if !exists {
        return Ok(0);
    }
    Ok(tx.query_one(&format!("SELECT version FROM {schema}.schema_migrations"), &[]).await?.get(0))
}

/// pgvector's HNSW index takes vectors of up to this many dimensions.
pub(crate) const HNSW_MAX_DIMENSIONS: usize = 2000;

/// HNSW's graph: neighbours per node, and the candidate list while building it (pgvector's
/// defaults, which hold recall@10 above 0.95 at a million vectors with `ef_search` 100).
const HNSW_WITH: &str = "WITH (m = 16, ef_construction = 64)";

/// A stable key of a model and dimension for index names, within PostgreSQL's 63-byte identifiers.
fn model_key(model: &str, dim: usize) -> String {
    // FNV-1a.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in model.bytes().chain(dim.to_le_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The index of schema versions before 6, over all of a model's vectors whatever their
/// generation; it serves as the live index until the live index replaces it.
pub(crate) fn legacy_index_name(model: &str, dim: usize) -> String {
    format!("embeddings_hnsw_{}", model_key(model, dim))
}

/// The HNSW index over the vectors written one by one (generation 0).
pub(crate) fn live_index_name(model: &str, dim: usize) -> String {
    format!("embeddings_live_{}", model_key(model, dim))
}

/// The names of the bulk indexes: the prefix, then the last generation covered.
pub(crate) fn bulk_index_prefix(model: &str, dim: usize) -> String {
    format!("embeddings_bulk_{}_", model_key(model, dim))
}

/// A string as a SQL literal. The model id is spliced into the partial index's predicate and
/// into queries (a bound parameter would keep the planner from matching the index).
pub(crate) fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The live index's definition: full-precision vectors, as the search's live part orders them
/// (and as the index of older schemas did, so that one serves the same searches).
pub(crate) fn live_index_sql(schema: &str, model: &str, dim: usize, concurrently: bool) -> String {
    format!(
        "CREATE INDEX {} IF NOT EXISTS {} ON {schema}.embeddings USING hnsw ((vector::public.vector({dim})) public.vector_cosine_ops) \
         {HNSW_WITH} WHERE model = {} AND dim = {dim} AND generation = 0",
        if concurrently { "CONCURRENTLY" } else { "" },
        live_index_name(model, dim),
        literal(model)
    )
}

/// A bulk index's definition, over generations 1 to `through`: half-precision vectors, which
/// halve the graph's memory and the time to build it and rank as full precision does but for
/// near-ties (the search gives every hit its full-precision score).
pub(crate) fn bulk_index_sql(schema: &str, model: &str, dim: usize, through: i64) -> String {
    format!(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {}{through} ON {schema}.embeddings \
         USING hnsw ((vector::public.halfvec({dim})) public.halfvec_cosine_ops) {HNSW_WITH} \
         WHERE model = {} AND dim = {dim} AND generation BETWEEN 1 AND {through}",
        bulk_index_prefix(model, dim),
        literal(model)
    )
}

/// Creates the live HNSW (cosine) index over `model`'s vectors of `dim` dimensions if neither it
/// nor an older schema's index is there, inside the caller's unit of work. This happens when a
/// model's first vectors arrive, so the table holds few of them and the build is short.
pub(crate) async fn ensure_live_index(tx: &Tx, schema: &str, model: &str, dim: usize) -> Result<()> {
    if dim == 0 || dim > HNSW_MAX_DIMENSIONS {
        return Ok(());
    }
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
    let names = vec![live_index_name(model, dim), legacy_index_name(model, dim)];
    let exists: bool = tx
        .query_one("SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = $1 AND indexname = ANY($2))", &[&schema, &names])
        .await?
        .get(0);
    if !exists {
        tx.batch_execute(&live_index_sql(schema, model, dim, false)).await?;
        tracing::info!(schema, model, dim, index = %names[0], "created a vector index");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_names_are_stable_identifiers() {
        let name = live_index_name("builtin-minilm-static-1a2b", 384);
        assert_eq!(name, live_index_name("builtin-minilm-static-1a2b", 384));
        assert_ne!(name, live_index_name("builtin-minilm-static-1a2b", 256));
        assert!(format!("{}{}", bulk_index_prefix("builtin-minilm-static-1a2b", 384), i64::MAX).len() <= 63);
    }

    #[test]
    fn literals_escape_quotes() {
        assert_eq!(literal("it's"), "'it''s'");
    }
}
