#!/usr/bin/env python3
"""OTLP/JSON traces of the ignored-Retry-After rule's edge cases
(docs/detection.md §4.9: `ignored_retry_after`, and the waits read at
ingest), for check_sql.py.

    python3 retry_after_cases.py --out FILE

One agent turn per case, on 2026-11-02, one tool each:

- fare_search: six 429s, each on the HTTP client span under the tool span
  (`http.response.header.retry_after = ["30"]`, as the Python
  instrumentations write it), 200 ms apart: a finding (and a storm);
- book_hotel: 429 saying 30 s on the tool span itself
  (`http.response.header.retry-after`), 31 s later a 429 saying 60 s,
  61 s later a success: nothing;
- rent_car: four 429s saying 2 s, 900 ms apart (early: 900 + the 1 s
  tolerance < 2 s): a finding; search_cars: the same 1.5 s apart, within
  the tolerance: nothing;
- get_quote: a 429 saying 10 s, a success 200 ms later: one early retry,
  under min_early: nothing;
- lookup_fx: five 429s saying 5 s, gaps 0.2, 6, 0.2, 6 s: two early of
  four, not more than half: nothing; convert_fx: gaps 0.2, 0.2, 6 s: two
  of three: a finding;
- ask_model: four failures whose exception says "Please try again in
  20s." (no header), 300 ms apart: a finding;
- fetch_rates: three 429s whose HTTP child's Retry-After is an HTTP-date
  30 s after its end, 500 ms apart: a finding;
- sync_inventory: four 429s saying 30 s on a child that ends after its
  tool span: not the call's wait: nothing;
- quote_mcp: three results `{"isError": true, ...}` whose text says
  "HTTP 429 ..., retry_after: 15", 100 ms apart: a finding;
- nap_search: four calls of 5 s, each with an HTTP child that ends 100 ms
  in saying 429 Retry-After 3 s (the tool sleeps the wait out inside
  itself, then fails otherwise), 200 ms apart: the wait counts from the
  child's end, over long before the retry: nothing;
- bad_request: four 400s whose tool span carries retry-after 30 (echoed
  in a 400's body), 200 ms apart: no wait fixes a 400: nothing;
- pace_search: six 429s saying 30 s on the HTTP child, each retried 31 s
  later, then a success: every wait honoured and ok at the end, the
  server's own pacing: no storm, no finding;
- wait_out_search: six 429s saying 30 s, each retried 31 s later, never a
  success: a storm (gave up), no ignored_retry_after.

Import it with `stormwatch import`; sweep with `--now NOW --since
SINCE_DAYS`. Standard library only; deterministic.
"""

import argparse
import email.utils
import json
import os
import sys
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from edge_cases import MS, SEC, Doc, Turn, attr  # noqa: E402

NOW = "2026-11-03T06:00:00Z"
SINCE_DAYS = 2
DAY = int(datetime(2026, 11, 2, tzinfo=timezone.utc).timestamp()) * SEC


def header(key, value):
    """A captured response header: a string array, as the conventions say."""
    return {"key": key, "value": {"arrayValue": {"values": [{"stringValue": value}]}}}


def at(hour, minute=0):
    return DAY + (hour * 3600 + minute * 60) * SEC


class Calls:
    """Tool calls of one turn, with what their spans say about waiting."""

    def __init__(self, doc, case, start):
        self.t = Turn(doc, case, start, service="retry-agent")
        self.doc = doc

    def call(self, tool, start, status=429, own=None, child=None, child_late=False,
             exception=None, result=None, duration_ms=100, child_end_ms=None,
             child_status=None):
        """One call of `duration_ms` (100): `own` a retry-after header on the
        tool span, `child` one on an HTTP client span inside it (a callable
        of the child's end for a date; ending `child_end_ms` after the
        call's start, else 10 ms before its end), `exception` its message,
        `result` the recorded result (then the span ends OK)."""
        t = self.t
        sid = t._id()
        end = start + duration_ms * MS
        attrs = [attr("gen_ai.operation.name", "execute_tool"), attr("gen_ai.tool.name", tool),
                 attr("gen_ai.tool.call.arguments", json.dumps({"case": t.case}))]
        error = result is None and status != 200
        if status != 200 and result is None and exception is None:
            attrs.append(attr("error.type", str(status)))
        if own is not None:
            attrs.append(header("http.response.header.retry-after", own))
        if result is not None:
            attrs.append(attr("gen_ai.tool.call.result", json.dumps(result)))
        events = None
        if exception is not None:
            events = [{"name": "exception", "timeUnixNano": str(end),
                       "attributes": [attr("exception.type", "RateLimitError"),
                                      attr("exception.message", exception)]}]
        s = {"traceId": t.trace, "spanId": sid, "parentSpanId": t.root, "name": f"execute_tool {tool}",
             "kind": 1, "startTimeUnixNano": str(start), "endTimeUnixNano": str(end),
             "attributes": attrs}
        if error:
            s["status"] = {"code": 2}
        if events:
            s["events"] = events
        self.doc.by_service.setdefault("retry-agent", []).append(s)
        if child is not None:
            cid = t._id()
            c_end = end + 50 * MS if child_late else end - 10 * MS
            if child_end_ms is not None:
                c_end = start + child_end_ms * MS
            value = child(c_end) if callable(child) else child
            self.doc.by_service["retry-agent"].append({
                "traceId": t.trace, "spanId": cid, "parentSpanId": sid, "name": "GET", "kind": 3,
                "startTimeUnixNano": str(start + 10 * MS), "endTimeUnixNano": str(c_end),
                "attributes": [attr("http.request.method", "GET"),
                               attr("url.full", "http://api.example/v1"),
                               attr("http.response.status_code", child_status or status),
                               header("http.response.header.retry_after", value)],
                "status": {"code": 2},
            })
        t.last_end = max(t.last_end, end)
        return end

    def series(self, tool, start, gaps_ms, **kw):
        """len(gaps_ms) + 1 calls, `gaps_ms` apart; `statuses` per call."""
        statuses = kw.pop("statuses", None)
        end = None
        t = start
        for k in range(len(gaps_ms) + 1):
            status = statuses[k] if statuses else kw.get("status", 429)
            args = dict(kw, status=status)
            if status == 200:
                args = {"status": 200}
            end = self.call(tool, t, **args)
            if k < len(gaps_ms):
                t = end + int(gaps_ms[k] * MS)
        return end

    def close(self):
        self.t.close()


def http_date(end_ns, ahead_s):
    return email.utils.formatdate((end_ns // SEC) + ahead_s, usegmt=True)


def build():
    doc = Doc()
    cases = [
        ("fare_search", dict(gaps_ms=[200] * 5, child="30")),
        ("book_hotel", None),
        ("rent_car", dict(gaps_ms=[900] * 3, own="2")),
        ("search_cars", dict(gaps_ms=[1500] * 3, own="2")),
        ("get_quote", dict(gaps_ms=[200], own="10", statuses=[429, 200])),
        ("lookup_fx", dict(gaps_ms=[200, 6000, 200, 6000], own="5")),
        ("convert_fx", dict(gaps_ms=[200, 200, 6000], own="5")),
        ("ask_model", dict(gaps_ms=[300] * 3, exception="Rate limit reached. Please try again in 20s.")),
        ("fetch_rates", dict(gaps_ms=[500] * 2, child=lambda end: http_date(end, 31))),
        ("sync_inventory", dict(gaps_ms=[200] * 3, child="30", child_late=True)),
        ("quote_mcp", dict(gaps_ms=[100] * 2, result={
            "isError": True,
            "content": [{"type": "text", "text": "HTTP 429 Too Many Requests, retry_after: 15"}]})),
        ("nap_search", dict(gaps_ms=[200] * 3, child="3", duration_ms=5000, child_end_ms=100,
                            status=504, child_status=429)),
        ("bad_request", dict(gaps_ms=[200] * 3, own="30", status=400)),
        ("pace_search", dict(gaps_ms=[31000] * 6, child="30", statuses=[429] * 6 + [200])),
        ("wait_out_search", dict(gaps_ms=[31000] * 5, child="30")),
    ]
    for k, (tool, kw) in enumerate(cases):
        c = Calls(doc, f"retry-after-{tool}", at(1 + k))
        start = c.t.start + 10 * MS
        if kw is None:
            # honoured: 30 s, then 60 s
            end = c.call(tool, start, own="30")
            end = c.call(tool, end + 31 * SEC, own="60")
            c.call(tool, end + 61 * SEC, status=200)
        else:
            c.series(tool, start, **kw)
        c.close()
    return doc.json()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(build(), f, separators=(",", ":"))


if __name__ == "__main__":
    main()
