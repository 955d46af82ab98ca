//! The hard delete of everything one author wrote (the data-rights purge), in one transaction
//! the caller commits, or rolls back for a dry run. Full-text and vector search run on the
//! tables themselves, so deleting the rows is all the search side needs.

use crate::sql::Tx;
use kenning_core::PurgeCounts;
use kenning_core::decision::purged_nodes;

use crate::error::Result;

pub(crate) async fn purge_author(tx: &Tx, author: &str) -> Result<PurgeCounts> {
    let mut counts = PurgeCounts::default();
    for id in authored(tx, author).await? {
        remove(tx, &id, &mut counts).await?;
    }
    Ok(counts)
}

/// The memories whose current record or any superseded version names `author`: the same
/// selection as the author's export.
pub(crate) async fn authored(tx: &Tx, author: &str) -> Result<Vec<String>> {
    let rows = tx
        .query(
            "SELECT id FROM memories WHERE body::jsonb->>'author' = $1 \
             UNION SELECT memory_id FROM memory_versions WHERE body::jsonb->>'author' = $1",
            &[&author],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

async fn remove(tx: &Tx, id: &str, counts: &mut PurgeCounts) -> Result<()> {
    counts.memories += tx.execute("DELETE FROM memories WHERE id = $1", &[&id]).await?;
    counts.decisions += tx.execute("DELETE FROM decisions WHERE id = $1", &[&id]).await?;
    let signals: Vec<String> = tx
        .query("DELETE FROM decision_signals WHERE decision_id = $1 RETURNING id", &[&id])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let outcomes: Vec<String> = tx
        .query("DELETE FROM decision_outcomes WHERE decision_id = $1 RETURNING id", &[&id])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    counts.signals += signals.len() as u64;
    counts.outcomes += outcomes.len() as u64;
    tx.execute("DELETE FROM decision_files WHERE decision_id = $1", &[&id]).await?;
    for node in purged_nodes(id, &signals, &outcomes) {
        counts.edges += tx
            .execute(
                "DELETE FROM relations WHERE (from_kind = $1 AND from_id = $2) OR (to_kind = $1 AND to_id = $2)",
                &[&node.kind.as_str(), &node.id],
            )
            .await?;
    }
    counts.versions += tx.execute("DELETE FROM memory_versions WHERE memory_id = $1", &[&id]).await?;
    counts.vectors += tx.execute("DELETE FROM embeddings WHERE memory_id = $1", &[&id]).await?;
    Ok(())
}
