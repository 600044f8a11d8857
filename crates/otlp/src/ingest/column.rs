//! The column builders a [`SpanBatch`](super::SpanBatch) is made of: the
//! strings of a column in one buffer with offsets (Arrow's `LargeUtf8`
//! layout, so a frame can take the buffer as it is), and a dictionary that
//! numbers repeated values.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

/// The strings of one column in one buffer, as Arrow's `LargeUtf8` lays
/// them out: value `i` is `data[offsets[i]..offsets[i + 1]]`, absent when
/// `!valid[i]` (an absent value takes no bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct StrColumn {
    data: String,
    offsets: Vec<i64>,
    valid: Vec<bool>,
}

impl Default for StrColumn {
    fn default() -> Self {
        StrColumn {
            data: String::new(),
            offsets: vec![0],
            valid: Vec::new(),
        }
    }
}

impl StrColumn {
    pub fn len(&self) -> usize {
        self.valid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.valid.is_empty()
    }

    /// Value `i`, `None` when absent.
    pub fn get(&self, i: usize) -> Option<&str> {
        let (start, end) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        self.valid[i].then(|| &self.data[start..end])
    }

    pub fn push(&mut self, s: &str) {
        self.data.push_str(s);
        self.close(true);
    }

    pub fn push_opt(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.push(s),
            None => self.close(false),
        }
    }

    /// A value `write` appends to the column's buffer in place.
    pub fn push_with(&mut self, write: impl FnOnce(&mut String)) {
        write(&mut self.data);
        self.close(true);
    }

    fn close(&mut self, valid: bool) {
        self.offsets.push(self.data.len() as i64);
        self.valid.push(valid);
    }

    /// Append the values at `rows` of `src` (all of them when `rows` is every row).
    pub(super) fn extend_from(&mut self, src: &StrColumn, rows: &[u32]) {
        if rows.len() == src.len() {
            let base = self.data.len() as i64;
            self.data.push_str(&src.data);
            self.offsets
                .extend(src.offsets[1..].iter().map(|o| o + base));
            self.valid.extend_from_slice(&src.valid);
            return;
        }
        for &r in rows {
            self.push_opt(src.get(r as usize));
        }
    }

    /// Room for `bytes` more bytes of values.
    pub fn reserve_bytes(&mut self, bytes: usize) {
        self.data.reserve(bytes);
    }

    pub(super) fn reserve(&mut self, spans: usize) {
        self.offsets.reserve(spans);
        self.valid.reserve(spans);
    }

    /// Bytes allocated.
    pub fn mem_bytes(&self) -> usize {
        self.data.capacity()
            + self.offsets.capacity() * std::mem::size_of::<i64>()
            + self.valid.capacity()
    }

    /// Bytes of the values.
    pub fn data_len(&self) -> usize {
        self.data.len()
    }

    /// The buffer, the offsets (one more than values) and the validity.
    pub fn into_parts(self) -> (String, Vec<i64>, Vec<bool>) {
        (self.data, self.offsets, self.valid)
    }
}

/// A dictionary value's heap bytes, for the memory bounds.
pub trait HeapSize {
    fn heap_bytes(&self) -> usize;
}

impl HeapSize for Arc<str> {
    fn heap_bytes(&self) -> usize {
        self.len() + 16
    }
}

/// Values numbered in the order they first came; a span holds the number.
#[derive(Debug, Clone, PartialEq)]
pub struct Dict<T: Hash + Eq> {
    values: Vec<T>,
    index: HashMap<T, u32, foldhash::fast::FixedState>,
    /// Heap bytes of the values, the vector and the index.
    bytes: usize,
}

impl<T: Hash + Eq> Default for Dict<T> {
    fn default() -> Self {
        Dict {
            values: Vec::new(),
            index: HashMap::default(),
            bytes: 0,
        }
    }
}

impl<T: Hash + Eq + Clone + HeapSize> Dict<T> {
    /// The number of `value`, added if new.
    pub fn intern<Q>(&mut self, value: &Q) -> u32
    where
        T: Borrow<Q> + for<'q> From<&'q Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(&id) = self.index.get(value) {
            return id;
        }
        self.add(T::from(value))
    }

    fn add(&mut self, value: T) -> u32 {
        let id = self.values.len() as u32;
        // The value, its slot in the vector and one in the index (key, number, control byte).
        self.bytes += value.heap_bytes() + 2 * std::mem::size_of::<T>() + 8;
        self.values.push(value.clone());
        self.index.insert(value, id);
        id
    }

    pub fn get(&self, id: u32) -> &T {
        &self.values[id as usize]
    }

    pub fn values(&self) -> &[T] {
        &self.values
    }

    /// Numbers in `self` of every value of `other`, in `other`'s order.
    pub(super) fn remap(&mut self, other: &Dict<T>) -> Vec<u32> {
        other.values.iter().map(|v| self.intern_owned(v)).collect()
    }

    fn intern_owned(&mut self, value: &T) -> u32 {
        match self.index.get(value) {
            Some(&id) => id,
            None => self.add(value.clone()),
        }
    }

    /// Heap bytes held (values shared with another dictionary counted in both).
    pub fn mem_bytes(&self) -> usize {
        self.bytes
    }
}
