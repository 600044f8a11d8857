//! Paging and the character budget of a tool's answer: a list is cut to the
//! page asked for (`cursor`, `limit`), then to what fits in the budget, and
//! an answer that was cut says what was left out and how to get it.

use serde::Serialize;

use super::McpError;

/// Characters one answer may take (its JSON), so an agent never reads a
/// page it did not ask for. Roughly 6 000 tokens.
pub const BUDGET_CHARS: usize = 24_000;

/// Room kept for the answer's own fields around its list.
const ENVELOPE_CHARS: usize = 2_000;

/// The offset a cursor stands for (`None`: the first page).
pub fn offset(cursor: Option<&str>) -> Result<usize, McpError> {
    match cursor {
        None | Some("") => Ok(0),
        Some(c) => c
            .strip_prefix("o")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| {
                McpError::Argument(format!(
                    "cursor: expected a next_cursor from an earlier answer, got {c:?}"
                ))
            }),
    }
}

/// The cursor of the page that starts at `offset`.
pub fn cursor(offset: usize) -> String {
    format!("o{offset}")
}

/// One page of a list.
#[derive(Debug)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Where the next page starts, when there is one.
    pub next_cursor: Option<String>,
    /// What the budget cut, in words, when it cut anything.
    pub truncated: Option<String>,
    /// Items in the whole list.
    pub total: usize,
}

/// The page of `all` at `cursor`: at most `limit` items (default and
/// ceiling `max`), and no more than fit in `budget` characters of JSON.
/// `what` names the items ("spans") for the note.
pub fn page<T: Serialize + Clone>(
    all: &[T],
    cursor: Option<&str>,
    limit: Option<usize>,
    max: usize,
    budget: usize,
    what: &str,
) -> Result<Page<T>, McpError> {
    page_with(all, T::clone, cursor, limit, max, budget, what)
}

/// [`page`], making each item of the page with `make` (only those).
pub fn page_with<S, T: Serialize>(
    all: &[S],
    make: impl Fn(&S) -> T,
    cursor: Option<&str>,
    limit: Option<usize>,
    max: usize,
    budget: usize,
    what: &str,
) -> Result<Page<T>, McpError> {
    let total = all.len();
    let start = offset(cursor)?;
    if start > total {
        return Err(McpError::Argument(format!(
            "cursor: points past the end of the list ({total} {what})"
        )));
    }
    if limit == Some(0) {
        return Err(McpError::Argument(format!(
            "limit: expected 1 to {max}, got 0"
        )));
    }
    let limit = limit.unwrap_or(max).min(max);
    let mut used = 0;
    let mut items = Vec::new();
    let mut cut = false;
    for item in all.iter().skip(start).take(limit).map(make) {
        let size = serde_json::to_string(&item).map_or(0, |s| s.len()) + 1;
        // The first item is always given, however large: the agent asked for it.
        if !items.is_empty() && used + size > budget.saturating_sub(ENVELOPE_CHARS) {
            cut = true;
            break;
        }
        used += size;
        items.push(item);
    }
    let end = start + items.len();
    let next_cursor = (end < total).then(|| self::cursor(end));
    let truncated = cut.then(|| {
        format!(
            "{} of {total} {what} shown ({}–{}), cut to the {budget}-character budget; pass cursor {:?} for the next page",
            items.len(),
            start + 1,
            end,
            self::cursor(end)
        )
    });
    Ok(Page {
        items,
        next_cursor,
        truncated,
        total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_each_other_and_the_budget_cuts_with_a_note() {
        let all: Vec<String> = (0..100).map(|i| format!("item {i:03}")).collect();
        let p = page(&all, None, Some(30), 50, BUDGET_CHARS, "items").unwrap();
        assert_eq!(p.items.len(), 30);
        assert_eq!(p.next_cursor.as_deref(), Some("o30"));
        assert!(p.truncated.is_none());
        let p2 = page(
            &all,
            p.next_cursor.as_deref(),
            Some(30),
            50,
            BUDGET_CHARS,
            "items",
        )
        .unwrap();
        assert_eq!(p2.items[0], "item 030");
        // A budget of 2 100 characters leaves room for about eight items.
        let cut = page(&all, None, None, 50, 2_100, "items").unwrap();
        assert!(cut.items.len() < 50 && !cut.items.is_empty());
        let note = cut.truncated.unwrap();
        assert!(note.contains("of 100 items"), "{note}");
        assert_eq!(cut.next_cursor, Some(cursor(cut.items.len())));
        let last = page(&all, Some("o100"), None, 50, BUDGET_CHARS, "items").unwrap();
        assert!(last.items.is_empty() && last.next_cursor.is_none());
        assert!(page(&all, Some("o101"), None, 50, BUDGET_CHARS, "items").is_err());
        assert!(page(&all, Some("bogus"), None, 50, BUDGET_CHARS, "items").is_err());
    }
}
