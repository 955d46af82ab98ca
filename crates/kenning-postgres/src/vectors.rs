//! The vector indexes' life: the live index each model's vectors written one by one go into,
//! the bulk index that bulk-loaded vectors join all at once, and the catch-up that builds it.
//!
//! One HNSW insert per vector is what a bulk load cannot afford (some 230 memories a second on
//! two cores), while building an index over vectors already stored is several times cheaper per
//! vector and runs in parallel. So a bulk load (`write::insert_bulk`) copies its vectors in with
//! a generation of their own, outside every index, where searches compare them exactly (the
//! backlog). Once loading has paused for a few seconds, or when asked (`kenning reindex`, the
//! benchmark), the catch-up brings the backlog into an index: when the backlog is large beside
//! what the bulk index covers, it builds a new bulk index over every generation so far
//! (`CREATE INDEX CONCURRENTLY`, so captures and searches go on meanwhile) and drops the old one;
//! when it is small, it moves the backlog into the live index a few hundred vectors at a time.
//! Every search sees every vector throughout: the live part, the bulk part and the backlog are
//! searched side by side (`read::search_vector`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::db::{Db, VectorIndex};
use crate::error::Result;
use crate::read::VectorLayout;
use crate::schema;
use crate::sql::Tx;

/// How long a process trusts what it read of the bulk indexes (another may have built one).
const LAYOUT_TTL: Duration = Duration::from_secs(30);
/// A backlog smaller than this is moved into the live index rather than rebuilt.
const DRAIN_BELOW: i64 = 2_000;
/// Vectors moved into the live index per transaction.
const DRAIN_BATCH: i64 = 500;
/// The memory an index build may take per vector: a 384-dimension half-precision vector and
/// its graph take about 1.1 KiB in pgvector's in-memory build.
const BUILD_BYTES_PER_VECTOR: i64 = 1_600;
const BUILD_MEMORY_MAX: i64 = 2 << 30;

/// What a catch-up did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// Bulk indexes built.
    pub bulk_indexes_built: u64,
    /// Vectors the new bulk indexes cover.
    pub vectors_in_bulk_index: u64,
    /// Vectors moved from the backlog into a live index.
    pub vectors_moved_to_live: u64,
}

pub(crate) struct Vectors {
    db: Arc<Db>,
    schema: String,
    mode: VectorIndex,
    /// How long bulk loading must have paused before the catch-up starts by itself.
    quiet: Option<Duration>,
    /// The (model, dimension) pairs whose live index this process has seen to exist.
    live: Mutex<HashSet<(String, usize)>>,
    /// Per (model, dimension): the last generation a valid bulk index covers, and when that was read.
    bulk: Mutex<HashMap<(String, usize), (i64, Instant)>>,
    /// When this process last finished a bulk load.
    last_bulk: Mutex<Option<Instant>>,
    /// Whether the background catch-up thread is running.
    waiting: AtomicBool,
    /// One catch-up at a time in this process.
    catching_up: Mutex<()>,
}

impl Vectors {
    pub fn new(db: Arc<Db>, schema: String, mode: VectorIndex, quiet: Option<Duration>) -> Vectors {
        Vectors {
            db,
            schema,
            mode,
            quiet,
            live: Mutex::default(),
            bulk: Mutex::default(),
            last_bulk: Mutex::new(None),
            waiting: AtomicBool::new(false),
            catching_up: Mutex::new(()),
        }
    }

    /// Makes sure each (model, dimension) has its live index, outside the write transaction
    /// that stores the vectors: building an index locks the table against writes.
    pub fn ensure_live(&self, pairs: impl Iterator<Item = (String, usize)>) -> Result<()> {
        if self.mode == VectorIndex::Exact {
            return Ok(());
        }
        let wanted: Vec<(String, usize)> = {
            let known = self.live.lock().unwrap_or_else(PoisonError::into_inner);
            let mut wanted: Vec<(String, usize)> = Vec::new();
            for pair in pairs {
                if !known.contains(&pair) && !wanted.contains(&pair) {
                    wanted.push(pair);
                }
            }
            wanted
        };
        if wanted.is_empty() {
            return Ok(());
        }
        let schema = self.schema.as_str();
        self.db.write(async |tx: &Tx| {
            for (model, dim) in &wanted {
                schema::ensure_live_index(tx, schema, model, *dim).await?;
            }
            Ok(())
        })?;
        self.live.lock().unwrap_or_else(PoisonError::into_inner).extend(wanted);
        Ok(())
    }

    /// How a search finds `model`'s vectors of `dim` dimensions, read in the search's own unit
    /// of work when what this process knows is stale.
    pub async fn layout(&self, tx: &Tx, model: &str, dim: usize) -> Result<VectorLayout> {
        if self.mode == VectorIndex::Exact {
            return Ok(VectorLayout::Exact);
        }
        let key = (model.to_owned(), dim);
        if let Some((through, read_at)) = self.bulk.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
            if read_at.elapsed() < LAYOUT_TTL {
                return Ok(VectorLayout::Indexed { bulk_through: *through });
            }
        }
        let through = bulk_through(tx, &self.schema, model, dim).await?;
        self.bulk.lock().unwrap_or_else(PoisonError::into_inner).insert(key, (through, Instant::now()));
        Ok(VectorLayout::Indexed { bulk_through: through })
    }

    /// Notes that a bulk load committed, and starts the catch-up once loading pauses.
    pub fn bulk_loaded(self: &Arc<Self>) {
        let Some(quiet) = self.quiet.filter(|_| self.mode != VectorIndex::Exact) else { return };
        *self.last_bulk.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        if self.waiting.swap(true, Ordering::AcqRel) {
            return;
        }
        let vectors = self.clone();
        let spawned = std::thread::Builder::new().name("kenning-vector-catch-up".to_owned()).spawn(move || {
            loop {
                let last = vectors.last_bulk.lock().unwrap_or_else(PoisonError::into_inner).unwrap_or_else(Instant::now);
                let quiet_for = last.elapsed();
                if quiet_for < quiet {
                    std::thread::sleep(quiet - quiet_for);
                    continue;
                }
                // A load that starts after this point starts another wait.
                vectors.waiting.store(false, Ordering::Release);
                match vectors.catch_up() {
                    Ok(done) => tracing::info!(?done, "vector index caught up with a bulk load"),
                    Err(error) => tracing::warn!(%error, "the vector index did not catch up with a bulk load; searches compare its backlog exactly until it does"),
                }
                break;
            }
        });
        if spawned.is_err() {
            self.waiting.store(false, Ordering::Release);
        }
    }

    /// Brings every model's backlog into an index, replaces an older schema's index by the live
    /// one, and drops what failed builds left behind.
    pub fn catch_up(&self) -> Result<CatchUp> {
        let mut done = CatchUp::default();
        if self.mode == VectorIndex::Exact {
            return Ok(done);
        }
        let _one_at_a_time = self.catching_up.lock().unwrap_or_else(PoisonError::into_inner);
        let schema = self.schema.as_str();
        self.drop_failed_builds()?;
        let pairs: Vec<(String, usize)> = self.db.read_primary(async |tx: &Tx| {
            let rows = tx.query("SELECT DISTINCT model, dim FROM embeddings", &[]).await?;
            Ok(rows.iter().map(|row| (row.get::<_, String>(0), usize::try_from(row.get::<_, i32>(1)).unwrap_or(0))).collect())
        })?;
        for (model, dim) in pairs.into_iter().filter(|(_, dim)| (1..=schema::HNSW_MAX_DIMENSIONS).contains(dim)) {
            self.replace_legacy_index(&model, dim)?;
            let (through, backlog, covered, newest) = self.db.read_primary(async |tx: &Tx| {
                let through = bulk_through(tx, schema, &model, dim).await?;
                let dim = i32::try_from(dim).unwrap_or(i32::MAX);
                let row = tx
                    .query_one(
                        "SELECT count(*) FILTER (WHERE generation > $3), count(*) FILTER (WHERE generation BETWEEN 1 AND $3), \
                         coalesce(max(generation), 0) FROM embeddings WHERE model = $1 AND dim = $2 AND generation > 0",
                        &[&model.as_str(), &dim, &through],
                    )
                    .await?;
                Ok((through, row.get::<_, i64>(0), row.get::<_, i64>(1), row.get::<_, i64>(2)))
            })?;
            if backlog == 0 {
                continue;
            }
            if backlog < DRAIN_BELOW || backlog * 4 < covered {
                done.vectors_moved_to_live += self.drain(&model, dim, through)?;
            } else {
                self.build_bulk_index(&model, dim, newest, backlog + covered)?;
                done.bulk_indexes_built += 1;
                done.vectors_in_bulk_index += u64::try_from(backlog + covered).unwrap_or(0);
            }
        }
        Ok(done)
    }

    /// Builds the bulk index over generations 1 to `through`, then drops the bulk indexes it
    /// replaces. `CREATE INDEX CONCURRENTLY` runs outside a transaction; the memory setting
    /// before it holds for the session, which a transaction-mode pooler may not keep for the
    /// next statement (the build is then slower, not wrong), so it is reset after.
    fn build_bulk_index(&self, model: &str, dim: usize, through: i64, vectors: i64) -> Result<()> {
        let schema = self.schema.as_str();
        let memory_kib = (vectors.saturating_mul(BUILD_BYTES_PER_VECTOR).clamp(64 << 20, BUILD_MEMORY_MAX)) >> 10;
        let started = Instant::now();
        self.db.autocommit(async |tx: &Tx| {
            tx.batch_execute(&format!("SET maintenance_work_mem = '{memory_kib}kB'")).await?;
            let built = tx.batch_execute(&schema::bulk_index_sql(schema, model, dim, through)).await;
            tx.batch_execute("RESET maintenance_work_mem").await?;
            built
        })?;
        tracing::info!(model, dim, through, vectors, seconds = started.elapsed().as_secs_f64(), "built a bulk vector index");
        let prefix = schema::bulk_index_prefix(model, dim);
        let kept = format!("{prefix}{through}");
        let older: Vec<String> = self.db.read_primary(async |tx: &Tx| {
            let rows = tx
                .query(
                    "SELECT c.relname::text FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = $1 AND c.relkind = 'i' AND starts_with(c.relname::text, $2) AND c.relname::text <> $3",
                    &[&schema, &prefix.as_str(), &kept.as_str()],
                )
                .await?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })?;
        for name in older {
            self.db.autocommit(async |tx: &Tx| tx.batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {schema}.{name}")).await)?;
        }
        self.bulk.lock().unwrap_or_else(PoisonError::into_inner).insert((model.to_owned(), dim), (through, Instant::now()));
        Ok(())
    }

    /// Moves the backlog into the live index, a batch per transaction; returns how many moved.
    fn drain(&self, model: &str, dim: usize, through: i64) -> Result<u64> {
        let dim = i32::try_from(dim).unwrap_or(i32::MAX);
        let mut moved = 0;
        loop {
            let changed = self.db.write(async |tx: &Tx| {
                tx.execute(
                    "UPDATE embeddings SET generation = 0 WHERE (memory_id, model) IN ( \
                         SELECT memory_id, model FROM embeddings WHERE model = $1 AND dim = $2 AND generation > $3 LIMIT $4)",
                    &[&model, &dim, &through, &DRAIN_BATCH],
                )
                .await
            })?;
            moved += changed;
            if changed == 0 {
                return Ok(moved);
            }
        }
    }

    /// An index of schema versions before 6 covers bulk-loaded vectors too; the live index
    /// takes its place, built while it still serves searches.
    fn replace_legacy_index(&self, model: &str, dim: usize) -> Result<()> {
        let schema = self.schema.as_str();
        let legacy = schema::legacy_index_name(model, dim);
        let live = schema::live_index_name(model, dim);
        let (has_legacy, has_live) = self.db.read_primary(async |tx: &Tx| {
            let row = tx
                .query_one(
                    "SELECT bool_or(indexname = $2), bool_or(indexname = $3) FROM pg_indexes WHERE schemaname = $1",
                    &[&schema, &legacy.as_str(), &live.as_str()],
                )
                .await?;
            Ok((row.get::<_, Option<bool>>(0).unwrap_or(false), row.get::<_, Option<bool>>(1).unwrap_or(false)))
        })?;
        if !has_legacy {
            return Ok(());
        }
        if !has_live {
            self.db.autocommit(async |tx: &Tx| tx.batch_execute(&schema::live_index_sql(schema, model, dim, true)).await)?;
        }
        self.db.autocommit(async |tx: &Tx| tx.batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {schema}.{legacy}")).await)?;
        tracing::info!(model, dim, index = %live, "replaced the vector index of an older schema");
        Ok(())
    }

    /// Drops the invalid indexes an interrupted `CREATE INDEX CONCURRENTLY` leaves behind,
    /// unless a build is still running on them.
    fn drop_failed_builds(&self) -> Result<()> {
        let schema = self.schema.as_str();
        let failed: Vec<String> = self.db.read_primary(async |tx: &Tx| {
            let rows = tx
                .query(
                    "SELECT c.relname::text FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid \
                     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = $1 AND NOT i.indisvalid AND c.relname LIKE 'embeddings\\_%' \
                     AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_progress_create_index p WHERE p.index_relid = c.oid)",
                    &[&schema],
                )
                .await?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })?;
        for name in failed {
            tracing::info!(index = %name, "dropping an index an interrupted build left behind");
            self.db.autocommit(async |tx: &Tx| tx.batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {schema}.{name}")).await)?;
        }
        Ok(())
    }

    /// How many of each model's vectors wait for the bulk index, for the store's status.
    pub async fn backlog(&self, tx: &Tx) -> Result<Vec<(String, i64)>> {
        if self.mode == VectorIndex::Exact {
            return Ok(Vec::new());
        }
        let rows = tx.query("SELECT model, dim, count(*) FROM embeddings WHERE generation > 0 GROUP BY model, dim", &[]).await?;
        let mut waiting = Vec::new();
        for row in rows {
            let (model, dim): (String, i32) = (row.get(0), row.get(1));
            let through = bulk_through(tx, &self.schema, &model, usize::try_from(dim).unwrap_or(0)).await?;
            let count: i64 = tx
                .query_one(
                    "SELECT count(*) FROM embeddings WHERE model = $1 AND dim = $2 AND generation > $3",
                    &[&model.as_str(), &dim, &through],
                )
                .await?
                .get(0);
            if count > 0 {
                waiting.push((model, count));
            }
        }
        Ok(waiting)
    }
}

/// The last generation a valid bulk index of `model`'s vectors of `dim` dimensions covers
/// (0 when there is none), read from the catalog: the index's name ends with it.
async fn bulk_through(tx: &Tx, schema: &str, model: &str, dim: usize) -> Result<i64> {
    let prefix = schema::bulk_index_prefix(model, dim);
    let rows = tx
        .query(
            "SELECT c.relname::text FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND i.indisvalid AND starts_with(c.relname::text, $2)",
            &[&schema, &prefix.as_str()],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|row| row.get::<_, &str>(0).strip_prefix(prefix.as_str()).and_then(|through| through.parse::<i64>().ok()))
        .max()
        .unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bulk_index_covers_its_generations_only() {
        let sql = schema::bulk_index_sql("kenning", "it's", 384, 42);
        assert!(sql.contains("model = 'it''s' AND dim = 384 AND generation BETWEEN 1 AND 42"), "{sql}");
        assert!(sql.contains("halfvec(384)") && sql.contains("CONCURRENTLY"), "{sql}");
    }
}
