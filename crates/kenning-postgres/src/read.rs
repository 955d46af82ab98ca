//! Queries that fetch memories, their history and vectors, search them, and the store's figures.
//! Every filter is part of the SQL, so the database answers it beside the search itself.

use std::collections::HashMap;

use chrono::TimeDelta;
use kenning_core::store::NEIGHBOUR_REACH;
use kenning_core::{
    Embedding, Memory, MemoryId, MemoryKind, MemoryRecord, MemoryVersion, ScoredId, SearchFilter, Status, StoreStats,
};

use crate::codec::{MEMORY_COLUMNS, decode_row, parse_time_key, sql_count};
use crate::error::{Error, Result};
use crate::filter;
use crate::schema::literal;
use crate::sql::{Params, Tx};

/// The most words of a query that full-text search looks for; a longer query is cut, since
/// its first words already pick the memories and every word costs an index lookup.
const MAX_QUERY_WORDS: usize = 64;
/// The most words that bring candidates of their own (see [`search_text`]); the rest still
/// count in the ranking.
const MAX_CANDIDATE_WORDS: usize = 16;
/// How many of its newest matches each word brings to be ranked (see [`search_text`]).
const CANDIDATES_PER_WORD: usize = 200;
/// The windows of capture order, newest first, in which [`search_text`] looks for each word's
/// newest matches: the last thousand memories, then back to the last ten thousand, then a
/// hundred thousand, then the rest.
const RECENT_WINDOWS: [i64; 3] = [1_000, 10_000, 100_000];

pub(crate) async fn get(tx: &Tx, id: &str) -> Result<Option<Memory>> {
    let row = tx.query_opt(&format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = $1"), &[&id]).await?;
    row.map(|row| decode_row(&row, 0)).transpose()
}

pub(crate) async fn get_many(tx: &Tx, ids: &[MemoryId]) -> Result<Vec<Memory>> {
    let ids: Vec<&str> = ids.iter().map(MemoryId::as_str).collect();
    let rows = tx.query(&format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ANY($1)"), &[&ids]).await?;
    rows.iter().map(|row| decode_row(row, 0)).collect()
}

/// For each memory, the active memory of its namespace holding its content, in one query.
pub(crate) async fn active_holders(tx: &Tx, memories: &[&Memory]) -> Result<Vec<Option<MemoryId>>> {
    let keys: Vec<Option<(String, String)>> = memories
        .iter()
        .map(|memory| (memory.status == Status::Active).then(|| (memory.namespace.as_str().to_owned(), memory.content_hash())))
        .collect();
    let holders = holders_of(tx, keys.iter().flatten()).await?;
    Ok(keys.iter().map(|key| key.as_ref().and_then(|key| holders.get(key).cloned())).collect())
}

/// The active memories holding these (namespace, content hash) keys, in one query.
pub(crate) async fn holders_of<'k>(
    tx: &Tx,
    keys: impl Iterator<Item = &'k (String, String)> + Clone,
) -> Result<HashMap<(String, String), MemoryId>> {
    let namespaces: Vec<&str> = keys.clone().map(|(namespace, _)| namespace.as_str()).collect();
    if namespaces.is_empty() {
        return Ok(HashMap::new());
    }
    let hashes: Vec<&str> = keys.map(|(_, hash)| hash.as_str()).collect();
    let rows = tx
        .query(
            "SELECT m.namespace, m.content_hash, m.id FROM memories m \
             JOIN unnest($1::text[], $2::text[]) AS b(namespace, content_hash) USING (namespace, content_hash) \
             WHERE m.status = 'active'",
            &[&namespaces, &hashes],
        )
        .await?;
    let mut holders = HashMap::with_capacity(rows.len());
    for row in rows {
        let id = MemoryId::parse(row.get::<_, &str>(2)).map_err(|error| Error::Corrupt(error.to_string()))?;
        holders.insert((row.get(0), row.get(1)), id);
    }
    Ok(holders)
}

pub(crate) async fn history(tx: &Tx, id: &str) -> Result<Vec<MemoryVersion>> {
    let rows = tx
        .query("SELECT version, superseded_at, reason, body FROM memory_versions WHERE memory_id = $1 ORDER BY version", &[&id])
        .await?;
    rows.iter()
        .map(|row| {
            let version: i32 = row.get(0);
            Ok(MemoryVersion {
                version: u32::try_from(version).unwrap_or(0),
                superseded_at: parse_time_key(row.get(1))?,
                reason: row.get(2),
                memory: serde_json::from_str(row.get::<_, &str>(3))?,
            })
        })
        .collect()
}

pub(crate) async fn list(tx: &Tx, filter: &SearchFilter, offset: usize, limit: usize) -> Result<Vec<Memory>> {
    let mut params = Params::default();
    let condition = filter::condition(filter, &mut params);
    let limit = params.push(sql_count(limit));
    let offset = params.push(sql_count(offset));
    let sql = format!(
        "SELECT {MEMORY_COLUMNS} FROM memories m WHERE {condition} ORDER BY m.created_at DESC, m.id DESC LIMIT {limit} OFFSET {offset}"
    );
    memories(tx, &sql, &params).await
}

pub(crate) async fn count(tx: &Tx, filter: &SearchFilter) -> Result<u64> {
    let mut params = Params::default();
    let condition = filter::condition(filter, &mut params);
    let count: i64 = tx.query_one(&format!("SELECT COUNT(*) FROM memories m WHERE {condition}"), &params.refs()).await?.get(0);
    Ok(u64::try_from(count).unwrap_or(0))
}

/// Full-text search: the query's words, any of them (`|`), stemmed as English, ranked by
/// `ts_rank` over the GIN-indexed `tsvector`. The words are cut out of the query as runs of
/// letters and digits, so no query syntax reaches `to_tsquery`.
///
/// Only a bounded set of candidates is ranked: for each word, the newest
/// [`CANDIDATES_PER_WORD`] memories (at least `limit`) holding it and passing the filter.
/// Ranking every match read the `tsvector` of half the store for a query with one common word
/// (1.2 s at 100,000 memories). A word few memories hold brings all of them, so a rare, telling
/// word is never crowded out by common ones, as inverse document frequency would have it; a
/// common word brings its newest uses, which an agent wants first.
///
/// Each word's newest matches are looked for in windows of capture order going back from the
/// newest memory ([`RECENT_WINDOWS`]), the next window only while fewer than wanted were found
/// (`UNION ALL` under `LIMIT` runs its parts in order and stops when it has enough). Within a
/// window the GIN index and the index on capture order are combined (`BitmapAnd`), so only the
/// window's matches are read. Without windows, a word held by one memory in fifty was found by
/// walking capture order backwards through thousands of rows (78 ms a call at 1M memories), and
/// reading all its matches through the GIN index instead costs as much. A parallel plan would
/// run the parts side by side and lose their order, so the statement runs without one.
pub(crate) async fn search_text(tx: &Tx, query: &str, filter: &SearchFilter, limit: usize) -> Result<Vec<ScoredId>> {
    let words = query_words(query);
    if words.is_empty() || limit == 0 {
        return Ok(Vec::new());
    }
    let newest = tx
        .simple_value("SET LOCAL max_parallel_workers_per_gather = 0; SELECT coalesce(max(seq), 0) FROM memories")
        .await?
        .and_then(|newest| newest.parse::<i64>().ok())
        .unwrap_or(0);
    let mut params = Params::default();
    let tsquery = params.push(words.join(" | "));
    let condition = filter::condition_on("n", filter, &mut params);
    let per_word = params.push(sql_count(limit.max(CANDIDATES_PER_WORD)));
    // Capture-order bounds, spliced in as literals so that the planner sees each window's size.
    let mut bounds: Vec<String> = Vec::new();
    let mut upper = String::new();
    for window in RECENT_WINDOWS.iter().filter(|&&window| window < newest) {
        let lower = newest - window;
        bounds.push(format!("{upper} AND n.seq > {lower}"));
        upper = format!(" AND n.seq <= {lower}");
    }
    bounds.push(upper);
    let candidates: Vec<String> = words
        .iter()
        .take(MAX_CANDIDATE_WORDS)
        .map(|word| {
            let word = params.push(word.clone());
            let windows: Vec<String> = bounds
                .iter()
                .map(|bound| {
                    format!(
                        "(SELECT n.seq FROM memories n WHERE n.search @@ to_tsquery('english', {word}){bound} AND {condition} \
                         ORDER BY n.seq DESC)"
                    )
                })
                .collect();
            format!("(SELECT seq FROM ({}) windows LIMIT {per_word})", windows.join(" UNION ALL "))
        })
        .collect();
    let limit = params.push(sql_count(limit));
    let sql = format!(
        "SELECT m.id, ts_rank(m.search, q.query)::float8 AS score FROM memories m, to_tsquery('english', {tsquery}) AS q(query) \
         WHERE m.seq IN ({}) ORDER BY score DESC, m.seq LIMIT {limit}",
        candidates.join(" UNION ")
    );
    scored(tx, &sql, &params).await
}

/// The query's words: runs of letters and digits, lower-cased, each once, in order.
fn query_words(query: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in query.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()) {
        let word = word.to_lowercase();
        if !words.contains(&word) {
            words.push(word);
        }
        if words.len() == MAX_QUERY_WORDS {
            break;
        }
    }
    words
}

/// Where vector search looks for a model's vectors of one dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VectorLayout {
    /// No index: every vector is compared.
    Exact,
    /// Vectors written one by one (generation 0) through the live HNSW index; bulk-loaded ones
    /// up to `bulk_through` through the bulk index; later bulk-loaded ones, the backlog the
    /// index has not caught up with yet, compared exactly.
    Indexed { bulk_through: i64 },
}

/// Nearest neighbours by cosine similarity among `model`'s vectors of the query's dimension.
/// With indexes, each part of the store is searched its own way (see [`VectorLayout`]) and the
/// parts' best are merged by exact score; the model id, dimension and generation bounds are
/// spliced in as literals, so the planner can match the partial indexes' predicates.
pub(crate) async fn search_vector(
    tx: &Tx,
    query: &[f32],
    model: &str,
    filter: &SearchFilter,
    limit: usize,
    layout: VectorLayout,
) -> Result<Vec<ScoredId>> {
    if limit == 0 || query.is_empty() {
        return Ok(Vec::new());
    }
    let dim = query.len();
    let mut params = Params::default();
    let vector = params.push(query.to_vec());
    let condition = filter::condition(filter, &mut params);
    let limit = params.push(sql_count(limit));
    let query = Query { full: format!("{vector}::real[]::vector({dim})"), half: format!("{vector}::real[]::halfvec({dim})"), dim };
    let parts = nearest_parts(&query, &literal(model), &condition, &limit, layout, Backlog::Searched);
    let sql = match layout {
        VectorLayout::Exact => parts.concat(),
        VectorLayout::Indexed { .. } => format!("SELECT id, score FROM ({}) nearest ORDER BY score DESC LIMIT {limit}", parts.join(" UNION ALL ")),
    };
    let mut hits = scored(tx, &sql, &params).await?;
    // An iterative index scan returns rows in nearly, not exactly, ascending distance.
    hits.sort_by(|a, b| b.score.total_cmp(&a.score));
    Ok(hits)
}

/// A query vector as SQL expressions: `full` of type `vector(dim)`, `half` of type `halfvec(dim)`.
struct Query {
    full: String,
    half: String,
    dim: usize,
}

/// Whether a vector search looks through a running bulk load's backlog, which no index covers.
#[derive(Clone, Copy, PartialEq)]
enum Backlog {
    Searched,
    LeftOut,
}

/// The nearest `limit` memories to `query` in each part of the store `layout` describes, one
/// `SELECT` each, ranked by the distance its index orders by: the live generation (its HNSW
/// index), the bulk generations (the half-precision index) and, unless left out, the backlog
/// (compared exactly). Every part scores by the full-precision cosine. Without indexes, one part
/// compares every vector.
fn nearest_parts(query: &Query, model: &str, condition: &str, limit: &str, layout: VectorLayout, backlog: Backlog) -> Vec<String> {
    let Query { full, half, dim } = query;
    let exact = format!("e.vector::vector({dim}) <=> {full}");
    let part = |generations: &str, order: &str| {
        format!(
            "(SELECT m.id, (1 - ({exact}))::float8 AS score FROM embeddings e JOIN memories m ON m.id = e.memory_id \
             WHERE e.model = {model} AND e.dim = {dim}{generations} AND {condition} ORDER BY {order} LIMIT {limit})"
        )
    };
    match layout {
        VectorLayout::Exact => vec![part("", &exact)],
        VectorLayout::Indexed { bulk_through } => {
            let mut parts = vec![part(" AND e.generation = 0", &exact)];
            if bulk_through > 0 {
                let halves = format!("e.vector::halfvec({dim}) <=> {half}");
                parts.push(part(&format!(" AND e.generation BETWEEN 1 AND {bulk_through}"), &halves));
            }
            if backlog == Backlog::Searched {
                parts.push(part(&format!(" AND e.generation > {bulk_through}"), &exact));
            }
            parts
        }
    }
}

/// The search effort of [`search_vector_many`]: the graph candidates HNSW keeps per vector,
/// against recall's 100 (set in every transaction's `BEGIN`, see `db.rs`). The checks of a
/// batch want a capture's few nearest memories, which the smaller beam still finds, and
/// compare the batch's own captures with each other exactly anyway.
const CHECK_EF_SEARCH: usize = 40;

/// Nearest neighbours of each of `queries` (see [`kenning_core::MemoryStore::search_vector_many`]),
/// in one statement: the batch's vectors travel as one flat array, are cut into one row each,
/// and each row searches the indexed parts of the store as [`search_vector`] does, through
/// `LATERAL`. A running bulk load's backlog (the generations no index covers yet) is left out:
/// comparing it exactly is what made a bulk load's checks grow with everything loaded before.
/// Without indexes every vector is compared, as there is nothing else to search. Every query
/// has the first one's dimension (the caller groups them).
pub(crate) async fn search_vector_many(
    tx: &Tx,
    queries: &[&[f32]],
    model: &str,
    filter: &SearchFilter,
    limit: usize,
    layout: VectorLayout,
) -> Result<Vec<Vec<ScoredId>>> {
    let mut found: Vec<Vec<ScoredId>> = vec![Vec::new(); queries.len()];
    let Some(dim) = queries.first().map(|query| query.len()) else { return Ok(found) };
    if limit == 0 || dim == 0 {
        return Ok(found);
    }
    if layout != VectorLayout::Exact {
        tx.batch_execute(&format!("SET LOCAL hnsw.ef_search = {}", CHECK_EF_SEARCH.max(limit))).await?;
    }
    let mut params = Params::default();
    let flat = params.push(queries.iter().flat_map(|query| query.iter().copied()).collect::<Vec<f32>>());
    let count = params.push(sql_count(queries.len()));
    let condition = filter::condition(filter, &mut params);
    let per_vector = params.push(sql_count(limit));
    let query = Query { full: "b.query".to_owned(), half: format!("b.query::halfvec({dim})"), dim };
    let parts = nearest_parts(&query, &literal(model), &condition, &per_vector, layout, Backlog::LeftOut).join(" UNION ALL ");
    let sql = format!(
        "WITH b AS MATERIALIZED ( \
             SELECT i AS position, ({flat}::real[])[(i - 1) * {dim} + 1 : i * {dim}]::vector({dim}) AS query \
             FROM generate_series(1, {count}) AS i) \
         SELECT b.position, near.id, near.score FROM b CROSS JOIN LATERAL ({parts}) near"
    );
    for row in tx.query(&sql, &params.refs()).await? {
        let position: i64 = row.get(0);
        let id = MemoryId::parse(row.get::<_, &str>(1)).map_err(|error| Error::Corrupt(error.to_string()))?;
        if let Some(hits) = usize::try_from(position - 1).ok().and_then(|index| found.get_mut(index)) {
            hits.push(ScoredId { id, score: row.get(2) });
        }
    }
    for hits in &mut found {
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(limit);
    }
    Ok(found)
}

/// See [`kenning_core::MemoryStore::neighbours`]: capture order is `seq`, and the rows within
/// [`NEIGHBOUR_REACH`] keys on each side are looked through. One statement answers every id.
pub(crate) async fn neighbours(tx: &Tx, ids: &[MemoryId], filter: &SearchFilter, window: TimeDelta) -> Result<Vec<Vec<MemoryId>>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut params = Params::default();
    let origins = params.push(ids.iter().map(|id| id.as_str().to_owned()).collect::<Vec<String>>());
    let origin_condition = filter::condition(filter, &mut params);
    let near_condition = filter::condition_on("n", filter, &mut params);
    let reach = params.push(NEIGHBOUR_REACH as i64);
    let window = params.push(window.num_nanoseconds().unwrap_or(i64::MAX));
    let sql = format!(
        "WITH origin AS ( \
             SELECT o.ordinality AS position, m.seq, m.namespace, m.occurred_at \
             FROM unnest({origins}::text[]) WITH ORDINALITY AS o(id, ordinality) JOIN memories m ON m.id = o.id \
             WHERE {origin_condition}) \
         SELECT origin.position, side.id FROM origin, LATERAL ( \
             (SELECT 0 AS side, n.id, n.occurred_at FROM memories n \
              WHERE n.seq < origin.seq AND n.seq >= origin.seq - {reach} AND n.namespace = origin.namespace AND {near_condition} \
              ORDER BY n.seq DESC LIMIT 1) \
             UNION ALL \
             (SELECT 1 AS side, n.id, n.occurred_at FROM memories n \
              WHERE n.seq > origin.seq AND n.seq <= origin.seq + {reach} AND n.namespace = origin.namespace AND {near_condition} \
              ORDER BY n.seq ASC LIMIT 1) \
         ) side \
         WHERE abs(side.occurred_at::numeric - origin.occurred_at::numeric) <= {window}::bigint \
         ORDER BY origin.position, side.side"
    );
    let mut found = vec![Vec::new(); ids.len()];
    for row in tx.query(&sql, &params.refs()).await? {
        let position: i64 = row.get(0);
        let id = MemoryId::parse(row.get::<_, &str>(1)).map_err(|error| Error::Corrupt(error.to_string()))?;
        if let Some(slot) = usize::try_from(position - 1).ok().and_then(|index| found.get_mut(index)) {
            slot.push(id);
        }
    }
    Ok(found)
}

/// Newest first, so that after a model change recent memories become findable first.
pub(crate) async fn missing_embeddings(tx: &Tx, model: &str, limit: usize) -> Result<Vec<Memory>> {
    let mut params = Params::default();
    let model = params.push(model.to_owned());
    let limit = params.push(sql_count(limit));
    let sql = format!(
        "SELECT {MEMORY_COLUMNS} FROM memories m \
         WHERE NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.memory_id = m.id AND e.model = {model}) \
         ORDER BY m.created_at DESC, m.id DESC LIMIT {limit}"
    );
    memories(tx, &sql, &params).await
}

/// Capture order is creation time, then id; unlike insertion order it survives export and import.
pub(crate) async fn export(tx: &Tx, offset: usize, limit: usize) -> Result<Vec<MemoryRecord>> {
    let rows = tx
        .query(
            &format!("SELECT {MEMORY_COLUMNS} FROM memories m ORDER BY m.created_at, m.id LIMIT $1 OFFSET $2"),
            &[&sql_count(limit), &sql_count(offset)],
        )
        .await?;
    let mut records = Vec::with_capacity(rows.len());
    for row in rows {
        let memory = decode_row(&row, 0)?;
        let history = history(tx, memory.id.as_str()).await?;
        let embedding = tx
            .query_opt(
                "SELECT model, vector::real[] FROM embeddings WHERE memory_id = $1 ORDER BY written DESC LIMIT 1",
                &[&memory.id.as_str()],
            )
            .await?
            .map(|row| Embedding { model: row.get(0), vector: row.get::<_, Vec<f32>>(1) });
        records.push(MemoryRecord { memory, history, embedding });
    }
    Ok(records)
}

pub(crate) async fn stats(tx: &Tx, location: &str, schema: &str) -> Result<StoreStats> {
    let mut stats = StoreStats { backend: "postgres".to_owned(), location: location.to_owned(), ..StoreStats::default() };
    // Every status and kind is listed, with zero where there are none.
    stats.by_status = Status::names().map(|name| (name.to_owned(), 0)).collect();
    stats.by_kind = MemoryKind::names().map(|name| (name.to_owned(), 0)).collect();
    for (status, count) in grouped(tx, "SELECT status, COUNT(*) FROM memories GROUP BY status").await? {
        stats.total += count;
        stats.by_status.insert(status, count);
    }
    let active = "FROM memories WHERE status = 'active'";
    stats.by_namespace = grouped(tx, &format!("SELECT namespace, COUNT(*) {active} GROUP BY namespace")).await?.into_iter().collect();
    stats.by_kind.extend(grouped(tx, &format!("SELECT kind, COUNT(*) {active} GROUP BY kind")).await?);
    stats.vectors_by_model = grouped(tx, "SELECT model, COUNT(*) FROM embeddings GROUP BY model").await?.into_iter().collect();
    let entries: i64 = tx.query_one("SELECT COUNT(*) FROM memories WHERE search IS NOT NULL", &[]).await?.get(0);
    stats.text_index_entries = u64::try_from(entries).unwrap_or(0);
    let size: Option<i64> = tx
        .query_one(
            "SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')",
            &[&schema],
        )
        .await?
        .get(0);
    stats.size_bytes = size.and_then(|size| u64::try_from(size).ok());
    Ok(stats)
}

async fn grouped(tx: &Tx, sql: &str) -> Result<Vec<(String, u64)>> {
    let rows = tx.query(sql, &[]).await?;
    Ok(rows.iter().map(|row| (row.get::<_, String>(0), u64::try_from(row.get::<_, i64>(1)).unwrap_or(0))).collect())
}

async fn memories(tx: &Tx, sql: &str, params: &Params) -> Result<Vec<Memory>> {
    let rows = tx.query(sql, &params.refs()).await?;
    rows.iter().map(|row| decode_row(row, 0)).collect()
}

async fn scored(tx: &Tx, sql: &str, params: &Params) -> Result<Vec<ScoredId>> {
    let rows = tx.query(sql, &params.refs()).await?;
    rows.iter()
        .map(|row| {
            let id = MemoryId::parse(row.get::<_, &str>(0)).map_err(|error| Error::Corrupt(error.to_string()))?;
            Ok(ScoredId { id, score: row.get(1) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_words_carry_no_syntax() {
        assert_eq!(query_words("NEAR(caroline | melanie) & !x:*"), ["near", "caroline", "melanie", "x"]);
        assert_eq!(query_words("C++ / C# & F#"), ["c", "f"]);
        assert!(query_words("\"*()\" —").is_empty());
        assert_eq!(query_words("Ünïcödé ünïcödé"), ["ünïcödé"]);
    }
}

/// The change mark: where the `memory_changes` sequence stands (see migration 5). Until its
/// first use the sequence reports 1 as its last value, as after the first; `is_called` tells
/// the two apart.
pub(crate) async fn change_mark(tx: &Tx) -> Result<String> {
    let row = tx.query_one("SELECT last_value, is_called FROM memory_changes", &[]).await?;
    Ok(format!("{}{}", row.get::<_, i64>(0), if row.get::<_, bool>(1) { "" } else { "-" }))
}
