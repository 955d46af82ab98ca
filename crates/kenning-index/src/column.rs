//! Flat arrays that either live in memory or are read in place from a persisted index image.

use std::sync::Arc;

use bytemuck::Pod;

/// The bytes of a persisted index image, shared by every column read from it. The store hands
/// them over (a memory map of the index file, or any buffer), so this crate never opens a file.
/// Their address must be aligned to 8 bytes, as a memory map's always is.
pub type ImageBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// An image held in memory rather than mapped from a file (one just written, in a test or a
/// benchmark), copied to the alignment its reader requires.
pub fn image_in_memory(bytes: &[u8]) -> ImageBytes {
    let mut words = vec![0u64; bytes.len().div_ceil(8)];
    bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
    Arc::new(AlignedBytes { words, len: bytes.len() })
}

/// Bytes kept in 8-byte words, so that their address is aligned to 8.
struct AlignedBytes {
    words: Vec<u64>,
    len: usize,
}

impl AsRef<[u8]> for AlignedBytes {
    fn as_ref(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.words)[..self.len]
    }
}

/// An array of plain values: owned, or a range of an image read in place. A mapped column is
/// copied into memory the first time it is changed, so that opening an image costs nothing per
/// value and only what a process changes is ever copied.
pub(crate) enum Column<T> {
    Owned(Vec<T>),
    Mapped {
        image: ImageBytes,
        /// Byte offset of the first value; the reader checked its alignment and bounds.
        start: usize,
        len: usize,
    },
}

impl<T: Clone> Clone for Column<T> {
    /// An owned column is copied; a mapped one shares its image.
    fn clone(&self) -> Self {
        match self {
            Column::Owned(values) => Column::Owned(values.clone()),
            Column::Mapped { image, start, len } => Column::Mapped { image: image.clone(), start: *start, len: *len },
        }
    }
}

impl<T> Default for Column<T> {
    fn default() -> Self {
        Column::Owned(Vec::new())
    }
}

impl<T: Pod> Column<T> {
    pub fn as_slice(&self) -> &[T] {
        match self {
            Column::Owned(values) => values,
            Column::Mapped { image, start, len } => {
                let bytes = (**image).as_ref();
                // The reader checked both when it made the column, and an image never changes,
                // so neither fallback is ever taken; they keep this free of panics regardless.
                let range = bytes.get(*start..*start + len * size_of::<T>()).unwrap_or_default();
                bytemuck::try_cast_slice(range).unwrap_or_default()
            }
        }
    }

    /// The values, owned from now on.
    pub fn to_mut(&mut self) -> &mut Vec<T> {
        if let Column::Mapped { .. } = self {
            *self = Column::Owned(self.as_slice().to_vec());
        }
        match self {
            Column::Owned(values) => values,
            Column::Mapped { .. } => unreachable!("just copied into memory"),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Column::Owned(values) => values.len(),
            Column::Mapped { len, .. } => *len,
        }
    }

    pub fn get(&self, index: usize) -> Option<T> {
        self.as_slice().get(index).copied()
    }

    pub fn push(&mut self, value: T) {
        self.to_mut().push(value);
    }

    /// Sets the value at `index`, which must exist.
    pub fn set(&mut self, index: usize, value: T) {
        if let Some(slot) = self.to_mut().get_mut(index) {
            *slot = value;
        }
    }
}
