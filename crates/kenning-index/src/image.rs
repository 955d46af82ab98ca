//! The persisted form of an index: an image that a later process reads in place.
//!
//! Layout, all integers little-endian:
//!
//! ```text
//! 0   magic            8 bytes  "KNGIDX\r\n" (the line end catches text-mode mangling)
//! 8   format version   u32      FORMAT_VERSION; any other version is refused
//! 12  byte-order mark  u32      0x01020304, refused when read back in another byte order
//! 16  total length     u64      the image's length in bytes; a truncated image is refused
//! 24  table offset     u64      where the section table starts
//! 32  section count    u32
//! 36  stamp length     u32
//! 40  header checksum  u32      CRC-32 of bytes 0..64 + stamp, with this field and the next zero
//! 44  body checksum    u32      CRC-32 of everything after the stamp
//! 48  reserved         16 bytes zero
//! 64  stamp            the owner's bytes (which store, which change), opaque to the index
//!     sections         each starting at a multiple of 64, in the order the index writes them
//!     table            per section: offset u64, length in bytes u64
//! ```
//!
//! Sections are flat arrays of plain values, so a reader maps them in place; nothing is decoded
//! when an image is opened beyond the small tables (names, models) that are hashed.

use std::io::{self, Seek, SeekFrom, Write};

use bytemuck::Pod;

use crate::column::{Column, ImageBytes};

pub const MAGIC: [u8; 8] = *b"KNGIDX\r\n";
/// Bumped whenever the layout of any section changes; an image of another version is rebuilt.
pub const FORMAT_VERSION: u32 = 5;
const BYTE_ORDER_MARK: u32 = 0x0102_0304;
const HEADER_LEN: usize = 64;
const SECTION_ALIGN: u64 = 64;

/// Why an image was not read. Every case means the same to a store: rebuild the index.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("not an index image (bad magic)")]
    Magic,
    #[error("index image format {found}, this build reads {supported}")]
    Version { found: u32, supported: u32 },
    #[error("index image written in another byte order")]
    ByteOrder,
    #[error("index image truncated: {found} bytes, the header says {expected}")]
    Truncated { found: u64, expected: u64 },
    #[error("index image checksum mismatch in the {0}")]
    Checksum(&'static str),
    #[error("index image is inconsistent: {0}")]
    Invalid(String),
    #[error("writing the index image: {0}")]
    Write(#[from] io::Error),
}

pub(crate) fn invalid(what: impl Into<String>) -> ImageError {
    ImageError::Invalid(what.into())
}

/// Writes sections one after another, then the table, then the header over the space left for it.
pub(crate) struct ImageWriter<'w, W: Write + Seek> {
    out: &'w mut W,
    position: u64,
    stamp: Vec<u8>,
    body: crc32fast::Hasher,
    sections: Vec<(u64, u64)>,
    open_section: Option<u64>,
}

impl<'w, W: Write + Seek> ImageWriter<'w, W> {
    pub fn new(out: &'w mut W, stamp: &[u8]) -> Result<Self, ImageError> {
        u32::try_from(stamp.len()).map_err(|_| invalid("stamp longer than 4 GiB"))?;
        out.seek(SeekFrom::Start(0))?;
        out.write_all(&[0u8; HEADER_LEN])?;
        out.write_all(stamp)?;
        Ok(ImageWriter {
            out,
            position: (HEADER_LEN + stamp.len()) as u64,
            stamp: stamp.to_vec(),
            body: crc32fast::Hasher::new(),
            sections: Vec::new(),
            open_section: None,
        })
    }

    fn raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.body.update(bytes);
        self.position += bytes.len() as u64;
        Ok(())
    }

    fn pad(&mut self) -> io::Result<()> {
        let padding = (SECTION_ALIGN - self.position % SECTION_ALIGN) % SECTION_ALIGN;
        self.raw(&[0u8; SECTION_ALIGN as usize][..padding as usize])
    }

    /// Starts a section written in parts with [`ImageWriter::part`].
    pub fn begin(&mut self) -> io::Result<()> {
        self.pad()?;
        self.open_section = Some(self.position);
        Ok(())
    }

    pub fn part<T: Pod>(&mut self, values: &[T]) -> io::Result<()> {
        self.raw(bytemuck::cast_slice(values))
    }

    pub fn end(&mut self) {
        if let Some(start) = self.open_section.take() {
            self.sections.push((start, self.position - start));
        }
    }

    /// A whole section at once.
    pub fn section<T: Pod>(&mut self, values: &[T]) -> io::Result<()> {
        self.begin()?;
        self.part(values)?;
        self.end();
        Ok(())
    }

    /// Strings as two sections: the end offset of each, and their bytes.
    pub fn strings<'s>(&mut self, strings: impl Iterator<Item = &'s str> + Clone) -> io::Result<()> {
        let mut end = 0u64;
        let ends: Vec<u64> = strings
            .clone()
            .map(|text| {
                end += text.len() as u64;
                end
            })
            .collect();
        self.section(&ends)?;
        self.begin()?;
        for text in strings {
            self.part(text.as_bytes())?;
        }
        self.end();
        Ok(())
    }

    pub fn finish(mut self) -> Result<(), ImageError> {
        self.pad()?;
        let table_offset = self.position;
        let table: Vec<u64> = self.sections.iter().flat_map(|(offset, len)| [*offset, *len]).collect();
        self.raw(bytemuck::cast_slice(&table))?;
        let total = self.position;
        let count = u32::try_from(self.sections.len()).map_err(|_| invalid("too many sections"))?;
        let mut header = [0u8; HEADER_LEN];
        header[0..8].copy_from_slice(&MAGIC);
        header[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&BYTE_ORDER_MARK.to_le_bytes());
        header[16..24].copy_from_slice(&total.to_le_bytes());
        header[24..32].copy_from_slice(&table_offset.to_le_bytes());
        header[32..36].copy_from_slice(&count.to_le_bytes());
        header[36..40].copy_from_slice(&(self.stamp.len() as u32).to_le_bytes());
        header[44..48].copy_from_slice(&self.body.finalize().to_le_bytes());
        let checksum = header_checksum(&header, &self.stamp);
        header[40..44].copy_from_slice(&checksum.to_le_bytes());
        self.out.seek(SeekFrom::Start(0))?;
        self.out.write_all(&header)?;
        self.out.flush()?;
        Ok(())
    }
}

/// The fixed fields of an image, read without checking the body.
pub struct ImageHeader<'a> {
    pub stamp: &'a [u8],
    total: u64,
    table_offset: u64,
    sections: u32,
    body_checksum: u32,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from(u32_at(bytes, at)) | (u64::from(u32_at(bytes, at + 4)) << 32)
}

/// The header and stamp of `bytes`, checked: magic, version, byte order, length and the
/// header's own checksum. The body is not read, so this is cheap on an image of any size.
pub fn read_header(bytes: &[u8]) -> Result<ImageHeader<'_>, ImageError> {
    if bytes.len() < HEADER_LEN {
        return Err(if bytes.starts_with(&MAGIC[..bytes.len().min(8)]) {
            ImageError::Truncated { found: bytes.len() as u64, expected: HEADER_LEN as u64 }
        } else {
            ImageError::Magic
        });
    }
    if bytes[0..8] != MAGIC {
        return Err(ImageError::Magic);
    }
    let version = u32_at(bytes, 8);
    if version != FORMAT_VERSION {
        return Err(ImageError::Version { found: version, supported: FORMAT_VERSION });
    }
    if u32_at(bytes, 12) != BYTE_ORDER_MARK {
        return Err(ImageError::ByteOrder);
    }
    let total = u64_at(bytes, 16);
    if bytes.len() as u64 != total {
        return Err(ImageError::Truncated { found: bytes.len() as u64, expected: total });
    }
    let stamp_len = u32_at(bytes, 36) as usize;
    let stamp = bytes.get(HEADER_LEN..HEADER_LEN + stamp_len).ok_or_else(|| invalid("stamp beyond the end"))?;
    if u32_at(bytes, 40) != header_checksum(&bytes[..HEADER_LEN], stamp) {
        return Err(ImageError::Checksum("header"));
    }
    Ok(ImageHeader { stamp, total, table_offset: u64_at(bytes, 24), sections: u32_at(bytes, 32), body_checksum: u32_at(bytes, 44) })
}

fn header_checksum(header: &[u8], stamp: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&header[..40]);
    hasher.update(&[0u8; 8]);
    hasher.update(&header[48..]);
    hasher.update(stamp);
    hasher.finalize()
}

/// How much of an image's body is checked when it is opened. The header (with the stamp, the
/// length and the section table's place) is always checked against its own checksum, and every
/// section against the rest of the index, so an image opened either way is safe to search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyCheck {
    /// The CRC-32 of every byte after the header: damage that leaves the structure sound (a
    /// changed count or vector component) is caught too, at the price of reading every page.
    Checksum,
    /// The structure only: what a search follows (offsets, slots, rows) is checked, the rest
    /// trusted, so that a short-lived process opening an image its store wrote does not read
    /// all of it.
    Structure,
}

/// Hands out an image's sections in order, as columns read in place.
pub(crate) struct ImageReader {
    image: ImageBytes,
    sections: Vec<(usize, usize)>,
    next: usize,
}

impl ImageReader {
    /// Checks the image's header and section table, and with [`BodyCheck::Checksum`] the
    /// checksum of every byte after the header.
    pub fn open(image: ImageBytes, body_check: BodyCheck) -> Result<(ImageReader, Vec<u8>), ImageError> {
        let bytes = (*image).as_ref();
        if (bytes.as_ptr() as usize) % 8 != 0 {
            return Err(invalid("the image's bytes are not aligned to 8"));
        }
        let header = read_header(bytes)?;
        let body_start = HEADER_LEN + header.stamp.len();
        if body_check == BodyCheck::Checksum && crc32fast::hash(&bytes[body_start..]) != header.body_checksum {
            return Err(ImageError::Checksum("body"));
        }
        let table_offset = usize::try_from(header.table_offset).map_err(|_| invalid("table offset"))?;
        let table_len = header.sections as usize * 16;
        let table = bytes
            .get(table_offset..table_offset.saturating_add(table_len))
            .filter(|_| table_offset >= body_start && table_offset % 8 == 0)
            .ok_or_else(|| invalid("section table out of bounds"))?;
        let table: &[u64] = bytemuck::try_cast_slice(table).map_err(|_| invalid("section table"))?;
        let mut sections = Vec::with_capacity(header.sections as usize);
        for pair in table.chunks_exact(2) {
            let (offset, len) = (pair[0], pair[1]);
            let end = offset.checked_add(len).filter(|end| *end <= table_offset as u64 && offset >= body_start as u64);
            if end.is_none() || offset % SECTION_ALIGN != 0 {
                return Err(invalid(format!("section at {offset} of {len} bytes")));
            }
            sections.push((offset as usize, len as usize));
        }
        let stamp = header.stamp.to_vec();
        debug_assert!(header.total as usize == bytes.len());
        Ok((ImageReader { image: image.clone(), sections, next: 0 }, stamp))
    }

    pub fn column<T: Pod>(&mut self, what: &str) -> Result<Column<T>, ImageError> {
        let (start, len) = *self.sections.get(self.next).ok_or_else(|| invalid(format!("missing section: {what}")))?;
        self.next += 1;
        if len % size_of::<T>() != 0 {
            return Err(invalid(format!("{what}: {len} bytes is not a whole number of values")));
        }
        Ok(Column::Mapped { image: self.image.clone(), start, len: len / size_of::<T>() })
    }

    /// Strings written by [`ImageWriter::strings`], copied out.
    pub fn strings(&mut self, what: &str) -> Result<Vec<String>, ImageError> {
        let ends = self.column::<u64>(what)?;
        let bytes = self.column::<u8>(what)?;
        let (ends, bytes) = (ends.as_slice(), bytes.as_slice());
        let mut start = 0usize;
        let mut strings = Vec::with_capacity(ends.len());
        for end in ends {
            let end = usize::try_from(*end).map_err(|_| invalid(what))?;
            let text = bytes.get(start..end).ok_or_else(|| invalid(format!("{what}: string out of bounds")))?;
            strings.push(std::str::from_utf8(text).map_err(|_| invalid(format!("{what}: not UTF-8")))?.to_owned());
            start = end;
        }
        Ok(strings)
    }

    pub fn finish(self) -> Result<(), ImageError> {
        if self.next == self.sections.len() {
            Ok(())
        } else {
            Err(invalid(format!("{} sections left unread", self.sections.len() - self.next)))
        }
    }
}
