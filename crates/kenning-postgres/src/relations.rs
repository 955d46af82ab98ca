//! The graph: edges of the decision graph and a copy of every memory's links, in one table
//! walked with recursive SQL.

use crate::sql::Tx;
use kenning_core::Memory;
use kenning_core::decision::{Edge, Hop, Node};
use tokio_postgres::Row;

use crate::codec::time_key;
use crate::error::{Error, Result};

const LINK: &str = "link";
const GRAPH: &str = "graph";

/// Makes the `link` edges from `memory` match its links.
pub(crate) async fn sync_links(tx: &Tx, memory: &Memory) -> Result<()> {
    let id = memory.id.as_str();
    tx.execute("DELETE FROM relations WHERE from_kind = 'memory' AND from_id = $1 AND origin = 'link'", &[&id]).await?;
    for link in &memory.links {
        tx.execute(
            "INSERT INTO relations (from_kind, from_id, relation, to_kind, to_id, origin, created_at) \
             VALUES ('memory', $1, $2, 'urn', $3, $4, $5) ON CONFLICT DO NOTHING",
            &[&id, &link.relation, &link.target.to_string(), &LINK, &time_key(memory.updated_at)],
        )
        .await?;
    }
    Ok(())
}

/// Adds graph edges; an edge that exists already is kept as it is.
pub(crate) async fn insert_edges(tx: &Tx, edges: &[Edge]) -> Result<()> {
    for edge in edges {
        tx.execute(
            "INSERT INTO relations (from_kind, from_id, relation, to_kind, to_id, origin, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
            &[
                &edge.from.kind.as_str(),
                &edge.from.id,
                &edge.relation,
                &edge.to.kind.as_str(),
                &edge.to.id,
                &GRAPH,
                &time_key(edge.created_at),
            ],
        )
        .await?;
    }
    Ok(())
}

/// Makes the graph edges that point at `node` exactly `edges`.
pub(crate) async fn replace_edges_to(tx: &Tx, node: &Node, edges: &[Edge]) -> Result<()> {
    tx.execute(
        "DELETE FROM relations WHERE to_kind = $1 AND to_id = $2 AND origin = 'graph'",
        &[&node.kind.as_str(), &node.id],
    )
    .await?;
    insert_edges(tx, edges).await
}

/// Every edge reachable from `start`, each with the shortest distance of its source plus one.
/// `UNION` (not `UNION ALL`) and the depth bound keep cycles from running forever.
pub(crate) async fn causal_chain(tx: &Tx, start: &Node, max_depth: u32) -> Result<Vec<Hop>> {
    let max_depth = i32::try_from(max_depth).unwrap_or(i32::MAX);
    let rows = tx
        .query(
            "WITH RECURSIVE reach(kind, id, depth) AS ( \
                 SELECT $1::text, $2::text, 0 \
                 UNION \
                 SELECT r.to_kind, r.to_id, reach.depth + 1 \
                 FROM relations r JOIN reach ON r.from_kind = reach.kind AND r.from_id = reach.id \
                 WHERE reach.depth < $3 \
             ), \
             nearest(kind, id, depth) AS (SELECT kind, id, MIN(depth) FROM reach GROUP BY kind, id) \
             SELECT n.depth + 1, r.from_kind, r.from_id, r.relation, r.to_kind, r.to_id, r.created_at \
             FROM nearest n JOIN relations r ON r.from_kind = n.kind AND r.from_id = n.id \
             WHERE n.depth < $3 \
             ORDER BY n.depth, r.created_at, r.from_id, r.relation, r.to_id",
            &[&start.kind.as_str(), &start.id, &max_depth],
        )
        .await?;
    rows.iter()
        .map(|row| {
            let depth: i32 = row.get(0);
            Ok(Hop { depth: u32::try_from(depth).unwrap_or(0), edge: edge(row, 1)? })
        })
        .collect()
}

pub(crate) async fn edges_to(tx: &Tx, node: &Node) -> Result<Vec<Edge>> {
    let rows = tx
        .query(
            "SELECT from_kind, from_id, relation, to_kind, to_id, created_at FROM relations \
             WHERE to_kind = $1 AND to_id = $2 ORDER BY created_at, from_id, relation",
            &[&node.kind.as_str(), &node.id],
        )
        .await?;
    rows.iter().map(|row| edge(row, 0)).collect()
}

fn edge(row: &Row, first: usize) -> Result<Edge> {
    Edge::from_columns(row.get(first), row.get(first + 1), row.get(first + 2), row.get(first + 3), row.get(first + 4), row.get(first + 5))
        .map_err(Error::Corrupt)
}
