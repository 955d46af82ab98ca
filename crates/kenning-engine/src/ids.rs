//! Memory ids: time-ordered and collision-resistant without coordination between processes.
//! Session ids are made the same way.

use chrono::{DateTime, Utc};

const CROCKFORD: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// A ULID in lower-case Crockford base32: 48 bits of milliseconds then 80 random bits, so ids
/// sort by creation time and two writers in the same millisecond do not collide in practice.
pub fn new_memory_id(now: DateTime<Utc>) -> String {
    let millis = now.timestamp_millis().max(0) as u128 & ((1 << 48) - 1);
    let random = (u128::from(fastrand::u64(..)) << 16 | u128::from(fastrand::u16(..))) & ((1 << 80) - 1);
    let mut value = millis << 80 | random;
    let mut id = [0u8; 26];
    for slot in id.iter_mut().rev() {
        *slot = CROCKFORD[(value & 31) as usize];
        value >>= 5;
    }
    String::from_utf8(id.to_vec()).expect("alphabet is ASCII")
}

/// An id for a session of a front end (an MCP connection, say), recorded as the `session_id`
/// of what it captures: `{front_end}-` then a ULID.
pub fn new_session_id(front_end: &str, now: DateTime<Utc>) -> String {
    format!("{front_end}-{}", new_memory_id(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_by_time_and_differ() {
        let early = new_memory_id(DateTime::from_timestamp_millis(1_000).unwrap());
        let late = new_memory_id(DateTime::from_timestamp_millis(2_000).unwrap());
        assert!(early < late);
        assert_eq!(early.len(), 26);
        assert_ne!(new_memory_id(Utc::now()), new_memory_id(Utc::now()));
    }
}
