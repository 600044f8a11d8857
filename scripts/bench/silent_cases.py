#!/usr/bin/env python3
"""OTLP/JSON traces of the silent-tool rules' edge cases (docs/detection.md
§4.8: `tool_silent`, `no_success`), for check_sql.py.

    python3 silent_cases.py --out FILE

Those rules compare days, so this writes fourteen days of steady traffic,
2026-10-01 .. 2026-10-14 (a Thursday to a Wednesday), with, one service
per case:

- quotes-agent: 120 turns a day (20 of them call no tool, 10 hand work to
  a sub-agent, one begins a second before midnight and calls after it);
  `fetch_quote` twice a turn (200 a day) until it stops on 10-11 while the
  turns go on: tool_silent on 10-11 .. 10-14; `log_event` steady: nothing;
  `fetch_fx`, new on 10-09, 200 a day for two days, then none: not
  judged on 10-11 (two baseline days since it appeared), tool_silent
  10-12 .. 10-14;
- billing-agent: `charge_card` 6 calls a day, one failing, until 10-08;
  from 10-09 every call fails: no_success from 10-11 (three days after
  the last success, 18 calls since); `sync_ledger`, new on 10-06 and
  never succeeding, 4 a day: no_success from 10-08 (exactly three days
  after the start of its first day); `ping_vendor`, one failing call a
  day: no_success from 10-10 (its tenth call); `refund_card`, 3 a day,
  whose last success began 10-08 23:59:59.5 and ended on 10-09, failing
  from 10-09: no_success from 10-13 (10-11 falls 1.5 s short of three
  days; on 10-12 the calls of the days after 10-09 are 9);
- docs-agent: 100 turns a weekday, 10 on weekends, `search_docs` twice a
  turn: calls and turns drop together: nothing;
- report-agent: 30 turns a day, `export_pdf` 3 a day, none on 10-09: too
  few to judge: nothing;
- rootless-svc: turns with no agent span (a root `POST /ask`, some of
  whose parents were never stored): `lookup_user` once a turn, 40 a day,
  none from 10-12: tool_silent 10-12 .. 10-14;
- callid-svc: `gen_ai.agent.call.id` turns with no agent span (a chat
  span and a tool span, both roots): `classify` 30 a day, none from
  10-13: tool_silent 10-13, 10-14;
- super-svc / worker-svc: the turns are super-svc's (its agent span is
  the outermost), `run_job` is worker-svc's (under a worker-svc sub-agent):
  worker-svc has no turns, so `run_job` stopping on 10-12 is not judged.

Today (10-14) is cut at NOW (20:00): its traffic ends before 19:30.
Import it with `stormwatch import`; sweep with `--now NOW --since
SINCE_DAYS`. Standard library only; deterministic.
"""

import argparse
import json
import os
import sys
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from edge_cases import MS, SEC, Doc, Turn, hexid  # noqa: E402

NOW = "2026-10-14T20:00:00Z"
SINCE_DAYS = 13
DAYS = 14
DAY0 = int(datetime(2026, 10, 1, tzinfo=timezone.utc).timestamp()) * SEC
MIN = 60 * SEC


def at(day, minute):
    """`minute` minutes into `day` (0 = 10-01)."""
    return DAY0 + day * 86_400 * SEC + int(minute * MIN)


def spread(n, span_minutes=1140):
    """n start minutes spread over the day's first 19 hours."""
    return [i * span_minutes / n for i in range(n)]


def weekend(day):
    return (day + 3) % 7 in (5, 6)  # 10-01-2026 is a Thursday


def quotes(doc, day):
    for k, m in enumerate(spread(120)):
        case = f"quotes-{day}-{k}"
        t = Turn(doc, case, at(day, m) + 5 * SEC, service="quotes-agent")
        s = t.start + 10 * MS
        if k % 6 == 5:
            t.other("chat gpt-4o", s, s + 200 * MS)  # a turn that calls no tool
            t.close()
            continue
        parent = None
        if k % 12 == 0:  # a sub-agent: still the supervisor's turn
            parent = t.other("invoke_agent pricing", s, s + 900 * MS,
                             attrs=[("gen_ai.operation.name", "invoke_agent")])
        if day < 10:
            for i in range(2):
                t.call("fetch_quote", s + i * 300 * MS, 200, "ok", {"q": k, "i": i}, parent=parent)
        if day in (8, 9):
            for i in range(2):
                t.call("fetch_fx", s + 700 * MS + i * 50 * MS, 20, "ok", {"fx": k, "i": i}, parent=parent)
        if k % 2 == 0:
            t.call("log_event", s + 650 * MS, 5, "ok", {"e": k}, parent=parent)
        t.close()
    if day < DAYS - 1:
        # begins a second before midnight, calls after it: a turn of `day`
        t = Turn(doc, f"quotes-midnight-{day}", at(day + 1, 0) - SEC, service="quotes-agent")
        t.call("log_event", at(day + 1, 0) + SEC, 5, "ok", {"e": "midnight"})
        t.close()


def billing(doc, day):
    # charge_card: 6 calls a day at 2:00, 5:00 ... 17:00; the first fails
    # until 10-08, all fail from 10-09.
    for k in range(6):
        t = Turn(doc, f"billing-charge-{day}-{k}", at(day, 120 + 180 * k), service="billing-agent")
        fail = "503" if (day >= 8 or k == 0) else "ok"
        t.call("charge_card", t.start + 10 * MS, 300, fail, {"order": f"{day}-{k}"})
        t.close()
    if day >= 5:
        for k in range(4):
            t = Turn(doc, f"billing-ledger-{day}-{k}", at(day, 60 + 240 * k), service="billing-agent")
            t.call("sync_ledger", t.start + 10 * MS, 100, "timeout", {"batch": f"{day}-{k}"})
            t.close()
    t = Turn(doc, f"billing-ping-{day}", at(day, 600), service="billing-agent")
    t.call("ping_vendor", t.start + 10 * MS, 50, "unknown", {"n": day})
    t.close()
    # refund_card: 3 a day; ok until 10-08, whose last call begins at
    # 23:59:59.5 and ends at 00:00:01.5; failing from 10-09.
    for k in range(3):
        start = at(day, 300 + 240 * k)
        if day == 7 and k == 2:
            start = at(day + 1, 0) - SEC
        t = Turn(doc, f"billing-refund-{day}-{k}", start, service="billing-agent")
        fail = "ok" if day <= 7 else "policy"
        t.call("refund_card", t.start + 500 * MS, 2000, fail, {"refund": f"{day}-{k}"})
        t.close()


def docs(doc, day):
    n = 10 if weekend(day) else 100
    for k, m in enumerate(spread(n)):
        t = Turn(doc, f"docs-{day}-{k}", at(day, m) + 7 * SEC, service="docs-agent")
        for i in range(2):
            t.call("search_docs", t.start + 10 * MS + i * 100 * MS, 50, "ok", {"d": k, "i": i})
        t.close()


def report(doc, day):
    for k, m in enumerate(spread(30)):
        t = Turn(doc, f"report-{day}-{k}", at(day, m) + 11 * SEC, service="report-agent")
        s = t.start + 10 * MS
        if k % 10 == 0 and day != 8:
            t.call("export_pdf", s, 900, "ok", {"r": k})
        else:
            t.other("chat claude", s, s + 300 * MS)
        t.close()


def rootless(doc, day):
    svc = "rootless-svc"
    for k, m in enumerate(spread(40)):
        case = f"rootless-{day}-{k}"
        trace = hexid("trace", case, n=16)
        root = hexid("root", case, n=8)
        s = at(day, m) + 13 * SEC
        # every fifth request's parent (a gateway span) was never stored
        parent = hexid("gateway", case, n=8) if k % 5 == 0 else None
        doc.span(svc, trace, root, parent, "POST /ask", s, s + 800 * MS, [("http.request.method", "POST")])
        doc.span(svc, trace, hexid("chat", case, n=8), root, "chat gpt-4o-mini", s + 10 * MS, s + 300 * MS,
                 [("gen_ai.operation.name", "chat")])
        if day < 11:
            doc.span(svc, trace, hexid("tool", case, n=8), root, "execute_tool lookup_user",
                     s + 400 * MS, s + 450 * MS,
                     [("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "lookup_user"),
                      ("gen_ai.tool.call.arguments", json.dumps({"u": k}))])


def callid(doc, day):
    svc = "callid-svc"
    for k, m in enumerate(spread(30)):
        case = f"callid-{day}-{k}"
        call = f"call-{day}-{k}"
        s = at(day, m) + 17 * SEC
        doc.span(svc, hexid("trace-a", case, n=16), hexid("chat", case, n=8), None, "chat claude",
                 s + 100 * MS, s + 400 * MS, [("gen_ai.operation.name", "chat"), ("gen_ai.agent.call.id", call)])
        if day < 12:
            doc.span(svc, hexid("trace-b", case, n=16), hexid("tool", case, n=8), None, "execute_tool classify",
                     s, s + 50 * MS,
                     [("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "classify"),
                      ("gen_ai.tool.call.arguments", json.dumps({"c": k})), ("gen_ai.agent.call.id", call)])


def supervisor(doc, day):
    for k, m in enumerate(spread(40)):
        case = f"super-{day}-{k}"
        t = Turn(doc, case, at(day, m) + 19 * SEC, service="super-svc")
        s = t.start + 10 * MS
        sub = hexid("worker", case, n=8)
        doc.span("worker-svc", t.trace, sub, t.root, "invoke_agent worker", s, s + 600 * MS,
                 [("gen_ai.operation.name", "invoke_agent")])
        if day < 11:
            doc.span("worker-svc", t.trace, hexid("job", case, n=8), sub, "execute_tool run_job",
                     s + 20 * MS, s + 120 * MS,
                     [("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "run_job"),
                      ("gen_ai.tool.call.arguments", json.dumps({"j": k}))])
        t.last_end = s + 600 * MS
        t.close()


def build():
    doc = Doc()
    for day in range(DAYS):
        for case in (quotes, billing, docs, report, rootless, callid, supervisor):
            case(doc, day)
    return doc.json()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(build(), f, separators=(",", ":"))


if __name__ == "__main__":
    main()
