//! A wheel (PEP 427) holding one script: the zip archive, its `WHEEL` and `RECORD` files.
//!
//! The zip is written here, deflated with flate2 (already a dependency of the workspace): the
//! `zip` crate's deflate feature would change the features of the `zip` build candle uses and so
//! rebuild the embedder's whole dependency stack in every workspace build. The format needed is
//! small: local headers, a central directory and its end record, no ZIP64 (every entry and the
//! archive stay under 4 GiB, which is checked).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use flate2::Compression;
use flate2::write::DeflateEncoder;
use sha2::{Digest, Sha256};

use super::VERSION;

/// Writes `kenning-<version>-py3-none-<platform_tag>.whl` into `out` and returns its path.
pub fn write(
    out: &Path,
    metadata: &str,
    platform_tag: &str,
    script_name: &str,
    script: &[u8],
    level: Compression,
) -> Result<PathBuf> {
    let dist_info = format!("kenning-{VERSION}.dist-info");
    let tags: String = platform_tag
        .split('.')
        .map(|platform| format!("Tag: py3-none-{platform}\n"))
        .collect();
    let wheel =
        format!("Wheel-Version: 1.0\nGenerator: cargo xtask dist\nRoot-Is-Purelib: false\n{tags}");
    let entries: Vec<(String, u32, &[u8])> = vec![
        (
            format!("kenning-{VERSION}.data/scripts/{script_name}"),
            0o755,
            script,
        ),
        (format!("{dist_info}/METADATA"), 0o644, metadata.as_bytes()),
        (format!("{dist_info}/WHEEL"), 0o644, wheel.as_bytes()),
    ];
    let mut record = String::new();
    for (name, _, contents) in &entries {
        let digest = URL_SAFE_NO_PAD.encode(Sha256::digest(contents));
        record.push_str(&format!("{name},sha256={digest},{}\n", contents.len()));
    }
    let record_name = format!("{dist_info}/RECORD");
    record.push_str(&format!("{record_name},,\n"));

    let mut zip = ZipWriter {
        level,
        ..ZipWriter::default()
    };
    for (name, mode, contents) in &entries {
        zip.add(name, *mode, contents)?;
    }
    zip.add(&record_name, 0o644, record.as_bytes())?;
    let path = out.join(format!("kenning-{VERSION}-py3-none-{platform_tag}.whl"));
    fs::write(&path, zip.finish()?).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// A zip archive built in memory, every entry deflated and dated 1980-01-01 so that two runs
/// write the same bytes.
#[derive(Default)]
struct ZipWriter {
    level: Compression,
    bytes: Vec<u8>,
    central_directory: Vec<u8>,
    entries: u16,
}

/// The DOS date of 1980-01-01, the earliest a zip can say.
const DOS_DATE: u16 = (1 << 5) | 1;
/// Version 2.0 of the format: deflate.
const VERSION_NEEDED: u16 = 20;
/// "Made by" Unix (3 in the high byte), so that readers take the mode from the external attributes.
const MADE_BY_UNIX: u16 = (3 << 8) | VERSION_NEEDED;
const DEFLATE: u16 = 8;

impl ZipWriter {
    fn add(&mut self, name: &str, mode: u32, contents: &[u8]) -> Result<()> {
        let mut encoder = DeflateEncoder::new(Vec::new(), self.level);
        encoder.write_all(contents)?;
        let compressed = encoder.finish()?;
        let crc = crc32fast::hash(contents);
        let offset =
            u32::try_from(self.bytes.len()).context("the wheel passed 4 GiB, which needs ZIP64")?;
        let size =
            u32::try_from(contents.len()).context("an entry of 4 GiB or more needs ZIP64")?;
        let compressed_size = compressed.len() as u32;
        let name_len = u16::try_from(name.len()).context("an entry name is too long")?;

        let local = &mut self.bytes;
        local.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        for field in [VERSION_NEEDED, 0, DEFLATE, 0, DOS_DATE] {
            local.extend_from_slice(&field.to_le_bytes());
        }
        for field in [crc, compressed_size, size] {
            local.extend_from_slice(&field.to_le_bytes());
        }
        local.extend_from_slice(&name_len.to_le_bytes());
        local.extend_from_slice(&0u16.to_le_bytes());
        local.extend_from_slice(name.as_bytes());
        local.extend_from_slice(&compressed);

        let central = &mut self.central_directory;
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        for field in [MADE_BY_UNIX, VERSION_NEEDED, 0, DEFLATE, 0, DOS_DATE] {
            central.extend_from_slice(&field.to_le_bytes());
        }
        for field in [crc, compressed_size, size] {
            central.extend_from_slice(&field.to_le_bytes());
        }
        // Name length, then no extra field, no comment, disk 0, no internal attributes.
        for field in [name_len, 0, 0, 0, 0] {
            central.extend_from_slice(&field.to_le_bytes());
        }
        central.extend_from_slice(&((0o100_000 | mode) << 16).to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
        self.entries += 1;
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<u8>> {
        let offset =
            u32::try_from(self.bytes.len()).context("the wheel passed 4 GiB, which needs ZIP64")?;
        let size = self.central_directory.len() as u32;
        ensure!(
            offset.checked_add(size).is_some(),
            "the wheel passed 4 GiB, which needs ZIP64"
        );
        self.bytes.append(&mut self.central_directory);
        self.bytes.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
        for field in [0, 0, self.entries, self.entries] {
            self.bytes.extend_from_slice(&field.to_le_bytes());
        }
        self.bytes.extend_from_slice(&size.to_le_bytes());
        self.bytes.extend_from_slice(&offset.to_le_bytes());
        self.bytes.extend_from_slice(&0u16.to_le_bytes());
        Ok(self.bytes)
    }
}
