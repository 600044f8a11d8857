//! Result shapes users declare for their own tools
//! (`[[ingest.result_failures]]`, docs/detection.md §3): where in the
//! tool's result — inside the framework's envelope — the sign of failure
//! is, its words, and the class it means.

use serde_json::Value as Json;

use super::super::conventions::glob;
use super::Failure;
use crate::model::ErrorClass;

/// One declared shape.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ResultShape {
    /// A JSON pointer (RFC 6901, `/outcome/state`) into the result — the
    /// tool's own payload, looked for inside the envelope the framework
    /// records it in too: the value that says whether the call failed.
    pub pointer: String,
    /// The values there that mean failure, compared as text (`"FAILED"`,
    /// `"false"`, `"500"`). Empty: any value but `null`, `false`, `0`,
    /// `""`, `[]` and `{}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub equals: Vec<String>,
    /// A JSON pointer to the failure's words (or status), classified as
    /// an error message is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The class a failure of this shape is, when its words do not say
    /// (`invalid_request` for a declined card); default `unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The tools it applies to: names, `*` matching any run of characters
    /// (`book_*`). Empty: every tool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
}

/// What is wrong with a JSON pointer, if anything.
fn bad_pointer(p: &str) -> Option<String> {
    if !p.starts_with('/') {
        return Some(format!(
            "expected a JSON pointer starting with \"/\" (\"/status\"), got {p:?}"
        ));
    }
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Some(format!(
                "expected \"~\" only as \"~0\" or \"~1\" (RFC 6901), got {p:?}"
            ));
        }
    }
    None
}

impl ResultShape {
    /// What is wrong with the shape: the key, and what was expected and
    /// what came (`None`: it is fine).
    pub fn problem(&self) -> Option<(&'static str, String)> {
        bad_pointer(&self.pointer)
            .map(|why| ("pointer", why))
            .or_else(|| {
                let m = self.message.as_deref()?;
                bad_pointer(m).map(|why| ("message", why))
            })
            .or_else(|| {
                let c = self.class.as_deref()?;
                (ErrorClass::parse(c).is_none_or(|c| !c.is_error())).then(|| {
                    (
                        "class",
                        format!(
                            "expected a class other than ok ({}), got {c:?}",
                            ErrorClass::ALL
                                .iter()
                                .filter(|c| c.is_error())
                                .map(|c| c.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )
                })
            })
            .or_else(|| {
                self.equals
                    .iter()
                    .any(|e| e.is_empty())
                    .then(|| ("equals", "expected non-empty values, got \"\"".to_string()))
            })
            .or_else(|| {
                self.tools.iter().any(|t| t.is_empty()).then(|| {
                    (
                        "tools",
                        "expected tool names or patterns such as \"book_*\", got \"\"".to_string(),
                    )
                })
            })
    }

    fn applies_to(&self, tool: &str) -> bool {
        self.tools.is_empty() || self.tools.iter().any(|p| glob(p, tool))
    }

    /// The failure this shape reads in one layer of a result of `tool`;
    /// `None` when it does not apply or the layer does not say it failed.
    pub fn failure(&self, tool: &str, layer: &Json) -> Option<Failure> {
        if !self.applies_to(tool) {
            return None;
        }
        let v = layer.pointer(&self.pointer)?;
        let text = match v {
            Json::String(s) => s.clone(),
            Json::Null => return None,
            other => other.to_string(),
        };
        let failed = if self.equals.is_empty() {
            !falsy(v)
        } else {
            self.equals.contains(&text)
        };
        if !failed {
            return None;
        }
        let words = self.message.as_deref().and_then(|m| layer.pointer(m));
        let said = words.and_then(super::class_of_words);
        let class = said
            .or_else(|| self.class.as_deref().and_then(ErrorClass::parse))
            .unwrap_or(ErrorClass::Unknown);
        // The value that said it failed names it, when it is a word.
        let name =
            (!text.is_empty() && !text.starts_with(['{', '[']) && text.len() <= 80).then_some(text);
        Some(Failure { class, name })
    }
}

/// A value that says nothing failed: `null`, `false`, `0`, `""`, `[]`, `{}`.
fn falsy(v: &Json) -> bool {
    match v {
        Json::Null => true,
        Json::Bool(b) => !b,
        Json::Number(n) => n.as_f64() == Some(0.0),
        Json::String(s) => s.is_empty(),
        Json::Array(a) => a.is_empty(),
        Json::Object(o) => o.is_empty(),
    }
}

/// The shapes users declared, in the order they are tried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResultShapes(pub Vec<ResultShape>);

impl ResultShapes {
    /// None declared.
    pub const NONE: &'static ResultShapes = &ResultShapes(Vec::new());

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The failure the first shape that applies reads in a layer of a result.
    pub fn failure(&self, tool: &str, layer: &Json) -> Option<Failure> {
        self.0.iter().find_map(|s| s.failure(tool, layer))
    }
}
