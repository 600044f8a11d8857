//! Whether today's read may hold one call as two spans (an MCP span, or
//! tool spans of two conventions: `spans::may_nest_in` of the table a
//! whole read takes), followed as rows arrive. The kernel looks for nested
//! duplicates only then, so every group is made under the day's answer,
//! not its own; the answer only ever turns to yes, and when it does, the
//! groups made before are made again (the state is rebuilt).

use std::ops::Range;

use crate::spans::SpanTable;

/// The day's answer so far.
#[derive(Debug, Default)]
pub(super) struct NestGate {
    /// The one convention seen so far.
    first: Option<Box<str>>,
    pub may: bool,
}

impl NestGate {
    /// Take `rows` of `t` into account.
    pub fn see(&mut self, t: &SpanTable, rows: Range<usize>) {
        if self.may || rows.is_empty() {
            return;
        }
        if t.conventions_unknown {
            self.may = true;
            return;
        }
        for r in rows {
            let c = t.convention[r];
            if c == 0 {
                continue;
            }
            let name = t.dict.get(c).unwrap_or("");
            match &self.first {
                _ if name == "mcp" => self.may = true,
                None => self.first = Some(name.into()),
                Some(f) if **f != *name => self.may = true,
                Some(_) => {}
            }
            if self.may {
                return;
            }
        }
    }
}
