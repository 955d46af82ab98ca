//! The graph: edges of the decision graph and a copy of every memory's links, in one table
//! walked with recursive SQL.

use kenning_core::decision::{Edge, Hop, Node};
use kenning_core::Memory;
use rusqlite::{Connection, params};

use crate::codec::time_key;
use crate::error::{Error, Result};

const LINK: &str = "link";
const GRAPH: &str = "graph";

/// Makes the `link` edges from `memory` match its links.
pub(crate) fn sync_links(conn: &Connection, memory: &Memory) -> Result<()> {
    let id = memory.id.as_str();
    conn.prepare_cached("DELETE FROM relations WHERE from_kind = 'memory' AND from_id = ? AND origin = 'link'")?
        .execute([id])?;
    let mut insert = conn.prepare_cached(
        "INSERT OR IGNORE INTO relations (from_kind, from_id, relation, to_kind, to_id, origin, created_at) \
         VALUES ('memory', ?, ?, 'urn', ?, ?, ?)",
    )?;
    for link in &memory.links {
        insert.execute(params![id, link.relation, link.target.to_string(), LINK, time_key(memory.updated_at)])?;
    }
    Ok(())
}

/// Adds graph edges; an edge that exists already is kept as it is.
pub(crate) fn insert_edges(conn: &Connection, edges: &[Edge]) -> Result<()> {
    let mut insert = conn.prepare_cached(
        "INSERT OR IGNORE INTO relations (from_kind, from_id, relation, to_kind, to_id, origin, created_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?)",
    )?;
    for edge in edges {
        insert.execute(params![
            edge.from.kind.as_str(),
            edge.from.id,
            edge.relation,
            edge.to.kind.as_str(),
            edge.to.id,
            GRAPH,
            time_key(edge.created_at)
        ])?;
    }
    Ok(())
}

/// Makes the graph edges that point at `node` exactly `edges`.
pub(crate) fn replace_edges_to(conn: &Connection, node: &Node, edges: &[Edge]) -> Result<()> {
    conn.prepare_cached("DELETE FROM relations WHERE to_kind = ? AND to_id = ? AND origin = 'graph'")?
        .execute(params![node.kind.as_str(), node.id])?;
    insert_edges(conn, edges)
}

/// Every edge reachable from `start`, each with the shortest distance of its source plus one.
/// `UNION` (not `UNION ALL`) and the depth bound keep cycles from running forever.
pub(crate) fn causal_chain(conn: &Connection, start: &Node, max_depth: u32) -> Result<Vec<Hop>> {
    let mut statement = conn.prepare_cached(
        "WITH RECURSIVE reach(kind, id, depth) AS ( \
             SELECT ?1, ?2, 0 \
             UNION \
             SELECT r.to_kind, r.to_id, reach.depth + 1 \
             FROM relations r JOIN reach ON r.from_kind = reach.kind AND r.from_id = reach.id \
             WHERE reach.depth < ?3 \
         ), \
         nearest(kind, id, depth) AS (SELECT kind, id, MIN(depth) FROM reach GROUP BY kind, id) \
         SELECT n.depth + 1, r.from_kind, r.from_id, r.relation, r.to_kind, r.to_id, r.created_at \
         FROM nearest n JOIN relations r ON r.from_kind = n.kind AND r.from_id = n.id \
         WHERE n.depth < ?3 \
         ORDER BY n.depth, r.created_at, r.from_id, r.relation, r.to_id",
    )?;
    let rows = statement.query_map(params![start.kind.as_str(), start.id, max_depth], |row| {
        Ok((row.get::<_, u32>(0)?, edge_columns(row, 1)?))
    })?;
    rows.map(|row| {
        let (depth, columns) = row?;
        Ok(Hop { depth, edge: edge(columns)? })
    })
    .collect()
}

pub(crate) fn edges_to(conn: &Connection, node: &Node) -> Result<Vec<Edge>> {
    let mut statement = conn.prepare_cached(
        "SELECT from_kind, from_id, relation, to_kind, to_id, created_at FROM relations \
         WHERE to_kind = ? AND to_id = ? ORDER BY created_at, from_id, relation",
    )?;
    let rows = statement.query_map(params![node.kind.as_str(), node.id], |row| edge_columns(row, 0))?;
    rows.map(|row| edge(row?)).collect()
}

type EdgeColumns = (String, String, String, String, String, String);

fn edge_columns(row: &rusqlite::Row, first: usize) -> rusqlite::Result<EdgeColumns> {
    Ok((row.get(first)?, row.get(first + 1)?, row.get(first + 2)?, row.get(first + 3)?, row.get(first + 4)?, row.get(first + 5)?))
}

fn edge((from_kind, from_id, relation, to_kind, to_id, created_at): EdgeColumns) -> Result<Edge> {
    Edge::from_columns(&from_kind, from_id, relation, &to_kind, to_id, &created_at).map_err(Error::Corrupt)
}
