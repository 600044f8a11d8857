//! Which open signals share a cause (alerting.md, Incidents), as a pure
//! function of the signals and the facts the sweep read: two signals join
//! when their times overlap and they share
//!
//! 1. the tool (a storm, its spike and its wasted retries are one outage);
//! 2. the dependency their tool's failing calls went to (the `dependency`
//!    column: an MCP server's `service.name`, `peer.service`,
//!    `server.address`, `url.full`'s host);
//! 3. or, when neither side has a dependency, one error class in one
//!    service with first findings within the hour (a burst).
//!
//! Retries after success and tool loops are the caller's doing, not a
//! dependency's: each is an incident of its own. Groups and the reasons
//! are deterministic: members are taken in order of first finding, then id.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{day_from_str, ErrorClass, NANOS_PER_DAY};
use crate::signal::{Kind, Signal};

const HOUR_NS: i64 = 3_600_000_000_000;

/// One tool's figures on one day (from the rollup and the retry outcomes).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolDayFacts {
    pub service: String,
    pub calls: u64,
    pub errors: u64,
    pub dependency: Option<String>,
    pub wasted: u64,
    pub wasted_seconds: f64,
}

/// The turns and sessions a signal's findings touched in the sweep's window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reach {
    pub turns: BTreeSet<String>,
    pub sessions: BTreeSet<String>,
}

/// What the sweep knows beyond the signals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// (tool, day) → its figures.
    pub daily: BTreeMap<(String, i32), ToolDayFacts>,
    /// Signal key → its findings' turns and sessions.
    pub reach: BTreeMap<String, Reach>,
}

/// Why a group is one incident.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    Dependency(String),
    Tool(String),
    Burst {
        service: String,
        class: String,
        hour_ns: i64,
    },
    /// A signal that is its own cause (its key).
    Own(String),
}

impl Cause {
    /// The incident key.
    pub fn key(&self) -> String {
        match self {
            Cause::Dependency(d) => format!("inc1:dep:{d}"),
            Cause::Tool(t) => format!("inc1:tool:{t}"),
            Cause::Burst {
                service,
                class,
                hour_ns,
            } => format!(
                "inc1:burst:{service}:{class}:{}",
                crate::time::rfc3339(*hour_ns)
            ),
            Cause::Own(key) => format!("inc1:signal:{key}"),
        }
    }

    /// In words.
    pub fn words(&self) -> String {
        match self {
            Cause::Dependency(d) => format!("failing calls to one dependency, {d}"),
            Cause::Tool(t) => format!("one tool, {t}"),
            Cause::Burst { service, class, .. } => format!(
                "a burst of {} in service {service} within one hour, nothing else shared",
                class.replace('_', " ")
            ),
            Cause::Own(_) => "a signal of its own (the caller's doing, not a dependency's)".into(),
        }
    }
}

/// Signals with one cause: ids with the reason each joined, first the
/// earliest ("first finding").
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub cause: Cause,
    pub members: Vec<(String, String)>,
}

/// What grouping reads of a signal.
struct Seen<'a> {
    s: &'a Signal,
    start: i64,
    end: i64,
    dependency: Option<String>,
    service: Option<String>,
    per_turn: bool,
}

/// Whether `kind` can share a cause with others (a failure, or slowness).
pub fn joins(kind: Kind) -> bool {
    !matches!(kind, Kind::RetryAfterSuccess | Kind::ToolLoop)
}

fn is_daily(kind: Kind) -> bool {
    kind.is_daily()
}

/// The days a signal fired on.
fn days(s: &Signal) -> Vec<i32> {
    s.draft
        .days
        .iter()
        .filter_map(|d| day_from_str(d))
        .collect()
}

/// The dependency and service of `s`'s tool on its days: the dependency
/// with the most failed calls (then calls, then name), the service with
/// the most calls.
pub fn where_of(s: &Signal, facts: &Facts) -> (Option<String>, Option<String>) {
    let mut deps: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut services: BTreeMap<&str, u64> = BTreeMap::new();
    for day in days(s) {
        if let Some(f) = facts.daily.get(&(s.draft.tool.clone(), day)) {
            if let Some(d) = f.dependency.as_deref().filter(|d| !d.is_empty()) {
                let e = deps.entry(d).or_default();
                e.0 += f.errors;
                e.1 += f.calls;
            }
            *services.entry(f.service.as_str()).or_default() += f.calls;
        }
    }
    let dep = deps
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(d, _)| d.to_string());
    let service = services
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(s, _)| s.to_string())
        .filter(|s| !s.is_empty());
    (dep, service)
}

fn seen<'a>(s: &'a Signal, facts: &Facts) -> Seen<'a> {
    let d = &s.draft;
    let (dependency, service) = where_of(s, facts);
    let (start, end) = if is_daily(d.kind) {
        let ds = days(s);
        let first = ds.iter().min().copied().unwrap_or(0);
        let last = ds.iter().max().copied().unwrap_or(first);
        (
            i64::from(first) * NANOS_PER_DAY,
            (i64::from(last) + 1) * NANOS_PER_DAY,
        )
    } else {
        (d.first_seen_ns - HOUR_NS, d.last_seen_ns + HOUR_NS)
    };
    Seen {
        s,
        start,
        end,
        dependency,
        service,
        per_turn: !is_daily(d.kind),
    }
}

/// The groups of `signals` (the open and muted ones: a resolved signal
/// joins nothing new).
pub fn group(signals: &[&Signal], facts: &Facts) -> Vec<Group> {
    let mut order: Vec<&Signal> = signals.to_vec();
    order.sort_by(|a, b| {
        a.draft
            .first_seen_ns
            .cmp(&b.draft.first_seen_ns)
            .then_with(|| a.draft.id.cmp(&b.draft.id))
    });
    let seen: Vec<Seen<'_>> = order.iter().map(|s| seen(s, facts)).collect();
    // Components by tool and dependency first, then bursts between them.
    let mut edges = shared_edges(&seen);
    let comp = components(&edges);
    burst_edges(&seen, &comp, &mut edges);
    let comp = components(&edges);
    let mut out = Vec::new();
    for (root, _) in comp.iter().enumerate().filter(|(i, c)| *i == **c) {
        let reason = reasons(root, &edges, &seen);
        let members: Vec<usize> = reason.keys().copied().collect();
        let cause = cause_of(&seen, &members);
        out.push(Group {
            cause,
            members: members
                .into_iter()
                .map(|k| (seen[k].s.draft.id.clone(), reason[&k].clone()))
                .collect(),
        });
    }
    out
}

/// Each member's edges: the other member and the attribute that made it.
type Edges = Vec<Vec<(usize, String)>>;

fn link(edges: &mut Edges, i: usize, j: usize, why: String) {
    edges[i].push((j, why.clone()));
    edges[j].push((i, why));
}

fn overlap(a: &Seen<'_>, b: &Seen<'_>) -> bool {
    a.start < b.end && b.start < a.end
}

/// Edges between members that overlap in time and share their tool or
/// their dependency.
fn shared_edges(seen: &[Seen<'_>]) -> Edges {
    let n = seen.len();
    let mut edges: Edges = vec![Vec::new(); n];
    for i in 0..n {
        if !joins(seen[i].s.draft.kind) {
            continue;
        }
        for j in i + 1..n {
            let (a, b) = (&seen[i], &seen[j]);
            if !joins(b.s.draft.kind) || !overlap(a, b) {
                continue;
            }
            if a.s.draft.tool == b.s.draft.tool {
                link(&mut edges, i, j, format!("same tool {}", a.s.draft.tool));
            } else if let (Some(da), Some(db)) = (&a.dependency, &b.dependency) {
                if da == db {
                    link(&mut edges, i, j, format!("same dependency {da}"));
                }
            }
        }
    }
    edges
}

/// Each member's component, named by its first member.
fn components(edges: &Edges) -> Vec<usize> {
    let n = edges.len();
    let mut comp = vec![usize::MAX; n];
    for start in 0..n {
        if comp[start] != usize::MAX {
            continue;
        }
        let mut stack = vec![start];
        comp[start] = start;
        while let Some(i) = stack.pop() {
            for (j, _) in &edges[i] {
                if comp[*j] == usize::MAX {
                    comp[*j] = start;
                    stack.push(*j);
                }
            }
        }
    }
    comp
}

/// Bursts: per-turn failures of one class in one service within the
/// hour, between components (`comp`) that name no dependency.
fn burst_edges(seen: &[Seen<'_>], comp: &[usize], edges: &mut Edges) {
    let n = seen.len();
    let has_dep = |c: usize| (0..n).any(|k| comp[k] == c && seen[k].dependency.is_some());
    for i in 0..n {
        for j in i + 1..n {
            let (a, b) = (&seen[i], &seen[j]);
            let class = &a.s.draft.error_class;
            let failing = ErrorClass::parse(class)
                .is_some_and(|c| c.is_failure() && c != ErrorClass::Unknown);
            if comp[i] == comp[j]
                || !joins(a.s.draft.kind)
                || !joins(b.s.draft.kind)
                || !a.per_turn
                || !b.per_turn
                || !failing
                || class != &b.s.draft.error_class
                || a.service.is_none()
                || a.service != b.service
                || has_dep(comp[i])
                || has_dep(comp[j])
                || (a.s.draft.first_seen_ns - b.s.draft.first_seen_ns).abs() >= HOUR_NS
            {
                continue;
            }
            link(
                edges,
                i,
                j,
                format!(
                    "a burst of {} in service {} within the hour",
                    class.replace('_', " "),
                    a.service.as_deref().unwrap_or_default()
                ),
            );
        }
    }
}

/// The members of `root`'s component with why each joined: breadth first
/// from the earliest member, each joins by the edge that reached it,
/// naming the member it shares the attribute with.
fn reasons(root: usize, edges: &Edges, seen: &[Seen<'_>]) -> BTreeMap<usize, String> {
    let mut reason: BTreeMap<usize, String> = BTreeMap::new();
    reason.insert(root, "first finding".to_string());
    let mut queue = std::collections::VecDeque::from([root]);
    while let Some(i) = queue.pop_front() {
        let mut next: Vec<&(usize, String)> = edges[i].iter().collect();
        next.sort();
        for (j, why) in next {
            if !reason.contains_key(j) {
                reason.insert(*j, format!("{why} as {}", seen[i].s.draft.id));
                queue.push_back(*j);
            }
        }
    }
    reason
}

/// The cause of a group: its dependency when a member names one (the most
/// named, then the first by name), else its tool when it has one, else the
/// burst; a lone signal that joins nothing is its own.
fn cause_of(seen: &[Seen<'_>], members: &[usize]) -> Cause {
    let first = &seen[members[0]];
    if members.len() == 1 && !joins(first.s.draft.kind) {
        return Cause::Own(first.s.draft.key.clone());
    }
    let mut deps: BTreeMap<&str, usize> = BTreeMap::new();
    for &m in members {
        if let Some(d) = &seen[m].dependency {
            *deps.entry(d.as_str()).or_default() += 1;
        }
    }
    if let Some((d, _)) = deps
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
    {
        return Cause::Dependency(d.to_string());
    }
    let tools: BTreeSet<&str> = members
        .iter()
        .map(|&m| seen[m].s.draft.tool.as_str())
        .collect();
    if tools.len() == 1 {
        return Cause::Tool(first.s.draft.tool.clone());
    }
    let earliest = members
        .iter()
        .map(|&m| seen[m].s.draft.first_seen_ns)
        .min()
        .unwrap_or(0);
    Cause::Burst {
        service: first.service.clone().unwrap_or_default(),
        class: first.s.draft.error_class.clone(),
        hour_ns: earliest - earliest.rem_euclid(HOUR_NS),
    }
}
