//! The module graph has no cycle: dependencies point one way, down the
//! flow (ARCHITECTURE.md). Read from the sources: every `crate::a` path in a
//! file of top-level module `b` (outside comments) is an edge `b → a`, and
//! `crate::{a, c::d}` groups count each name. Run it alone with
//! `cargo test --release --lib module_graph`; it prints the order it found.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The edges between the top-level modules of the crate rooted at `src`.
fn graph(src: &Path) -> Graph {
    let mut g = Graph::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let first = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy();
            let top = first.trim_end_matches(".rs").to_string();
            if top == "lib" || top == "main" || top.starts_with("tests_") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let deps = g.entry(top.clone()).or_default();
            for name in crate_paths(&text) {
                if name != top {
                    deps.insert(name);
                }
            }
        }
    }
    g
}

/// `text` without its comments (`//` to the end of the line, `/* */`),
/// its lines joined, so that a `use crate::{…}` group rustfmt spreads over
/// several lines reads as one. (A `//` inside a string literal cuts its line
/// short; a `crate::` inside one counts: an extra edge fails the test
/// loudly, a missed one would not.)
fn code(text: &str) -> String {
    let joined: Vec<&str> = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect();
    let mut joined = joined.join(" ");
    while let Some(a) = joined.find("/*") {
        let b = joined[a..].find("*/").map_or(joined.len(), |b| a + b + 2);
        joined.replace_range(a..b, " ");
    }
    joined
}

/// The first segment of every `crate::` path in `text`, comments skipped.
fn crate_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let code = code(text);
    {
        let mut rest = code.as_str();
        while let Some(i) = rest.find("crate::") {
            // Not part of a longer name (`stormwatch_crate::`).
            let before = rest[..i].chars().last();
            rest = &rest[i + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                // `crate::{a, b::{c, d}, e}`: the names at depth one.
                let mut depth = 1;
                let mut item = String::new();
                let mut at_start = true;
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 1 => {
                            if !item.is_empty() {
                                out.push(std::mem::take(&mut item));
                            }
                            at_start = true;
                        }
                        c if depth == 1 && at_start && (c.is_alphanumeric() || c == '_') => {
                            item.push(c)
                        }
                        _ if depth == 1 && at_start && !item.is_empty() => {
                            out.push(std::mem::take(&mut item));
                            at_start = false;
                        }
                        _ => {}
                    }
                    if depth == 0 {
                        break;
                    }
                }
                if !item.is_empty() {
                    out.push(item);
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push(name);
                }
            }
        }
    }
    out.retain(|n| n != "self");
    out
}

/// A cycle of `g`, if it has one; else its modules in dependency order.
fn order(g: &Graph) -> Result<Vec<String>, Vec<String>> {
    // Depth-first, colouring: 1 on the current path, 2 done.
    fn visit(
        n: &str,
        g: &Graph,
        colour: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
        out: &mut Vec<String>,
    ) -> Result<(), Vec<String>> {
        match colour.get(n) {
            Some(2) => return Ok(()),
            Some(1) => {
                let at = path.iter().position(|p| p == n).unwrap();
                let mut cycle = path[at..].to_vec();
                cycle.push(n.to_string());
                return Err(cycle);
            }
            _ => {}
        }
        colour.insert(n.to_string(), 1);
        path.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            visit(d, g, colour, path, out)?;
        }
        path.pop();
        colour.insert(n.to_string(), 2);
        out.push(n.to_string());
        Ok(())
    }
    let mut colour = BTreeMap::new();
    let mut out = Vec::new();
    for n in g.keys() {
        visit(n, g, &mut colour, &mut Vec::new(), &mut out)?;
    }
    Ok(out)
}

#[test]
fn the_parser_reads_paths_and_groups() {
    let text = "use crate::{alert::{self, Queued}, store, model::day};\n\
                let x = crate::sweep::run(); // crate::dash in a comment\n\
                stormwatch_crate::no; use crate::self_named;\n\
                use crate::{\n    signal::{self, State},\n    /* crate::mcp */ time,\n};";
    assert_eq!(
        crate_paths(text),
        [
            "alert",
            "store",
            "model",
            "sweep",
            "self_named",
            "signal",
            "time"
        ]
    );
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    assert_eq!(order(&g).unwrap(), ["c", "b", "a"]);
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(order(&g).unwrap_err(), ["a", "b", "c", "a"]);
}

#[test]
fn module_graph_has_no_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for src in [root.join("src"), root.join("crates/otlp/src")] {
        let g = graph(&src);
        match order(&g) {
            Ok(order) => {
                println!(
                    "{} in dependency order, leaves first: {}",
                    src.display(),
                    order.join(", ")
                );
                for (m, deps) in &g {
                    println!(
                        "  {m} → {}",
                        deps.iter().cloned().collect::<Vec<_>>().join(", ")
                    );
                }
            }
            Err(cycle) => panic!(
                "{}: a module cycle: {}\nedges: {g:#?}",
                src.display(),
                cycle.join(" → ")
            ),
        }
    }
}
