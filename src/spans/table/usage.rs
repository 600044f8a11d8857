//! Model spans in the span table (docs/detection.md §1, "Model spans"):
//! each model span's model, instrumentation scope and tokens, read for the
//! model rows only — a frame of a day's spans holds few.

use polars::prelude::*;

use super::SpanTable;

/// A model span's model (a dictionary number, 0: none) and tokens.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub model: u32,
    /// The instrumentation scope that made it (names the framework).
    pub scope: u32,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
}

impl SpanTable {
    /// Append `df`'s `is_model` column, and the model, scope and tokens of
    /// its model rows (gathered first: only they are read).
    pub(super) fn append_models(&mut self, df: &DataFrame) -> PolarsResult<()> {
        let n = df.height();
        let base = self.is_model.len();
        let is_model: Vec<bool> = match df.column("is_model") {
            Ok(c) => c.bool()?.iter().map(|b| b == Some(true)).collect(),
            Err(_) => vec![false; n],
        };
        let rows: Vec<usize> = (0..n).filter(|&i| is_model[i]).collect();
        self.is_model.extend(is_model);
        if rows.is_empty() {
            return Ok(());
        }
        let strs = |name: &str| -> PolarsResult<Option<&StringChunked>> {
            match df.column(name) {
                Ok(c) => Ok(Some(c.str()?)),
                Err(_) => Ok(None),
            }
        };
        let ints = |name: &str| -> PolarsResult<Option<Int64Chunked>> {
            match df.column(name) {
                Ok(c) => Ok(Some(c.cast(&DataType::Int64)?.i64()?.clone())),
                Err(_) => Ok(None),
            }
        };
        let (models, scopes) = (strs("model_name")?, strs("scope_name")?);
        let (input, output) = (ints("input_tokens")?, ints("output_tokens")?);
        for i in rows {
            let model = self.dict.id(models.and_then(|c| c.get(i)));
            let scope = self.dict.id(scopes.and_then(|c| c.get(i)));
            self.usage.insert(
                base + i,
                Usage {
                    model,
                    scope,
                    input_tokens: input.as_ref().and_then(|c| c.get(i)),
                    output_tokens: output.as_ref().and_then(|c| c.get(i)),
                },
            );
        }
        Ok(())
    }

    /// A model span's instrumentation scope.
    pub fn model_scope(&self, row: usize) -> Option<&str> {
        let u = self.usage.get(&row)?;
        self.dict.get(u.scope)
    }

    /// A model span's model name.
    pub fn model_of(&self, row: usize) -> Option<&str> {
        let u = self.usage.get(&row)?;
        self.dict.get(u.model)
    }
}
