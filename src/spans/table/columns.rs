//! The span table's column types: hash strings as hex values, error
//! classes, the string dictionary, and hex parsing and printing.

use std::collections::HashMap;

use polars::prelude::*;

use crate::model::ErrorClass;

type Fast = foldhash::fast::RandomState;

/// A hash string (tool arguments, results): lowercase hex up to 32 digits
/// as its value and width, anything else as a dictionary entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hex {
    None,
    Hex { value: u128, digits: u8 },
    Text(u32),
}

/// A column of [`Hex`] values, stored for the rows that have one: four
/// bytes a row, seventeen more where a value is set (most results and
/// every agent span's arguments are null).
#[derive(Debug, Default, Clone)]
pub struct HexCol {
    /// 0: none; else 1 + the index into `values` / `digits`.
    pub(super) idx: Vec<u32>,
    values: Vec<u128>,
    /// The hex width, or `TEXT` (then the value is a dictionary number).
    digits: Vec<u8>,
}

const TEXT: u8 = 0xff;

impl HexCol {
    pub(super) fn push(&mut self, h: Hex) {
        let (value, digits) = match h {
            Hex::None => {
                self.idx.push(0);
                return;
            }
            Hex::Hex { value, digits } => (value, digits),
            Hex::Text(id) => (u128::from(id), TEXT),
        };
        self.values.push(value);
        self.digits.push(digits);
        self.idx.push(self.values.len() as u32);
    }

    pub fn get(&self, row: usize) -> Hex {
        match self.idx[row] {
            0 => Hex::None,
            k => {
                let k = k as usize - 1;
                match self.digits[k] {
                    TEXT => Hex::Text(self.values[k] as u32),
                    digits => Hex::Hex {
                        value: self.values[k],
                        digits,
                    },
                }
            }
        }
    }

    pub(super) fn truncate(&mut self, rows: usize) {
        self.idx.truncate(rows);
        let kept = self
            .idx
            .iter()
            .rev()
            .find(|&&k| k != 0)
            .copied()
            .unwrap_or(0) as usize;
        self.values.truncate(kept);
        self.digits.truncate(kept);
    }
}

/// Null, or a class; `Other` is a class name this version does not know
/// (it counts as a failure, and as `unknown`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Null,
    Known(ErrorClass),
    Other,
}

impl Class {
    pub(super) fn parse(s: Option<&str>) -> Class {
        match s {
            None => Class::Null,
            Some(s) => ErrorClass::parse(s).map_or(Class::Other, Class::Known),
        }
    }

    /// Counted as a failure by the per-turn rules (anything but null, `ok`
    /// and control flow).
    pub fn failed(self) -> bool {
        !matches!(self, Class::Null | Class::Known(ErrorClass::Ok)) && !self.control_flow()
    }

    /// `interrupted` or `cancelled`: a call stopped on purpose, which the
    /// per-turn rules leave out.
    pub fn control_flow(self) -> bool {
        matches!(self, Class::Known(c) if c.is_control_flow())
    }

    /// The class a call carries: an unknown or missing one is `unknown`.
    pub fn class(self) -> ErrorClass {
        match self {
            Class::Known(c) => c,
            _ => ErrorClass::Unknown,
        }
    }

    /// As a string, for the rules shared with frames (`takes_inner_class`).
    pub fn as_str(self, raw: &str) -> Option<&str> {
        match self {
            Class::Null => None,
            Class::Known(c) => Some(c.as_str()),
            Class::Other => Some(raw),
        }
    }
}

/// Small strings numbered in order of first sight; 0 is null.
#[derive(Debug, Default, Clone)]
pub struct Dict {
    index: HashMap<Box<str>, u32, Fast>,
    strings: Vec<Box<str>>,
}

impl Dict {
    pub fn id(&mut self, s: Option<&str>) -> u32 {
        let Some(s) = s else { return 0 };
        if let Some(&n) = self.index.get(s) {
            return n;
        }
        self.strings.push(s.into());
        let n = self.strings.len() as u32;
        self.index.insert(s.into(), n);
        n
    }

    pub fn get(&self, id: u32) -> Option<&str> {
        id.checked_sub(1)
            .and_then(|i| self.strings.get(i as usize))
            .map(|s| &**s)
    }
}

/// Hex digit values, 0xff for anything else.
const HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// The value of lowercase hex of 1 to `max_digits` digits.
pub(super) fn hex_value(s: &str, max_digits: usize) -> Option<u128> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > max_digits {
        return None;
    }
    let mut v: u128 = 0;
    let mut bad = 0u8;
    // Two 64-bit halves: u64 shifts are cheaper than u128 ones.
    let split = b.len().saturating_sub(16);
    let (hi, lo) = b.split_at(split);
    let half = |part: &[u8], bad: &mut u8| -> u64 {
        let mut x: u64 = 0;
        for &c in part {
            let d = HEX[c as usize];
            *bad |= d;
            x = (x << 4) | u64::from(d & 0xf);
        }
        x
    };
    let h = half(hi, &mut bad);
    let l = half(lo, &mut bad);
    if bad & 0xf0 != 0 {
        return None;
    }
    v |= u128::from(h) << (4 * lo.len());
    v |= u128::from(l);
    Some(v)
}

pub(super) fn write_hex(out: &mut String, v: u128, digits: usize) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for k in (0..digits).rev() {
        out.push(DIGITS[((v >> (4 * k)) & 0xf) as usize] as char);
    }
}

pub(super) fn opt_strs(c: Option<&StringChunked>, n: usize) -> Vec<Option<&str>> {
    match c {
        Some(c) => c.iter().collect(),
        None => vec![None; n],
    }
}

/// Dictionary numbers of a string column. Values repeat (a part of one
/// service, forty tool names), and Parquet's dictionary pages decode into
/// views of one buffer: equal views are equal strings, so each chunk asks
/// the dictionary once per distinct view, not once per row.
pub(super) fn dict_column(
    dict: &mut Dict,
    c: Option<&StringChunked>,
    n: usize,
    out: &mut Vec<u32>,
) {
    let Some(c) = c else {
        out.extend(std::iter::repeat_n(0, n));
        return;
    };
    let mut seen: HashMap<u128, u32, Fast> = HashMap::default();
    for arr in c.downcast_iter() {
        seen.clear();
        for (v, s) in arr.views().iter().zip(arr.iter()) {
            let Some(s) = s else {
                out.push(0);
                continue;
            };
            let key = v.as_u128();
            let id = match seen.get(&key) {
                Some(&id) => id,
                None => {
                    let id = dict.id(Some(s));
                    seen.insert(key, id);
                    id
                }
            };
            out.push(id);
        }
    }
}
