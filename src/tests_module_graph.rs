//! The module graph has no cycle: dependencies point one way, down the
//! flow (ARCHITECTURE.md). Read from the sources: every `crate::a` path in a
//! file of top-level module `b` (outside comments) is an edge `b → a`, and
//! `crate::{a, c::d}` groups count each name. Run it alone with
//! `cargo test --release --lib module_graph`; it prints the order it found.
//!
//! The second level: inside every top-level module that is a directory, the
//! graph of its direct children (`store/format/`, `store/read.rs`, …) has
//! no cycle either. There a path is resolved from the file it is in
//! (`super::`, `self::`, `crate::store::…`); a name the directory's
//! `mod.rs` re-exports counts as the child it comes from. `mod.rs` itself
//! is the parent, no node: it declares and assembles its children, and
//! what it defines (shared by the children) is no edge.
//! Test files (`tests*.rs`, `*_tests.rs`) and `#[cfg(test)] mod … { }`
//! blocks are left out, as at the top level.

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

/// Every path in `text` that starts with `crate::`, `super::` or `self::`
/// (not part of a longer path), and with `heads` also those that start with
/// one of those names, groups expanded: `super::{a, b::{c, d}}` gives
/// `[super, a]`, `[super, b, c]`, `[super, b, d]`. A group's `self` ends
/// its path; an `as` alias is dropped.
fn paths(text: &str, heads: &[String]) -> Vec<Vec<String>> {
    fn ident(b: &[u8], i: &mut usize) -> String {
        let s = *i;
        while *i < b.len() && (b[*i].is_ascii_alphanumeric() || b[*i] == b'_') {
            *i += 1;
        }
        String::from_utf8_lossy(&b[s..*i]).into_owned()
    }
    fn ws(b: &[u8], i: &mut usize) {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    }
    /// The tree at `i`, each path after `prefix`.
    fn tree(b: &[u8], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut path = prefix;
        loop {
            ws(b, i);
            if *i < b.len() && b[*i] == b'{' {
                *i += 1;
                loop {
                    ws(b, i);
                    if *i >= b.len() || b[*i] == b'}' {
                        *i += 1;
                        return;
                    }
                    tree(b, i, path.clone(), out);
                    ws(b, i);
                    if *i < b.len() && b[*i] == b',' {
                        *i += 1;
                    }
                }
            }
            let name = ident(b, i);
            if name.is_empty() {
                // `*` or the end of the path.
                if *i < b.len() && b[*i] == b'*' {
                    *i += 1;
                }
                break;
            }
            if name != "self" || path.is_empty() {
                path.push(name);
            }
            if b[*i..].starts_with(b"::") {
                *i += 2;
                continue;
            }
            ws(b, i);
            if b[*i..].starts_with(b"as ") {
                *i += 3;
                ws(b, i);
                ident(b, i);
            }
            break;
        }
        if !path.is_empty() {
            out.push(path);
        }
    }
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let prev = if i == 0 { b' ' } else { b[i - 1] };
        let starts = !(prev.is_ascii_alphanumeric() || prev == b'_' || prev == b':');
        if starts && (b[i].is_ascii_alphabetic() || b[i] == b'_') {
            let mut j = i;
            let first = ident(b, &mut j);
            let head =
                ["crate", "super", "self"].contains(&first.as_str()) || heads.contains(&first);
            if head && b[j..].starts_with(b"::") {
                tree(b, &mut i, Vec::new(), &mut out);
                continue;
            }
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// `text` without its `#[cfg(test)] mod name { … }` blocks.
fn without_test_blocks(text: &str) -> String {
    let mut out = text.to_string();
    let mut from = 0;
    while let Some(a) = out[from..].find("#[cfg(test)]").map(|a| a + from) {
        let rest = out[a + "#[cfg(test)]".len()..].trim_start();
        let brace = rest.find(['{', ';']).map(|k| rest.as_bytes()[k]);
        if !rest.starts_with("mod ") || brace != Some(b'{') {
            from = a + 1;
            continue;
        }
        let open = out[a..].find('{').unwrap() + a;
        let mut depth = 0;
        let mut end = out.len();
        for (k, c) in out[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.replace_range(a..end, " ");
        from = a;
    }
    out
}

/// The graph of the direct children of the directory module `dir` (top-level
/// module `top`).
fn inner_graph(dir: &Path, top: &str) -> Graph {
    let mut children: BTreeSet<String> = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            children.insert(name);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            if stem != "mod" && !is_test(stem) {
                children.insert(stem.to_string());
            }
        }
    }
    const MOD: &str = "mod.rs";
    // What `mod.rs` re-exports: name → the child it comes from.
    let facade = code(&without_test_blocks(
        &std::fs::read_to_string(dir.join("mod.rs")).unwrap_or_default(),
    ));
    let mut reexports: BTreeMap<String, String> = BTreeMap::new();
    let kids: Vec<String> = children.iter().cloned().collect();
    for stmt in facade.split(';') {
        let stmt = stmt.trim();
        let Some(body) = ["pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .find_map(|p| stmt.rfind(p).map(|k| &stmt[k + p.len()..]))
        else {
            continue;
        };
        for p in paths(body, &kids) {
            let p: Vec<String> = match p.first().map(String::as_str) {
                Some("self") => p[1..].to_vec(),
                _ => p,
            };
            if p.len() >= 2 && children.contains(&p[0]) {
                reexports.insert(p.last().unwrap().clone(), p[0].clone());
            }
        }
    }
    let mut g = Graph::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.extension().is_none_or(|e| e != "rs") || is_test(&stem) {
                continue;
            }
            // The file's module path from the crate root.
            let rel = path.strip_prefix(dir).unwrap();
            let mut module: Vec<String> = vec![top.to_string()];
            module.extend(rel.components().map(|c| {
                c.as_os_str()
                    .to_string_lossy()
                    .trim_end_matches(".rs")
                    .to_string()
            }));
            if module.last().is_some_and(|m| m == "mod") {
                module.pop();
            }
            let node = module.get(1).cloned().unwrap_or_else(|| MOD.to_string());
            let text = code(&without_test_blocks(
                &std::fs::read_to_string(&path).unwrap(),
            ));
            if node == MOD {
                continue;
            }
            let deps = g.entry(node.clone()).or_default();
            for p in paths(&text, &[]) {
                // Resolve to a path from the crate root.
                let mut abs: Vec<String> = match p[0].as_str() {
                    "crate" => Vec::new(),
                    "self" | "super" => module.clone(),
                    _ => module.clone(),
                };
                let mut k = usize::from(p[0] == "crate" || p[0] == "self");
                while k < p.len() && p[k] == "super" {
                    abs.pop();
                    k += 1;
                }
                abs.extend(p[k..].iter().cloned());
                if abs.first().is_none_or(|t| t != top) || abs.len() < 2 {
                    continue;
                }
                let to = if children.contains(&abs[1]) {
                    abs[1].clone()
                } else if let Some(c) = reexports.get(&abs[1]) {
                    c.clone()
                } else {
                    continue;
                };
                if to != node {
                    deps.insert(to);
                }
            }
        }
    }
    g
}

/// Whether a file stem names a test module.
fn is_test(stem: &str) -> bool {
    stem.starts_with("tests") || stem.ends_with("_tests")
}

#[test]
fn the_path_reader_resolves_groups_and_supers() {
    let text = "use super::{frame, memtable::KeySet, wal::{self, x as y}};\n\
                let a = super::super::layout::Layout::new(); use crate::store::read::*;";
    assert_eq!(
        paths(text, &[]),
        [
            vec!["super", "frame"],
            vec!["super", "memtable", "KeySet"],
            vec!["super", "wal"],
            vec!["super", "wal", "x"],
            vec!["super", "super", "layout", "Layout", "new"],
            vec!["crate", "store", "read"],
        ]
    );
    let t = "a\n#[cfg(test)]\nmod tests {\n    use super::x;\n    fn f() {}\n}\nb";
    assert_eq!(without_test_blocks(t), "a\n \nb");
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

#[test]
fn module_graph_inside_each_directory_module_has_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut cycles = Vec::new();
    let mut tops: Vec<_> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    tops.sort();
    for dir in tops {
        let top = dir.file_name().unwrap().to_string_lossy().into_owned();
        let g = inner_graph(&dir, &top);
        if g.len() < 2 {
            continue;
        }
        match order(&g) {
            Ok(order) => {
                println!(
                    "{top}/ in dependency order, leaves first: {}",
                    order.join(", ")
                );
                for (m, deps) in &g {
                    println!(
                        "  {top}::{m} → {}",
                        deps.iter().cloned().collect::<Vec<_>>().join(", ")
                    );
                }
            }
            Err(cycle) => cycles.push(format!("{top}/: {}\nedges: {g:#?}", cycle.join(" → "))),
        }
    }
    assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
}
