//! How vectors are stored: one row per memory and model, the vector a BLOB of little-endian
//! `f32`. Searching them is the in-memory index's work (see `search`).

use kenning_core::Embedding;
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Error, Result};

pub(crate) fn encode(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|value| value.to_le_bytes()).collect()
}

pub(crate) fn decode(blob: &[u8]) -> Result<Vec<f32>> {
    if !blob.len().is_multiple_of(4) {
        return Err(Error::Corrupt(format!("a stored vector is {} bytes, not a whole number of f32s", blob.len())));
    }
    Ok(blob.chunks_exact(4).map(|bytes| f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])).collect())
}

/// Stores `embedding` as the vector of `id` for its model, replacing an earlier one.
pub(crate) fn put(conn: &Connection, id: &str, embedding: &Embedding) -> Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO embeddings (memory_id, model, dim, vector) VALUES (?, ?, ?, ?)")?
        .execute(params![id, embedding.model, embedding.vector.len() as i64, encode(&embedding.vector)])?;
    Ok(())
}

/// Drops every vector of `id`, whichever model made it.
pub(crate) fn delete_all(conn: &Connection, id: &str) -> Result<()> {
    conn.prepare_cached("DELETE FROM embeddings WHERE memory_id = ?")?.execute([id])?;
    Ok(())
}

/// The vector of `id` written last, if it has any.
pub(crate) fn latest(conn: &Connection, id: &str) -> Result<Option<Embedding>> {
    let row = conn
        .prepare_cached("SELECT model, vector FROM embeddings WHERE memory_id = ? ORDER BY rowid DESC LIMIT 1")?
        .query_row([id], |row| Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?)))
        .optional()?;
    row.map(|(model, blob)| Ok(Embedding { model, vector: decode(&blob)? })).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip() {
        let vector: Vec<f32> = (0..19).map(|n| n as f32 * 0.25 - 2.0).collect();
        assert_eq!(decode(&encode(&vector)).unwrap(), vector);
    }

    #[test]
    fn a_truncated_blob_is_reported() {
        assert!(decode(&[0, 0, 128]).is_err());
    }
}
