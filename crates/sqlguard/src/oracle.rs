//! A check apart from the allowlist's walk of the parsed statement, over
//! its tokens, for the `sql_guard` fuzz target and the property tests: what
//! the allowlist accepts must pass it too.

use sqlparser::dialect::GenericDialect;

use crate::{is_file_function_name, FUNCTIONS};

/// An oracle apart from the check, over the statement's tokens, for the
/// fuzz target and the property tests: no word that is not a keyword is
/// called (`word(`) unless it is an allowed function, and nothing named
/// like a file function is called or read at all. `Err` names the token.
pub fn tokens_oracle(sql: &str) -> Result<(), String> {
    use sqlparser::keywords::Keyword;
    use sqlparser::tokenizer::{Token, Tokenizer};
    let tokens = Tokenizer::new(&GenericDialect, sql)
        .tokenize()
        .map_err(|e| format!("does not tokenize: {e}"))?;
    let significant: Vec<&Token> = tokens
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    for (i, t) in significant.iter().enumerate() {
        let Token::Word(w) = t else { continue };
        let name = w.value.to_lowercase();
        let mut called = matches!(significant.get(i + 1), Some(Token::LParen));
        // `name (columns) AS (...)` (a CTE) or `AS alias (columns)`: no call.
        let after_as =
            i > 0 && matches!(significant[i - 1], Token::Word(p) if p.keyword == Keyword::AS);
        // `name (SELECT …)`: a CTE written without AS, or a subquery.
        let query_inside = matches!(significant.get(i + 2), Some(Token::Word(q)) if matches!(q.keyword, Keyword::SELECT | Keyword::WITH | Keyword::VALUES));
        // `spans t (columns)`: an alias after a name, no AS.
        let after_name = i > 0
            && matches!(significant[i - 1], Token::Word(p) if p.keyword == Keyword::NoKeyword);
        if called
            && (after_as || after_name || query_inside || closes_before_as(&significant, i + 1))
        {
            called = false;
        }
        if called && is_file_function_name(&name) {
            return Err(format!("{name}( is called"));
        }
        if called && w.keyword == Keyword::NoKeyword && !FUNCTIONS.contains(&name.as_str()) {
            return Err(format!("{name}( is not an allowed function"));
        }
        let after_from = i > 0
            && matches!(significant[i - 1], Token::Word(p) if matches!(p.keyword, Keyword::FROM | Keyword::JOIN));
        if after_from && is_file_function_name(&name) {
            return Err(format!("FROM {name} names a file function"));
        }
    }
    Ok(())
}

/// Whether the parenthesis at `open` closes right before `AS`.
fn closes_before_as(tokens: &[&sqlparser::tokenizer::Token], open: usize) -> bool {
    use sqlparser::keywords::Keyword;
    use sqlparser::tokenizer::Token;
    let mut depth = 0usize;
    for (j, t) in tokens.iter().enumerate().skip(open) {
        match t {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    return matches!(tokens.get(j + 1), Some(Token::Word(w)) if w.keyword == Keyword::AS);
                }
            }
            _ => {}
        }
    }
    false
}
