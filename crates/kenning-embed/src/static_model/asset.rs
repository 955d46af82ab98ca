//! The file format of a static embedding model: one byte buffer read in place.
//!
//! Everything is little-endian. A fixed header comes first:
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 8 | magic `KNSTATIC` |
//! | 8 | 4 | format version (1) |
//! | 12 | 4 | dimensions `d` |
//! | 16 | 4 | vocabulary size `n` |
//! | 20 | 4 | id of the unknown-word token (`[UNK]`) |
//! | 24 | 4 | slots `s` of the token hash table, a power of two |
//! | 28 | 4 | length of the model name in bytes |
//! | 32 | 32 | sha256 of the source model's weights file |
//! | 64 | 32 | sha256 of everything after the header (the body) |
//! | 96 | | the model name, UTF-8 |
//!
//! The body follows the name, section after section with no padding:
//!
//! 1. scales: `n` × f32, the factor of each token's row (its weight and quantisation step);
//! 2. rows: `n` × `d` × i8, each token's vector is `scale × row`;
//! 3. token offsets: `n + 1` × u32 into the token text, token `i` being `text[off[i]..off[i+1]]`;
//! 4. token text: the vocabulary's UTF-8 strings back to back;
//! 5. hash table: `s` × u32, open addressing with linear probing on the FNV-1a hash of a token's
//!    bytes; a slot holds token id + 1, 0 when empty.
//!
//! Values are read where they lie (f32 and u32 with `from_le_bytes`, which needs no alignment),
//! so opening a model costs a header check and no decoding, however large the vocabulary.

use std::ops::Range;

use sha2::{Digest, Sha256};

pub const MAGIC: &[u8; 8] = b"KNSTATIC";
pub const FORMAT_VERSION: u32 = 1;
const HEADER_LEN: usize = 96;

/// What a static model holds, in the form the distillation produces and [`encode`] writes.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticModelParts {
    /// A descriptive name, such as `all-MiniLM-L6-v2-static-256d`; the embedder's model id adds
    /// a prefix of the body's hash so that every change to the vectors changes the id.
    pub name: String,
    /// sha256 of the weights the model was distilled from.
    pub source_sha256: [u8; 32],
    pub dimensions: usize,
    /// The vocabulary in id order, WordPiece continuation pieces with their `##` prefix.
    pub tokens: Vec<String>,
    pub unk_id: u32,
    /// One factor per token.
    pub scales: Vec<f32>,
    /// `tokens.len() × dimensions` quantised components, row after row.
    pub rows: Vec<i8>,
}

/// Where each part of a validated model lies in its bytes.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub name: Range<usize>,
    pub dimensions: usize,
    pub vocab_size: usize,
    pub unk_id: u32,
    /// The length in bytes of the longest token.
    pub longest_token: usize,
    pub source_sha256: [u8; 32],
    pub body_sha256: [u8; 32],
    scales: usize,
    rows: usize,
    offsets: usize,
    text: usize,
    slots: usize,
    slot_mask: usize,
}

/// Serialises a model; the output is a pure function of the parts, byte for byte.
///
/// Panics if the parts disagree with one another (rows or scales of the wrong length, a token
/// listed twice, an unknown-word id out of range): they come from the distillation, not from
/// users, and such a mismatch is a bug there.
pub fn encode(parts: &StaticModelParts) -> Vec<u8> {
    let vocab_size = parts.tokens.len();
    assert_eq!(parts.scales.len(), vocab_size, "one scale per token");
    assert_eq!(parts.rows.len(), vocab_size * parts.dimensions, "one row of `dimensions` per token");
    assert!((parts.unk_id as usize) < vocab_size, "the unknown-word token is in the vocabulary");

    let mut body = Vec::new();
    for scale in &parts.scales {
        body.extend_from_slice(&scale.to_le_bytes());
    }
    body.extend(parts.rows.iter().map(|&value| value as u8));
    let mut offset = 0u32;
    body.extend_from_slice(&offset.to_le_bytes());
    for token in &parts.tokens {
        offset += u32::try_from(token.len()).expect("a token is short");
        body.extend_from_slice(&offset.to_le_bytes());
    }
    for token in &parts.tokens {
        body.extend_from_slice(token.as_bytes());
    }
    let slot_count = (2 * vocab_size).next_power_of_two();
    let mut slots = vec![0u32; slot_count];
    for (id, token) in parts.tokens.iter().enumerate() {
        let mut slot = fnv1a(token.as_bytes()) as usize & (slot_count - 1);
        while slots[slot] != 0 {
            assert_ne!(&parts.tokens[slots[slot] as usize - 1], token, "token {token:?} is listed twice");
            slot = (slot + 1) & (slot_count - 1);
        }
        slots[slot] = id as u32 + 1;
    }
    for slot in slots {
        body.extend_from_slice(&slot.to_le_bytes());
    }

    let mut bytes = Vec::with_capacity(HEADER_LEN + parts.name.len() + body.len());
    bytes.extend_from_slice(MAGIC);
    for field in [FORMAT_VERSION, parts.dimensions as u32, vocab_size as u32, parts.unk_id, slot_count as u32, parts.name.len() as u32] {
        bytes.extend_from_slice(&field.to_le_bytes());
    }
    bytes.extend_from_slice(&parts.source_sha256);
    bytes.extend_from_slice(&Sha256::digest(&body));
    bytes.extend_from_slice(parts.name.as_bytes());
    bytes.extend_from_slice(&body);
    bytes
}

/// The 32-bit FNV-1a hash of `prefix` followed by `rest`, without joining them.
pub(crate) fn fnv1a_parts(prefix: &[u8], rest: &[u8]) -> u32 {
    prefix.iter().chain(rest).fold(0x811c_9dc5, |hash, &byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193))
}

fn fnv1a(bytes: &[u8]) -> u32 {
    fnv1a_parts(&[], bytes)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

impl Layout {
    /// Checks a model's bytes and finds its sections. The checks are what every later read
    /// relies on to stay in bounds: the sizes add up, offsets rise within the text, the text is
    /// UTF-8, and every hash slot names a real token. The body's hash is not recomputed here,
    /// since that would read every byte at start-up; tests check it for the built-in model.
    pub fn parse(bytes: &[u8]) -> Result<Layout, String> {
        if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
            return Err("it is not a kenning static model (the magic bytes are missing)".into());
        }
        let version = u32_at(bytes, 8);
        if version != FORMAT_VERSION {
            return Err(format!("format version {version} is not the version {FORMAT_VERSION} this build reads"));
        }
        let dimensions = u32_at(bytes, 12) as usize;
        let vocab_size = u32_at(bytes, 16) as usize;
        let unk_id = u32_at(bytes, 20);
        let slot_count = u32_at(bytes, 24) as usize;
        let name_len = u32_at(bytes, 28) as usize;
        if dimensions == 0 || vocab_size == 0 || unk_id as usize >= vocab_size {
            return Err(format!("the header is inconsistent: {dimensions} dimensions, {vocab_size} tokens, unknown-word id {unk_id}"));
        }
        if !slot_count.is_power_of_two() || slot_count <= vocab_size {
            return Err(format!("the token table has {slot_count} slots for {vocab_size} tokens"));
        }
        let name = HEADER_LEN..HEADER_LEN + name_len;
        let scales = name.end;
        let rows = scales + 4 * vocab_size;
        let offsets = rows + dimensions * vocab_size;
        let text = offsets + 4 * (vocab_size + 1);
        if bytes.len() < text {
            return Err(format!("it is {} bytes long, too short for its header", bytes.len()));
        }
        let text_len = u32_at(bytes, text - 4) as usize;
        let slots = text + text_len;
        let expected = slots + 4 * slot_count;
        if bytes.len() != expected {
            return Err(format!("it is {} bytes long where its header implies {expected}", bytes.len()));
        }
        let (Ok(_), Ok(token_text)) = (std::str::from_utf8(&bytes[name.clone()]), std::str::from_utf8(&bytes[text..slots])) else {
            return Err("its model name or token text is not UTF-8".into());
        };
        let (mut previous, mut longest_token) = (0, 0);
        for id in 0..=vocab_size {
            let offset = u32_at(bytes, offsets + 4 * id) as usize;
            if offset < previous || (id == 0 && offset != 0) || !token_text.is_char_boundary(offset) {
                return Err(format!("the offset of token {id} is out of order"));
            }
            longest_token = longest_token.max(offset - previous);
            previous = offset;
        }
        for slot in 0..slot_count {
            if u32_at(bytes, slots + 4 * slot) as usize > vocab_size {
                return Err(format!("hash slot {slot} names a token beyond the vocabulary"));
            }
        }
        Ok(Layout {
            name,
            dimensions,
            vocab_size,
            unk_id,
            longest_token,
            source_sha256: bytes[32..64].try_into().expect("32 bytes"),
            body_sha256: bytes[64..96].try_into().expect("32 bytes"),
            scales,
            rows,
            offsets,
            text,
            slots,
            slot_mask: slot_count - 1,
        })
    }

    /// The bytes the body hash covers.
    #[cfg(test)]
    pub fn body<'a>(&self, bytes: &'a [u8]) -> &'a [u8] {
        &bytes[self.scales..]
    }

    pub fn scale(&self, bytes: &[u8], id: u32) -> f32 {
        f32::from_le_bytes(bytes[self.scales + 4 * id as usize..][..4].try_into().expect("four bytes"))
    }

    /// A token's quantised row; the bytes are i8 components.
    pub fn row<'a>(&self, bytes: &'a [u8], id: u32) -> &'a [u8] {
        &bytes[self.rows + self.dimensions * id as usize..][..self.dimensions]
    }

    pub fn token<'a>(&self, bytes: &'a [u8], id: u32) -> &'a [u8] {
        let start = u32_at(bytes, self.offsets + 4 * id as usize) as usize;
        let end = u32_at(bytes, self.offsets + 4 * (id as usize + 1)) as usize;
        &bytes[self.text + start..self.text + end]
    }

    /// The id of the token spelled `prefix` followed by `rest`, if the vocabulary has it.
    pub fn lookup(&self, bytes: &[u8], prefix: &[u8], rest: &[u8]) -> Option<u32> {
        let mut slot = fnv1a_parts(prefix, rest) as usize & self.slot_mask;
        loop {
            let entry = u32_at(bytes, self.slots + 4 * slot);
            if entry == 0 {
                return None;
            }
            let token = self.token(bytes, entry - 1);
            // Comparing one byte first spares a call to compare the whole token with most of the
            // same length that share its slot's neighbourhood.
            if token.len() == prefix.len() + rest.len()
                && token.get(prefix.len()) == rest.first()
                && token.starts_with(prefix)
                && token.ends_with(rest)
            {
                return Some(entry - 1);
            }
            slot = (slot + 1) & self.slot_mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts() -> StaticModelParts {
        StaticModelParts {
            name: "tiny".into(),
            source_sha256: [7; 32],
            dimensions: 2,
            tokens: ["[UNK]", "play", "##ing", "é"].map(String::from).to_vec(),
            unk_id: 0,
            scales: vec![0.0, 0.5, 0.25, 1.0],
            rows: vec![0, 0, 127, -127, 1, 2, -3, 4],
        }
    }

    #[test]
    fn encoded_parts_read_back() {
        let bytes = encode(&parts());
        let layout = Layout::parse(&bytes).expect("valid");
        assert_eq!((layout.dimensions, layout.vocab_size, layout.unk_id), (2, 4, 0));
        assert_eq!(&bytes[layout.name.clone()], b"tiny");
        assert_eq!(layout.source_sha256, [7; 32]);
        assert_eq!(layout.body_sha256.as_slice(), Sha256::digest(layout.body(&bytes)).as_slice());
        assert_eq!(layout.scale(&bytes, 2), 0.25);
        assert_eq!(layout.row(&bytes, 1), &[127, (-127i8) as u8]);
        assert_eq!(layout.token(&bytes, 3), "é".as_bytes());
        assert_eq!(layout.lookup(&bytes, b"##", b"ing"), Some(2));
        assert_eq!(layout.lookup(&bytes, b"", b"play"), Some(1));
        assert_eq!(layout.lookup(&bytes, b"", b"ing"), None);
        assert_eq!(layout.lookup(&bytes, b"", b"plays"), None);
    }

    #[test]
    fn damaged_bytes_are_refused() {
        let bytes = encode(&parts());
        assert!(Layout::parse(&bytes[..bytes.len() - 1]).unwrap_err().contains("bytes long"));
        assert!(Layout::parse(b"not a model at all, clearly not one of ours, much too short").is_err());
        let mut wrong_version = bytes.clone();
        wrong_version[8] = 9;
        assert!(Layout::parse(&wrong_version).unwrap_err().contains("version 9"));
        let mut bad_slot = bytes.clone();
        let last = bad_slot.len() - 4;
        bad_slot[last..].copy_from_slice(&99u32.to_le_bytes());
        assert!(Layout::parse(&bad_slot).unwrap_err().contains("beyond the vocabulary"));
    }
}
