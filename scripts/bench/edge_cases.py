#!/usr/bin/env python3
"""OTLP/JSON traces of the per-turn rules' edge cases, for check_sql.py.

    python3 edge_cases.py --out FILE

Writes one ExportTraceServiceRequest (JSON) whose turns, on 2026-09-01 ..
2026-09-06, each pin one case of docs/detection.md §1, §2 and §4.2-4.7: a
storm, a dead feed asked fifteen questions, fan-outs, exponential backoff
that recovers, split chains, wasted retries, a retry after success, polling
with changing results and with growing gaps, loops and cycles (broken,
research, period 3, alternating results), MCP client/server pairs and a
framework span around an MCP call, a failure only the server saw, turns
across midnight (read whole, counted on the day they began), a trace that
runs three days, `gen_ai.agent.call.id` turns without an agent span (one
spread over two traces), stacked retry layers, calls that start at the
same nanosecond, partly recorded results, empty arguments, and a trace that
has not settled at the check's `--now` (NOW below); and, on 09-05, the
rules of 95a2bbd (three confirmations are no poll, tests after edits or
after reads, a once-called read that blocks, loops not back to back, a
cycle of one step, varied commands, a wrapper around two attempts, an
unknown outer class, a turn whose agent span began the day before); and
control flow, no failure: interrupts and cancellations between failures
(no chain longer for them), a resume after each interrupt (no repeat after
success); on 09-05 too, who made a storm's retries: a model call between
every two attempts, between some, one overlapping an attempt, and a
deterministic request resent by the model; and the driver's refinements:
a streamed model call that starts in a gap and ends after the next
attempt started, nested model spans (the outermost is the call, its
tokens its own else the largest below), an outer model span starting
inside an attempt around an inner one in the gap. Import it with
`stormwatch import`; sweep with `--now NOW --since SINCE_DAYS`.

Standard library only; deterministic (ids are hashes of case names).
"""

import argparse
import hashlib
import json
from datetime import datetime, timezone

NOW = "2026-09-06T00:05:00Z"
SINCE_DAYS = 6

MS = 1_000_000
SEC = 1_000_000_000
DAY0 = int(datetime(2026, 9, 1, tzinfo=timezone.utc).timestamp()) * SEC


def hexid(*parts, n):
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[: 2 * n]


def attr(key, value):
    if isinstance(value, bool):
        v = {"boolValue": value}
    elif isinstance(value, int):
        v = {"intValue": str(value)}
    else:
        v = {"stringValue": value}
    return {"key": key, "value": v}


class Doc:
    def __init__(self):
        self.by_service = {}

    def span(self, service, trace, span, parent, name, start, end, attrs, error=False, events=None):
        s = {
            "traceId": trace,
            "spanId": span,
            "name": name,
            "kind": 1,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(end),
            "attributes": [attr(k, v) for k, v in attrs],
        }
        if parent:
            s["parentSpanId"] = parent
        if error:
            s["status"] = {"code": 2}
        if events:
            s["events"] = events
        self.by_service.setdefault(service, []).append(s)

    def json(self):
        return {
            "resourceSpans": [
                {
                    "resource": {"attributes": [attr("service.name", svc)]},
                    "scopeSpans": [{"scope": {"name": "edge-cases"}, "spans": spans}],
                }
                for svc, spans in sorted(self.by_service.items())
            ]
        }


# How a call fails: attributes (and whether the span status is ERROR).
FAIL = {
    "ok": ([], False),
    "503": ([("http.response.status_code", 503), ("error.type", "503")], True),
    "429": ([("http.response.status_code", 429)], True),
    "400": ([("http.response.status_code", 400), ("error.type", "InvalidAirportCode")], True),
    "410": ([("http.response.status_code", 410)], True),
    "timeout": ([("error.type", "TimeoutError")], True),
    "unknown": ([], True),
    "policy": ([("error.type", "content_policy_violation")], True),
    # control flow, no failure (detection.md §3)
    "interrupted": ([("error.type", "langgraph.errors.NodeInterrupt")], True),
    "cancelled": ([("rpc.grpc.status_code", 1)], True),
}


class Turn:
    """One agent turn: an `invoke_agent` root (or none, for `gen_ai.agent.call.id`
    turns), and the tool calls added to it."""

    def __init__(self, doc, case, start, service="edge-agent", agent=True, agent_call=None,
                 session=None, trace=None, length=None):
        self.doc, self.case, self.service = doc, case, service
        self.trace = trace or hexid("trace", case, n=16)
        self.root = hexid("root", case, n=8) if agent else None
        self.agent_call = agent_call
        self.start = start
        self.n = 0
        self.last_end = start
        self.length = length
        self.session = session or f"sess-{case}"

    def _id(self):
        self.n += 1
        return hexid("span", self.case, self.n, n=8)

    def call(self, tool, start, dur_ms, fail="ok", args="{}", result=None, parent=None,
             convention="gen_ai", span_id=None):
        sid = span_id or self._id()
        attrs, error = FAIL[fail]
        attrs = list(attrs)
        if convention == "mcp":
            attrs = [("mcp.method.name", "tools/call"), ("gen_ai.tool.name", tool)] + attrs
        elif convention == "openinference":
            attrs = [("openinference.span.kind", "TOOL"), ("tool.name", tool)] + attrs
        else:
            attrs = [("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", tool)] + attrs
        if args is not None:
            key = "tool.parameters" if convention == "openinference" else "gen_ai.tool.call.arguments"
            attrs.append((key, args if isinstance(args, str) else json.dumps(args)))
        if result is not None:
            key = "output.value" if convention == "openinference" else "gen_ai.tool.call.result"
            attrs.append((key, result if isinstance(result, str) else json.dumps(result)))
        if self.agent_call:
            attrs.append(("gen_ai.agent.call.id", self.agent_call))
        end = start + int(dur_ms * MS)
        self.doc.span(self.service, self.trace, sid, parent or self.root, f"execute_tool {tool}",
                      start, end, attrs, error)
        self.last_end = max(self.last_end, end)
        return sid, end

    def other(self, name, start, end, parent=None, attrs=()):
        sid = self._id()
        extra = [("gen_ai.agent.call.id", self.agent_call)] if self.agent_call else []
        self.doc.span(self.service, self.trace, sid, parent or self.root, name, start, end,
                      list(attrs) + extra)
        self.last_end = max(self.last_end, end)
        return sid

    def series(self, tool, start, n, dur_ms, gap_ms, fails, args, results=None):
        """n calls back to back: `fails` and `args` (and results) per call or one for all."""
        t = start
        for i in range(n):
            f = fails[i] if isinstance(fails, list) else fails
            a = args[i] if isinstance(args, list) else args
            r = results[i] if isinstance(results, list) else results
            g = gap_ms[i] if isinstance(gap_ms, list) else gap_ms
            _, end = self.call(tool, t, dur_ms, f, a, r)
            t = end + int(g * MS)
        return t

    def close(self):
        if self.root:
            end = self.start + (self.length if self.length else (self.last_end - self.start) + 50 * MS)
            self.doc.span(self.service, self.trace, self.root, None, "invoke_agent edge-agent",
                          self.start, end,
                          [("gen_ai.operation.name", "invoke_agent"), ("session.id", self.session)])


def build():
    doc = Doc()
    h = lambda day, hour, minute=0, sec=0: DAY0 + day * 86_400 * SEC + ((hour * 60 + minute) * 60 + sec) * SEC

    # --- day 0 (2026-09-01) ---------------------------------------------
    t = Turn(doc, "storm-same-args", h(0, 9))
    t.series("search_flights", t.start + 10 * MS, 6, 900, 40, "503", {"q": "LIS-BER"})
    t.close()

    t = Turn(doc, "dead-feed-15-questions", h(0, 9, 10))
    t.series("search_flights", t.start + 10 * MS, 15, 300, 5, "503", [{"q": f"q{i}"} for i in range(15)])
    t.close()

    t = Turn(doc, "fourteen-bash-commands", h(0, 9, 20))
    fails = ["ok"] * 14
    fails[4], fails[9] = "unknown", "503"
    t.series("bash", t.start + 10 * MS, 14, 100, 800, fails, [{"cmd": f"c{i}"} for i in range(14)])
    t.close()

    t = Turn(doc, "fan-out-five-failed-rounds", h(0, 9, 30))
    for r in range(5):
        for i in range(3):
            t.call("weather", t.start + r * SEC + i * MS, 500, "timeout", {"city": f"c{i}"})
    t.close()

    t = Turn(doc, "fan-out-then-retry-the-failed", h(0, 9, 40))
    for i in range(6):
        t.call("weather", t.start + 100 * MS + i * MS, 800, "timeout" if i % 2 == 0 else "ok", {"city": f"c{i}"})
    for i in range(3):
        t.call("weather", t.start + 2 * SEC + i * MS, 500, "ok", {"city": f"c{2 * i}"})
    t.close()

    t = Turn(doc, "exponential-backoff-recovers", h(0, 9, 50))
    t.series("pay", t.start + 10 * MS, 5, 100, [250, 500, 1000, 2000, 0], ["503"] * 4 + ["ok"], {"amount": 5})
    t.close()

    t = Turn(doc, "exponential-backoff-gives-up", h(0, 9, 55))
    t.series("pay", t.start + 10 * MS, 6, 100, [250, 500, 1000, 2000, 4000, 0], "503", {"amount": 6})
    t.close()

    t = Turn(doc, "two-chains-split-by-success", h(0, 10))
    t.series("pay", t.start + 10 * MS, 6, 100, 5, ["503", "503", "ok", "503", "503", "503"], {"amount": 7})
    t.close()

    t = Turn(doc, "storm-recovers-no-backoff", h(0, 10, 5))
    t.series("pay", t.start + 10 * MS, 7, 100, 5, ["429"] * 6 + ["ok"], {"amount": 8})
    t.close()

    t = Turn(doc, "storm-of-deterministic-failures", h(0, 10, 10))
    t.series("quote_price", t.start + 10 * MS, 6, 100, 5, "400", {"from": "LIS", "to": "BRX"})
    t.close()

    t = Turn(doc, "storm-of-mixed-failures", h(0, 10, 15))
    t.series("quote_price", t.start + 10 * MS, 6, 100, 5, ["400", "400", "unknown", "400", "policy", "400"],
             [{"n": i} for i in range(6)])
    t.close()

    t = Turn(doc, "wasted-410", h(0, 10, 20))
    t.series("book_flight", t.start + 10 * MS, 5, 150, [1000, 2000, 4000, 8000, 0], "410", {"id": "X1"})
    t.close()

    t = Turn(doc, "wasted-broken-by-other-class", h(0, 10, 25))
    t.series("book_flight", t.start + 10 * MS, 3, 150, 500, ["400", "400", "503"], {"id": "X2"})
    t.close()

    t = Turn(doc, "retry-after-success", h(0, 10, 30))
    t.series("book_flight", t.start + 10 * MS, 2, 300, 3000, "ok", {"id": "B1"})
    t.close()

    t = Turn(doc, "after-success-overlapping-is-not", h(0, 10, 32))
    t.call("book_flight", t.start + 10 * MS, 300, "ok", {"id": "B2"})
    t.call("book_flight", t.start + 100 * MS, 300, "ok", {"id": "B2"})
    t.close()

    t = Turn(doc, "after-success-empty-args", h(0, 10, 34))
    t.series("book_flight", t.start + 10 * MS, 3, 300, 1000, "ok", {})
    t.close()

    t = Turn(doc, "after-success-read-only", h(0, 10, 36))
    t.series("get_weather", t.start + 10 * MS, 3, 100, 1000, ["503", "ok", "ok"], {"city": "Oslo"})
    t.close()

    t = Turn(doc, "polling-changing-result", h(0, 10, 40))
    t.series("job_status", t.start + 10 * MS, 4, 100, [1000, 2000, 4000, 0], "ok", {"job": 7},
             ["running", "running", "running", "done"])
    t.close()

    t = Turn(doc, "polling-result-back-to-first", h(0, 10, 41))
    t.series("job_status", t.start + 10 * MS, 4, 100, 1000, "ok", {"job": 8},
             ["running", "done", "done", "running"])
    t.close()

    t = Turn(doc, "polling-growing-gaps", h(0, 10, 42))
    t.series("job_status", t.start + 10 * MS, 5, 100, [500, 1000, 2000, 4000, 0], "ok", {"job": 9})
    t.close()

    t = Turn(doc, "polling-partly-recorded", h(0, 10, 43))
    t.series("job_status", t.start + 10 * MS, 5, 100, [500, 1000, 2000, 4000, 0], "ok", {"job": 10},
             ["running", None, "running", "done", None])
    t.close()

    t = Turn(doc, "two-calls-are-never-polling", h(0, 10, 44))
    t.series("confirm", t.start + 10 * MS, 2, 100, 1000, "ok", {"id": 1}, ["c1", "c2"])
    t.close()

    t = Turn(doc, "loop-same-result", h(0, 10, 50))
    t.series("read_file", t.start + 10 * MS, 6, 100, 200, "ok", {"path": "a.rs"}, "same")
    t.close()

    t = Turn(doc, "loop-different-results", h(0, 10, 51))
    t.series("read_file", t.start + 10 * MS, 6, 100, 200, "ok", {"path": "b.rs"}, [f"r{i}" for i in range(6)])
    t.close()

    t = Turn(doc, "loop-four-is-not-enough", h(0, 10, 52))
    t.series("read_file", t.start + 10 * MS, 4, 100, 200, "ok", {"path": "c.rs"}, "same")
    t.close()

    t = Turn(doc, "loop-no-results-fixed-gaps", h(0, 10, 53))
    t.series("list_dir", t.start + 10 * MS, 7, 100, 200, "ok", {"path": "/"})
    t.close()

    t = Turn(doc, "loop-with-a-failure-among", h(0, 10, 54))
    t.series("list_dir", t.start + 10 * MS, 6, 100, 200, ["ok", "ok", "503", "ok", "ok", "ok"], {"path": "/x"})
    t.close()

    t = Turn(doc, "loop-no-args", h(0, 10, 55))
    t.series("list_dir", t.start + 10 * MS, 6, 100, 200, "ok", None, "same")
    t.close()

    def seq(case, start, steps, results=None):
        tt = Turn(doc, case, start)
        at = tt.start + 10 * MS
        for i, (tool, a) in enumerate(steps):
            r = results[i] if results else None
            tt.call(tool, at, 100, "ok", {"a": a}, r)
            at += 300 * MS
        tt.close()

    s, o = ("search", "q"), ("open", "doc-1")
    seq("cycle-three-times", h(0, 11), [s, o, s, o, s, o])
    seq("cycle-twice-is-not", h(0, 11, 1), [s, o, s, o])
    seq("cycle-broken", h(0, 11, 2), [s, o, ("write", "x"), s, o, s, o])
    seq("cycle-research", h(0, 11, 3), [("search", "a"), ("open", "1"), ("search", "b"), ("open", "2"),
                                        ("search", "c"), ("open", "3")])
    seq("cycle-period-three-and-a-half", h(0, 11, 4), [s, o, ("grep", "z")] * 3 + [s, o])
    seq("cycle-then-repeats-of-its-tool", h(0, 11, 5),
        [s, o, s, o, s, o, ("read", "r"), ("read", "r"), ("read", "r"), ("read", "r"), ("read", "r"),
         ("search", "other"), ("search", "other"), ("search", "other"), ("search", "other"), ("search", "other")])
    seq("cycle-alternating-results", h(0, 11, 6), [("poll", "p")] * 6, ["a", "b"] * 3)
    seq("cycle-two-runs", h(0, 11, 7), [s, o, s, o, s, o, ("x", 1), ("y", 2), ("x", 1), ("y", 2), ("x", 1), ("y", 2),
                                        ("x", 1)])
    seq("cycle-and-period-four", h(0, 11, 8), [("a", 1), ("b", 1), ("c", 1), ("d", 1)] * 3 + [("a", 1), ("b", 1)])

    # MCP: a client span with its server span inside it, six times, all failing.
    t = Turn(doc, "mcp-pairs-storm", h(0, 12))
    for i in range(6):
        at = t.start + 10 * MS + i * SEC
        client, _ = t.call("query_db", at, 500, "503", {"sql": "select 1"}, convention="mcp")
        t.call("query_db", at + 5 * MS, 490, "503", {"sql": "select 1"}, parent=client, convention="mcp")
    t.close()

    # A failure only the server saw (its result says isError), under a
    # framework's GenAI span: two conventions on the day, so the rollup pairs too.
    t = Turn(doc, "mcp-failure-only-inside", h(0, 12, 10))
    for i in range(6):
        at = t.start + 10 * MS + i * 200 * MS
        outer, _ = t.call("fetch_doc", at, 150, "ok", {"doc": "d"})
        t.call("fetch_doc", at + 5 * MS, 140, "ok", {"doc": "d"},
               result={"isError": True, "content": [{"type": "text", "text": "upstream 503 Service Unavailable"}]},
               parent=outer, convention="mcp")
    t.close()

    # A nest three deep, and a same-tool child that does not overlap its parent.
    t = Turn(doc, "nest-three-deep", h(0, 12, 20))
    for i in range(3):
        at = t.start + 10 * MS + i * SEC
        a, _ = t.call("kv_get", at, 300, "ok", {"k": "x"})
        b, _ = t.call("kv_get", at + 1 * MS, 298, "ok", {"k": "x"}, parent=a, convention="mcp")
        t.call("kv_get", at + 2 * MS, 296, "ok", {"k": "x"}, parent=b, convention="mcp")
    late, _ = t.call("kv_get", t.start + 5 * SEC, 100, "ok", {"k": "y"})
    t.call("kv_get", t.start + 6 * SEC, 100, "ok", {"k": "y"}, parent=late)
    t.close()

    # Stacked retry layers: two wrapper spans, each retrying a tool three times.
    t = Turn(doc, "stacked-layers", h(0, 12, 30))
    for layer in range(2):
        base = t.start + 10 * MS + layer * 5 * SEC
        w = t.other("retry_wrapper", base, base + 4 * SEC)
        for i in range(3):
            t.call("charge_card", base + i * SEC, 200, ["503", "503", "ok"][i], {"card": layer}, parent=w)
    t.close()

    # gen_ai.agent.call.id turns: no agent span, the id on every span.
    t = Turn(doc, "agent-call-storm", h(0, 13), agent=False, agent_call="run-41")
    t.other("chat gpt", t.start, t.start + 5 * MS)
    t.series("lookup", t.start + 10 * MS, 6, 100, 10, "503", {"id": 1})
    t = Turn(doc, "agent-call-two-traces-a", h(0, 13, 10), agent=False, agent_call="run-42")
    t.series("lookup", t.start + 10 * MS, 3, 100, 10, "503", {"id": 2})
    t = Turn(doc, "agent-call-two-traces-b", h(0, 13, 10, 2), agent=False, agent_call="run-42")
    t.series("lookup", t.start + 10 * MS, 3, 100, 10, "503", {"id": 2})

    # A root that is not an agent, with a tool call two levels down.
    t = Turn(doc, "no-agent-root", h(0, 13, 20), agent=False)
    root = t.other("http GET /plan", t.start, t.start + 20 * SEC)
    mid = t.other("plan step", t.start + 5 * MS, t.start + 19 * SEC, parent=root)
    at = t.start + 10 * MS
    for i in range(6):
        t.call("geocode", at, 100, "503", {"q": i}, parent=mid)
        at += 110 * MS

    # Calls that start at the same nanosecond.
    t = Turn(doc, "same-start-ties", h(0, 13, 30))
    for r in range(5):
        at = t.start + 10 * MS + r * SEC
        t.call("translate", at, 300, "400" if r % 2 else "503", {"s": f"x{r}"})
        t.call("translate", at, 300, "503" if r % 2 else "400", {"s": f"y{r}"})
    t.close()

    # A cycle whose steps start at the same nanosecond two by two: the stored
    # order decides which call comes first.
    t = Turn(doc, "cycle-with-tied-starts", h(0, 13, 40))
    for r in range(3):
        at = t.start + 10 * MS + r * SEC
        t.call("search", at, 100, "ok", {"a": "tq"})
        t.call("open", at, 100, "ok", {"a": "td"})
    t.close()

    # --- across midnight 09-01 / 09-02 ----------------------------------
    t = Turn(doc, "storm-across-midnight", h(0, 23, 59, 50))
    t.series("search_flights", h(1, 0, 0, 1), 8, 1950, 50, "503", {"q": "late"})
    t.close()

    t = Turn(doc, "turn-at-2330-storm-at-0110", h(0, 23, 30))
    t.call("search_flights", t.start + 10 * MS, 200, "ok", {"q": "early"})
    t.series("search_flights", h(1, 1, 10), 6, 300, 20, "503", {"q": "late2"})
    t.close()

    # A trace over three days: the agent span on 09-01, calls on 09-02 and 09-03.
    t = Turn(doc, "three-day-trace", h(0, 22))
    t.series("crawl", h(1, 22), 6, 100, 10, "503", {"u": 1})
    t.series("crawl", h(2, 1), 6, 100, 10, "503", {"u": 2})
    t.close()

    # A trace whose second agent turn starts after midnight (same trace).
    t = Turn(doc, "two-turns-one-trace-a", h(1, 23, 58))
    t.series("summarize", t.start + 10 * MS, 6, 100, 10, "timeout", {"d": 1})
    t.close()
    t2 = Turn(doc, "two-turns-one-trace-b", h(2, 0, 2), trace=t.trace)
    t2.series("summarize", t2.start + 10 * MS, 6, 100, 10, "timeout", {"d": 2})
    t2.close()

    # --- day 2, 3 -----------------------------------------------------------
    t = Turn(doc, "openinference-loop", h(2, 9))
    t.series("retrieve", t.start + 10 * MS, 5, 100, 100, "ok", {"q": "x"}, "same")
    for i in range(5):
        t.call("retrieve", t.start + 5 * SEC + i * 200 * MS, 100, "ok", {"q": "y"}, "same", convention="openinference")
    t.close()

    # Two roots in one trace: the first turn's calls run past midnight, the
    # second turn starts after it. The day after has a root of the trace, so
    # its frame does not read the day before: the first turn is judged whole
    # from its own day only (its frame reads on while its root is open).
    t = Turn(doc, "two-roots-first-runs-past-midnight", h(2, 23, 58), length=12 * 60 * SEC)
    t.series("render", h(2, 23, 59, 58), 6, 900, 10, "503", {"p": 1})
    t.close()
    t2 = Turn(doc, "two-roots-second", h(3, 0, 1), trace=t.trace)
    t2.series("render", t2.start + 10 * MS, 6, 100, 10, "503", {"p": 2})
    t2.close()

    # A child whose parent (the root) ended before midnight: the root's day
    # stops reading at midnight, so the calls after it are not its turn's
    # there; the next day's frame reads the root back, and the turn began
    # the day before. Three failures on each side of midnight: no storm.
    t = Turn(doc, "root-ended-before-midnight", h(2, 23), length=30 * 60 * SEC)
    t.series("sync", h(2, 23, 29), 3, 100, 10, "503", {"s": 1})
    t.series("sync", h(3, 0, 30), 3, 100, 10, "503", {"s": 1})
    t.close()

    # Traces with no root stored (the root span never arrived): a wrapper
    # span with a missing parent, calls under it on day 0 and on day 2. Day
    # 0's frame reads day 2 for it only because other traces keep it going
    # through day 1 (the three-day trace). On day 3 the same shape with
    # nothing on day 4: day 3's frame stops at day 4 and never reads day 5.
    for case, d0, d2 in (("rootless-read-through", 0, 2), ("rootless-read-stops", 3, 5)):
        t = Turn(doc, case, h(d0, 20), agent=False)
        w = t.other("job step", h(d0, 20), h(d0, 21), parent=hexid("lost", case, n=8))
        for day, hour in ((d0, 20), (d2, 0)):
            at = h(day, hour, 0, 30)
            for i in range(3):
                t.call("export", at, 100, "503", {"job": case}, parent=w)
                at += 110 * MS

    # --- day 4: the rules of 95a2bbd ------------------------------------
    # Polling: three bookings with three different confirmations are no poll
    # (a repeat after success); a state that stayed then changed is one.
    seq("three-confirmations", h(4, 9), [("book_hotel", "h-9")] * 3, ["c1", "c2", "c3"])
    seq("state-stayed-then-changed", h(4, 9, 1), [("job_state", "j")] * 4, ["run", "run", "run", "done"])
    # The same tests after each edit: no repeat after success, no loop; with
    # only reads in between (a camelCase and an MCP-prefixed read), a repeat.
    seq("tests-after-edits", h(4, 9, 2), [("bash", "npm test"), ("edit_file", "e")] * 6)
    seq("tests-after-reads", h(4, 9, 3), [("bash", "npm test"), ("getStatus", "a"), ("bash", "npm test"),
                                          ("mcp__gh__get_issue", "b"), ("bash", "npm test"),
                                          ("getStatus", "a"), ("mcp__gh__get_issue", "b")])
    # A tool called once in between blocks a repeat, even a read-only one.
    seq("once-called-read-blocks", h(4, 9, 4), [("bash", "ls"), ("get_once", "x"), ("bash", "ls")])
    # Plain repeats without results: only the longest back-to-back run counts.
    seq("repeats-not-back-to-back", h(4, 9, 5), [("grep2", "q"), ("grep2", "q"), ("grep2", "q"), ("w", 1),
                                                 ("grep2", "q"), ("grep2", "q"), ("w", 2)])
    # A cycle whose steps repeat one (tool, arguments) with other results is none.
    seq("cycle-same-step-other-result", h(4, 9, 6), [("peek", "s"), ("peek", "s")] * 3, ["r1", "r2"] * 3)
    # Different commands failing as unknown, then one that works: no storm;
    # the same command failing so is one.
    t = Turn(doc, "varied-commands", h(4, 10))
    t.series("sh", t.start + 10 * MS, 6, 100, 500, ["unknown"] * 5 + ["ok"], [{"c": i} for i in range(6)])
    t.close()
    t = Turn(doc, "same-command", h(4, 10, 5))
    t.series("sh2", t.start + 10 * MS, 6, 100, 500, ["unknown"] * 5 + ["ok"], {"c": 0})
    t.close()
    # A wrapper (ok) around two attempts (a 503, then ok), five times: the
    # attempts are the calls (a chain each time), the wrapper is none; an
    # unknown outer call takes its only inner span's specific class.
    t = Turn(doc, "wrapper-two-attempts", h(4, 11))
    for i in range(5):
        at = t.start + 10 * MS + i * 2 * SEC
        w, _ = t.call("query_db2", at, 1000, "ok", {"q": i})
        t.call("query_db2", at + 10 * MS, 400, "503", {"q": i}, parent=w, convention="mcp")
        t.call("query_db2", at + 600 * MS, 300, "ok", {"q": i}, parent=w, convention="mcp")
    t.close()
    t = Turn(doc, "unknown-outer-specific-inner", h(4, 11, 5))
    for i in range(6):
        at = t.start + 10 * MS + i * 200 * MS
        outer, _ = t.call("fetch_doc2", at, 150, "unknown", {"doc": "d"})
        t.call("fetch_doc2", at + 5 * MS, 140, "503", {"doc": "d"}, parent=outer, convention="mcp")
    t.close()
    # A turn whose agent span starts before midnight, its calls after it:
    # the turn belongs to the day its agent span began.
    t = Turn(doc, "anchor-day", h(3, 23, 59, 59))
    t.series("geocode2", h(4, 0, 0, 5), 6, 100, 10, "503", {"q": "a"})
    t.close()

    # A supervisor handing a failing task to three sub-agents (their own
    # agent spans under its): 3 + 4 + 3 calls, one storm of 10 in its turn.
    t = Turn(doc, "subagents-handoff", h(4, 12))
    at = t.start + 10 * MS
    for k, n in enumerate([3, 4, 3]):
        sub_start = at
        sub_end = at + n * 450 * MS + 100 * MS
        sub = t.other(f"invoke_agent sub-{k}", sub_start, sub_end,
                      attrs=[("gen_ai.operation.name", "invoke_agent")])
        for i in range(n):
            t.call("book_seat", at + 10 * MS, 400, "503", {"seat": "12A"}, parent=sub)
            at += 450 * MS
        at = sub_end + 200 * MS
    t.close()
    # A retry's backoff (1, 2, 4 s) before a success is no poll: the same
    # booking sent again 0.5 s after it succeeded is a retry after success.
    t = Turn(doc, "backoff-success-then-repeat", h(4, 12, 5))
    t.series("book_room", t.start + 10 * MS, 5, 100, [1000, 2000, 4000, 500, 0],
             ["503", "503", "503", "ok", "ok"], {"room": 7}, [None, None, None, "c1", "c2"])
    t.close()
    # A status poll whose answer carries a counter: every result differs, the
    # gaps grow (1, 2, 4 ... 64 s): polling, no finding.
    t = Turn(doc, "progress-poll", h(4, 12, 10))
    t.series("job_progress", t.start + 10 * MS, 8, 100, [1000 << k for k in range(7)] + [0], "ok",
             {"job": 9}, [{"status": "running", "progress": p} for p in (5, 12, 20, 28, 36, 61, 88)]
             + [{"status": "succeeded", "progress": 100}])
    t.close()

    # Control flow is no failure: four failures with interrupts and a
    # cancellation between them are a chain of four, no storm (of seven).
    t = Turn(doc, "interrupts-between-failures", h(4, 13))
    t.series("book_seat2", t.start + 10 * MS, 7, 100, 5,
             ["503", "interrupted", "503", "cancelled", "503", "interrupted", "503"], {"seat": "1C"})
    t.close()
    # Six failures around an interrupt: one storm of six calls.
    t = Turn(doc, "storm-around-an-interrupt", h(4, 13, 5))
    t.series("book_seat3", t.start + 10 * MS, 7, 100, 5, ["503"] * 3 + ["interrupted"] + ["503"] * 3,
             {"seat": "2D"})
    t.close()
    # LangGraph's resume: each booking interrupted for approval, then run
    # again with the same arguments and answered: no repeat after success.
    t = Turn(doc, "interrupt-then-resume", h(4, 13, 10))
    t.series("book_room2", t.start + 10 * MS, 4, 100, 300, ["interrupted", "ok", "cancelled", "ok"],
             [{"room": 1}, {"room": 1}, {"room": 2}, {"room": 2}], [None, "r1", None, "r2"])
    t.close()

    # Who is knocking (detection.md §4.2, "Driver"): a chat span between
    # every two attempts (model), between some (mixed), one overlapping an
    # attempt (not between two: code), and a deterministic request the
    # model resent after each failure (wasted retries, model).
    def knock(case, start, tool, n, chats, fail="503", args=None, overlap=False):
        t = Turn(doc, case, start)
        at = t.start + 10 * MS
        for i in range(n):
            _, end = t.call(tool, at, 100, fail, args or {"q": case})
            at = end + 300 * MS
            if i + 1 < n and i in chats:
                c0 = end - 50 * MS if overlap else end + 50 * MS
                t.other("chat scripted", c0, end + 250 * MS,
                        attrs=[("gen_ai.operation.name", "chat"), ("gen_ai.request.model", "m1"),
                               ("gen_ai.usage.input_tokens", 60), ("gen_ai.usage.output_tokens", 9)])
        t.close()

    knock("driver-model", h(4, 14), "quote_a", 6, range(5))
    knock("driver-mixed", h(4, 14, 5), "quote_b", 6, {0, 2})
    knock("driver-overlap", h(4, 14, 10), "quote_c", 6, range(5), overlap=True)
    knock("driver-wasted-model", h(4, 14, 15), "quote_d", 3, range(2), fail="400")

    # The driver's two refinements. (a) A model call lies in a gap when its
    # START does (within 1 ms either side): a streamed answer that starts in
    # the gap and ends after the next attempt started counts (model), and so
    # does one starting 1 ms before the earlier attempt ended. (b) A model
    # span under a model span (anywhere up its parents) is no call of its
    # own: the outermost is the call, its tokens its own when recorded, else
    # the largest recorded below it (input and output each); an outer one
    # that starts inside an attempt keeps its inner one from counting.
    def chat(t, start, end, parent=None, tokens=None):
        attrs = [("gen_ai.operation.name", "chat"), ("gen_ai.request.model", "m1")]
        if tokens:
            attrs += [("gen_ai.usage.input_tokens", tokens[0]), ("gen_ai.usage.output_tokens", tokens[1])]
        return t.other("chat scripted", start, end, parent=parent, attrs=attrs)

    def knock_with(case, start, tool, n, between):
        t = Turn(doc, case, start)
        at = t.start + 10 * MS
        for i in range(n):
            _, end = t.call(tool, at, 100, "503", {"q": case})
            at = end + 300 * MS
            if i + 1 < n:
                between(t, i, end, at)
        t.close()

    def streamed(t, i, end, nxt):
        # starts in the gap (or 1 ms before the attempt ended), ends 100 ms
        # into the next attempt
        chat(t, end - MS if i % 2 else end + 50 * MS, nxt + 100 * MS, tokens=(60, 9))

    def nested(t, i, end, nxt):
        # an outer chat (tokens of its own on odd gaps) around a step span
        # around two inner chats
        outer = chat(t, end + 20 * MS, end + 280 * MS, tokens=(100, 20) if i % 2 else None)
        step = t.other("step", end + 30 * MS, end + 270 * MS, parent=outer)
        chat(t, end + 40 * MS, end + 150 * MS, parent=step, tokens=(60, 9))
        chat(t, end + 160 * MS, end + 260 * MS, parent=step, tokens=(80, 5))

    def outer_early(t, i, end, nxt):
        # the outer chat starts inside the attempt, its inner one in the gap
        outer = chat(t, end - 50 * MS, end + 280 * MS)
        chat(t, end + 40 * MS, end + 250 * MS, parent=outer, tokens=(60, 9))

    knock_with("driver-streamed", h(4, 14, 20), "quote_e", 6, streamed)
    knock_with("driver-nested", h(4, 14, 25), "quote_f", 6, nested)
    knock_with("driver-nested-outer-early", h(4, 14, 30), "quote_g", 6, outer_early)

    # The check's "now" is 09-06 00:05: this turn ended 30 s before, not settled.
    t = Turn(doc, "not-settled", h(5, 0, 3, 40))
    t.series("search_flights", t.start + 10 * MS, 6, 1000, 10, "503", {"q": "now"})
    t.close()
    t = Turn(doc, "settled-today", h(5, 0, 0, 5))
    t.series("search_flights", t.start + 10 * MS, 6, 100, 10, "503", {"q": "now2"})
    t.close()

    return doc.json()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(build(), f, separators=(",", ":"))


if __name__ == "__main__":
    main()
