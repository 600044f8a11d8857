#!/usr/bin/env python3
"""Generate stormwatch's OTLP JSON trace fixtures, deterministically.

Writes five files into ``fixtures/`` (or ``--out DIR``):

- ``search_flights_history.json`` -- 30 UTC days (2026-07-07 .. 2026-08-05) of
  the travel agent's ``search_flights`` tool, pinned to the daily table of
  shared design/detection.md section 5 and the storm postmortem seed: the
  Jul 29 retry storm (62 calls, 53 errors, p50 5.12 s) and the Aug 4-5 relapse.
- ``storms_jul29.json`` -- only the four Jul 29 storm turns (Viktor, Elena,
  Bruno twice), the same spans as in the history file; Bruno's second turn
  carries the postmortem's fifteen 503s with their exact start times.
- ``fixed_loop.json`` -- the fixed retry loop (3 attempts, 250 ms then 500 ms
  backoff): healthy, blip cleared on the 2nd, on the 3rd, sustained failure.
- ``retry_gate.json`` -- the retry-gate seed: 400 / 410 retried five times
  with exponential backoff, 429 / 503 blips that recover, a booking retried
  after a success that lost its confirmation, healthy bookings, and one
  OpenInference and one Vercel AI SDK tool span.
- ``manifest.json`` -- span, tool-call, per-tool-per-day and session counts
  computed from the files as written, for the tests to assert against.

Everything comes from string-seeded ``random.Random`` instances and
hash-derived ids; nothing reads the clock, so two runs give byte-identical
files. The generator checks its own output (day totals, the pinned p50s,
Bruno's timestamps, gaps, backoffs, the expected error-rate flags) and exits
non-zero when an edit breaks one of them.

Rebuild with ``python3 scripts/gen_fixtures.py`` from the repository root.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import statistics
import sys
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

MS = 1_000_000
SEC = 1_000_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
REPO_ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------- seed numbers

EARLY_CALLS = [5, 8, 10, 6, 7, 9, 5, 8, 6, 7, 10, 5, 9, 6, 8, 7, 5, 9, 6]  # Jul 7..25
EARLY_ERROR_DAYS = {"2026-07-10", "2026-07-14", "2026-07-18", "2026-07-22"}
# day -> (calls, errors, pinned p50 in ms or None); postmortem + detection.md s5
SEED_DAYS = {
    "2026-07-26": (5, 0, 940),
    "2026-07-27": (10, 1, 960),
    "2026-07-28": (9, 1, 580),
    "2026-07-29": (62, 53, 5120),
    "2026-07-30": (7, 2, 890),
    "2026-07-31": (5, 0, 920),
    "2026-08-01": (6, 0, None),
    "2026-08-02": (7, 0, None),
    "2026-08-03": (5, 0, None),
    "2026-08-04": (11, 6, None),
    "2026-08-05": (11, 6, None),
}
EXPECTED_FLAGS = ["2026-07-29", "2026-08-04", "2026-08-05"]

JUL29 = "2026-07-29"
# Bruno's second turn, straight from the postmortem: (start, seconds until the 503)
BRUNO_B_CALLS = [
    ("19:46:34.532", 4.8), ("19:46:39.419", 5.6), ("19:46:45.062", 3.7),
    ("19:46:48.847", 6.4), ("19:46:55.320", 8.4), ("19:47:03.773", 6.5),
    ("19:47:10.325", 3.5), ("19:47:13.909", 5.6), ("19:47:19.546", 8.6),
    ("19:47:28.240", 5.7), ("19:47:34.018", 4.6), ("19:47:38.673", 3.6),
    ("19:47:42.353", 9.0), ("19:47:51.365", 2.5), ("19:47:53.882", 7.9),
]
BRUNO_B_ROOT = ("19:46:32.047", 98)
LIS_BER = '{"from":"LIS","to":"BER","date":"2026-08-02"}'
# key, session, root start, root seconds, calls; Viktor and Elena in the half
# hour before Bruno's first try, which is half an hour before his second.
STORM_TURNS = [
    ("viktor", "sess-viktor-0729", "19:03:18.406", 78, 12,
     '{"from":"VIE","to":"JFK","date":"2026-08-14"}'),
    ("elena", "sess-elena-0729", "19:09:51.233", 89, 14,
     '{"from":"ATH","to":"LHR","date":"2026-08-09"}'),
    ("bruno-a", "sess-bruno-0729-a", "19:16:05.702", 74, 12, LIS_BER),
]
BURSTS = {"2026-08-04": "15:21:07.310", "2026-08-05": "10:42:55.804"}  # 6x503 then ok

HEALTHY_TOKENS = (4200, 520)  # 4200 * $2.5/M + 520 * $10/M = $0.0157
STORM_TOKENS = (5000, 590)  # = $0.0184; retries burn no model tokens
AIRPORTS = ["LIS", "BER", "MAD", "CDG", "AMS", "FCO", "VIE", "PRG", "CPH", "DUB", "ATH", "WAW"]

# ------------------------------------------------------------------- helpers


class Rng:
    """Seeded by a label; uses only random(), whose stream is stable across Pythons."""

    def __init__(self, label: str):
        self._r = random.Random(f"stormwatch-fixtures/{label}")

    def between(self, lo: int, hi: int) -> int:
        return lo + int(self._r.random() * (hi - lo + 1))

    def pick(self, seq):
        return seq[int(self._r.random() * len(seq))]

    def shuffle(self, xs: list) -> None:
        for i in range(len(xs) - 1, 0, -1):
            j = int(self._r.random() * (i + 1))
            xs[i], xs[j] = xs[j], xs[i]


def at(day: str, hms: str) -> int:
    delta = datetime.fromisoformat(f"{day}T{hms}").replace(tzinfo=timezone.utc) - EPOCH
    return (delta.days * 86400 + delta.seconds) * SEC + delta.microseconds * 1000


def day_of(ns: int) -> str:
    return (EPOCH + timedelta(microseconds=ns // 1000)).date().isoformat()


def hex_id(label: str, width: int) -> str:
    h = hashlib.sha256(label.encode()).hexdigest()[:width]
    check(int(h, 16) != 0, f"all-zero id for {label}")
    return h


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise RuntimeError(f"fixture check failed: {msg}")


def attr(key: str, value) -> dict:
    if isinstance(value, bool):
        v = {"boolValue": value}
    elif isinstance(value, int):
        v = {"intValue": str(value)}
    elif isinstance(value, float):
        v = {"doubleValue": value}
    else:
        v = {"stringValue": value}
    return {"key": key, "value": v}


def cost(tokens: tuple[int, int]) -> float:
    return round(tokens[0] * 2.5e-6 + tokens[1] * 1e-5, 6)  # gpt-4o list price


REASONS = {400: "Bad Request", 410: "Gone", 429: "Too Many Requests", 503: "Service Unavailable"}


def failure(code: int, error_type: str, exc_type: str, exc_message: str) -> dict:
    return {"http": code, "error_type": error_type, "exc_type": exc_type, "exc_message": exc_message}


def feed_503(tool: str = "search_flights") -> dict:
    return failure(503, "503", "HTTPError",
                   f"{tool}: carrier feed answered 503 Service Unavailable")


def httpx_error(code: int, error_type: str, url: str, detail: str) -> dict:
    kind = "Client" if code < 500 else "Server"
    return failure(code, error_type, "httpx.HTTPStatusError",
                   f"{kind} error '{code} {REASONS[code]}' for url '{url}': {detail}")


# --------------------------------------------------------------------- turns


class Turn:
    """One trace: a root span and its children, ids derived from ``key``."""

    def __init__(self, key, session, start, root_name, root_attrs, empty_parent=False):
        self.key, self.session = key, session
        self.trace_id = hex_id(f"trace/{key}", 32)
        self.empty_parent = empty_parent
        self.spans: list[dict] = []
        self.root = self.span(None, root_name, 1, start, start, root_attrs)

    def span(self, parent, name, kind, start, end, attrs, status=None, events=None):
        sp = {"traceId": self.trace_id, "spanId": hex_id(f"span/{self.key}/{len(self.spans)}", 16)}
        if parent is not None:
            sp["parentSpanId"] = parent["spanId"]
        elif self.empty_parent:
            sp["parentSpanId"] = ""
        sp.update(name=name, kind=kind, startTimeUnixNano=str(start),
                  endTimeUnixNano=str(end), attributes=[attr(k, v) for k, v in attrs])
        if events:
            sp["events"] = events
        if status:
            sp["status"] = status
        self.spans.append(sp)
        return sp

    def close(self, end: int) -> None:
        self.root["endTimeUnixNano"] = str(end)

    @property
    def start(self) -> int:
        return int(self.root["startTimeUnixNano"])


def genai_turn(key, session, start, agent="travel-agent", empty_parent=False) -> Turn:
    return Turn(key, session, start, f"invoke_agent {agent}", [
        ("gen_ai.operation.name", "invoke_agent"), ("gen_ai.agent.name", agent),
        ("session.id", session), ("gen_ai.conversation.id", session)], empty_parent)


def chat(turn: Turn, start: int, end: int, tokens: tuple[int, int]) -> None:
    turn.span(turn.root, "chat gpt-4o", 3, start, end, [
        ("gen_ai.operation.name", "chat"), ("gen_ai.provider.name", "openai"),
        ("gen_ai.request.model", "gpt-4o"), ("gen_ai.usage.input_tokens", tokens[0]),
        ("gen_ai.usage.output_tokens", tokens[1]), ("gen_ai.usage.cost", cost(tokens)),
        ("session.id", turn.session)])


def tool_call(turn: Turn, tool: str, args: str, start: int, end: int,
              fail: dict | None = None, http_ok: int | None = None, status_ok=False) -> None:
    attrs = [("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", tool),
             ("gen_ai.tool.call.id", "call_" + hex_id(f"call/{turn.key}/{len(turn.spans)}", 12)),
             ("gen_ai.tool.call.arguments", args), ("session.id", turn.session)]
    status = events = None
    if fail:
        attrs += [("http.response.status_code", fail["http"]), ("error.type", fail["error_type"])]
        status = {"code": 2, "message": REASONS[fail["http"]]}
        events = [{"timeUnixNano": str(end), "name": "exception", "attributes": [
            attr("exception.type", fail["exc_type"]),
            attr("exception.message", fail["exc_message"])]}]
    else:
        if http_ok is not None:
            attrs.append(("http.response.status_code", http_ok))
        if status_ok:
            status = {"code": 1}
    turn.span(turn.root, f"execute_tool {tool}", 1, start, end, attrs, status, events)


def run_calls(turn: Turn, tool: str, args: str, first_start: int,
              attempts: list[tuple[int, dict | None]], gaps: list[int], **ok_kw) -> int:
    """Sequential attempts (duration, failure) with the given gaps; returns the last end."""
    check(len(gaps) == len(attempts) - 1, "one gap between each pair of attempts")
    t = first_start
    for i, (dur, fail) in enumerate(attempts):
        tool_call(turn, tool, args, t, t + dur, fail, **({} if fail else ok_kw))
        t += dur
        if i < len(gaps):
            t += gaps[i]
    return t


def agent_turn(rng: Rng, key, session, start, tool, args, attempts, gaps, *,
               tokens=HEALTHY_TOKENS, agent="travel-agent", root_ms=None, post_ms=None,
               empty_parent=False, **ok_kw) -> Turn:
    """Root, one chat span, then the tool attempts; the root ends ``root_ms`` after it
    starts (single healthy calls: about 8.1 s) or ``post_ms`` after the last call."""
    turn = genai_turn(key, session, start, agent, empty_parent)
    chat_start = start + 15 * MS
    chat_end = chat_start + rng.between(2200, 2650) * MS
    chat(turn, chat_start, chat_end, tokens)
    last = run_calls(turn, tool, args, chat_end + rng.between(20, 45) * MS, attempts, gaps, **ok_kw)
    end = start + root_ms * MS if root_ms is not None else last + post_ms * MS
    check(end >= last + 500 * MS, f"root of {key} ends before its calls")
    turn.close(end)
    return turn


def route(rng: Rng) -> str:
    a = rng.pick(AIRPORTS)
    b = rng.pick([x for x in AIRPORTS if x != a])
    d = date(2026, 8, 1) + timedelta(days=rng.between(0, 50))
    return json.dumps({"from": a, "to": b, "date": d.isoformat()}, separators=(",", ":"))


# ------------------------------------------------------------ Jul 29 storms


def storm_turns() -> list[Turn]:
    rng = Rng("storms-jul29")
    # Jul 29 p50 must be exactly 5.12 s over 62 calls: 9 healthy (< 2.5 s) and
    # Bruno's 15 (6 below 5.12 s, 9 above) leave 15 below, 2 at 5.12 s and 21
    # above for these 38, so the 31st and 32nd of 62 are both 5.120 s.
    pool = ([rng.between(2500, 5000) for _ in range(15)] + [5120, 5120]
            + [rng.between(5250, 9000) for _ in range(21)])
    for _attempt in range(10_000):
        rng.shuffle(pool)
        plans, i, ok = [], 0, True
        for key, session, hms, root_s, n, args in STORM_TURNS:
            durs, i = pool[i:i + n], i + n
            gaps = [rng.between(1, 50) for _ in range(n - 1)]
            chat_ms, lead_ms = rng.between(2200, 2650), rng.between(20, 45)
            post = root_s * 1000 - (15 + chat_ms + lead_ms + sum(durs) + sum(gaps))
            ok &= 1500 <= post <= 10_000
            plans.append((key, session, hms, root_s, args, durs, gaps, chat_ms, lead_ms))
        if ok:
            break
    else:
        raise RuntimeError("no split of the storm durations fits the turn lengths")

    turns = []
    for key, session, hms, root_s, args, durs, gaps, chat_ms, lead_ms in plans:
        start = at(JUL29, hms)
        turn = genai_turn(f"jul29/{key}", session, start)
        chat(turn, start + 15 * MS, start + (15 + chat_ms) * MS, STORM_TOKENS)
        run_calls(turn, "search_flights", args, start + (15 + chat_ms + lead_ms) * MS,
                  [(d * MS, feed_503()) for d in durs], [g * MS for g in gaps])
        turn.close(start + root_s * SEC)
        turns.append(turn)

    start = at(JUL29, BRUNO_B_ROOT[0])
    turn = genai_turn("jul29/bruno-b", "sess-bruno-0729-b", start)
    first = at(JUL29, BRUNO_B_CALLS[0][0])
    chat(turn, start + 15 * MS, first - 70 * MS, STORM_TOKENS)
    starts = [at(JUL29, hms) for hms, _ in BRUNO_B_CALLS]
    for k, (s, (_, secs)) in enumerate(zip(starts, BRUNO_B_CALLS)):
        end = s + round(secs * 1000) * MS
        if k + 1 < len(starts):
            end = min(end, starts[k + 1] - MS)  # a call never outlives the next start
        tool_call(turn, "search_flights", LIS_BER, s, end, feed_503())
    turn.close(start + BRUNO_B_ROOT[1] * SEC)
    turns.append(turn)
    return turns


# ------------------------------------------------------------------ history


def day_plan() -> list[tuple[str, int, int, int | None]]:
    plan = []
    for k, calls in enumerate(EARLY_CALLS):
        d = (date(2026, 7, 7) + timedelta(days=k)).isoformat()
        plan.append((d, calls, 1 if d in EARLY_ERROR_DAYS else 0, None))
    plan += [(d, c, e, p) for d, (c, e, p) in SEED_DAYS.items()]
    return plan


def pinned_pool(rng: Rng, n: int, p50: int) -> list[int]:
    """n durations (ms) whose middle one (both middle ones when n is even) is p50,
    so every median/quantile definition gives exactly p50."""
    mid = 1 if n % 2 else 2
    below = (n - mid) // 2
    return ([rng.between(int(p50 * 0.55), int(p50 * 0.97)) for _ in range(below)] + [p50] * mid
            + [rng.between(int(p50 * 1.04), int(p50 * 1.6)) for _ in range(n - mid - below)])


def spread_starts(rng: Rng, day: str, n: int, busy: list[tuple[int, int]]) -> list[int]:
    """n turn starts in daytime UTC (07:00-21:00), clear of ``busy`` and of each other."""
    lo, hi = at(day, "07:00:00"), at(day, "21:00:00")
    starts: list[int] = []
    while len(starts) < n:
        t = lo + rng.between(0, (hi - lo) // MS) * MS
        if any(a <= t <= b for a, b in busy) or any(abs(t - s) < 5 * 60 * SEC for s in starts):
            continue
        starts.append(t)
    return sorted(starts)


def burst_turn(day: str, hms: str) -> Turn:
    rng = Rng(f"burst/{day}")
    mmdd = day[5:7] + day[8:10]
    attempts = [(rng.between(2500, 9000) * MS, feed_503()) for _ in range(6)]
    attempts.append((rng.between(700, 1200) * MS, None))
    return agent_turn(rng, f"burst/{day}", f"sess-storm-{mmdd}", at(day, hms), "search_flights",
                      route(rng), attempts, [rng.between(1, 20) * MS for _ in range(6)],
                      tokens=STORM_TOKENS, post_ms=rng.between(4300, 5000))


def history() -> tuple[list[Turn], list[Turn]]:
    storms = storm_turns()
    turns: list[Turn] = []
    for day, calls, errors, p50 in day_plan():
        rng = Rng(f"history/{day}")
        mmdd = day[5:7] + day[8:10]
        busy: list[tuple[int, int]] = []
        if day == JUL29:
            turns += storms
            busy.append((at(day, "18:30:00"), at(day, "20:15:00")))
            calls -= sum(len(t.spans) - 2 for t in storms)
            errors = 0  # all 53 errors are the storm's
        elif day in BURSTS:
            b = burst_turn(day, BURSTS[day])
            turns.append(b)
            busy.append((b.start - 45 * 60 * SEC, b.start + 45 * 60 * SEC))
            calls, errors = calls - 7, errors - 6
            check(calls >= 0 and errors >= 0, f"{day}: the burst turn needs 7 calls, 6 errors")
        # the remaining errors are blips the old loop retried at once: 503 then ok
        n_turns = calls - errors
        starts = spread_starts(rng, day, n_turns, busy)
        blips = set()
        while len(blips) < errors:
            blips.add(rng.between(0, n_turns - 1))
        pool = (pinned_pool(rng, calls, p50) if p50 and day != JUL29
                else [rng.between(600, 1200) for _ in range(calls)])
        rng.shuffle(pool)
        for idx, start in enumerate(starts):
            key, session = f"hist/{day}/{idx:02d}", f"sess-{mmdd}-{idx + 1:02d}"
            if idx in blips:
                attempts = [(pool.pop() * MS, feed_503()), (pool.pop() * MS, None)]
                turns.append(agent_turn(rng, key, session, start, "search_flights", route(rng),
                                        attempts, [rng.between(1, 40) * MS],
                                        post_ms=rng.between(4300, 5000)))
            else:
                turns.append(agent_turn(rng, key, session, start, "search_flights", route(rng),
                                        [(pool.pop() * MS, None)], [],
                                        root_ms=rng.between(7800, 8400)))
        check(not pool, f"{day}: every pooled duration used")
    turns.sort(key=lambda t: t.start)
    return turns, storms


# --------------------------------------------------------------- fixed loop


def fixed_loop() -> list[Turn]:
    rng = Rng("fixed-loop")
    day, args = "2026-08-10", LIS_BER
    ok = lambda: (rng.between(700, 1200) * MS, None)  # noqa: E731
    bad = lambda: (rng.between(350, 1200) * MS, feed_503())  # noqa: E731
    cases = [  # session, start, attempts; gaps follow the policy: 250 ms, then 500 ms
        ("sess-loop-healthy", "10:00:04.118", [ok()]),
        ("sess-loop-blip-2nd", "10:20:11.607", [bad(), ok()]),
        ("sess-loop-blip-3rd", "10:40:27.932", [bad(), bad(), ok()]),
        ("sess-loop-sustained", "11:00:45.250", [bad(), bad(), bad()]),
    ]
    turns = []
    for session, hms, attempts in cases:
        gaps = [250 * MS, 500 * MS][:len(attempts) - 1]
        turns.append(agent_turn(rng, f"loop/{session}", session, at(day, hms), "search_flights",
                                args, attempts, gaps, post_ms=rng.between(4300, 5000)))
    return turns


# --------------------------------------------------------------- retry gate

QUOTE_URL = "https://pricing.mock/v2/quote"
BOOK_URL = "https://booking.mock/v2/bookings"


def retry_gate() -> tuple[list[Turn], list[Turn], list[Turn]]:
    rng = Rng("retry-gate")
    day = "2026-08-12"
    quote = lambda: (rng.between(280, 620) * MS, None)  # noqa: E731
    book = lambda: (rng.between(900, 1600) * MS, None)  # noqa: E731
    q_args = lambda dst, d: json.dumps(  # noqa: E731
        {"from": "LIS", "to": dst, "date": d, "cabin": "economy"}, separators=(",", ":"))
    b_args = lambda qid, pax, cv="2026-06": json.dumps(  # noqa: E731
        {"quote_id": qid, "passenger_id": pax, "contract_version": cv}, separators=(",", ":"))
    backoff = [1000 * MS, 2000 * MS, 4000 * MS, 8000 * MS]
    bad_airport = httpx_error(400, "InvalidAirportCode", QUOTE_URL, "invalid airport code 'BRX'")
    expired = httpx_error(410, "ContractVersionExpired", BOOK_URL,
                          "contract version 2025-11 has expired")
    limited = httpx_error(429, "429", QUOTE_URL, "rate limit exceeded, retry after 1s")
    down = httpx_error(503, "503", BOOK_URL, "upstream timed out")
    ok_kw = {"http_ok": 200, "status_ok": True}

    # (session, start, [(tool, args, attempts, gaps)]) - one turn per case
    cases = [
        ("sess-gate-400-invalid-airport", "09:02:13.481",
         [("quote_price", q_args("BRX", "2026-09-03"),
           [(rng.between(90, 180) * MS, bad_airport) for _ in range(5)], backoff)]),
        ("sess-gate-410-expired-contract", "09:11:40.027",
         [("quote_price", q_args("MAD", "2026-09-05"), [quote()], []),
          ("book_flight", b_args("q_5c81e2", "P-20391", "2025-11"),
           [(rng.between(120, 220) * MS, expired) for _ in range(5)], backoff)]),
        ("sess-gate-429-blip", "09:23:05.640",
         [("quote_price", q_args("CDG", "2026-09-08"),
           [(rng.between(40, 90) * MS, limited), quote()], [1000 * MS])]),
        ("sess-gate-503-blip", "09:31:52.915",
         [("quote_price", q_args("AMS", "2026-09-10"), [quote()], []),
          ("book_flight", b_args("q_9a04d7", "P-20402"),
           [(rng.between(1000, 2000) * MS, down), (rng.between(1000, 2000) * MS, down), book()],
           [1000 * MS, 2000 * MS])]),
        ("sess-gate-lost-confirmation", "09:44:18.302",
         [("quote_price", q_args("FCO", "2026-09-12"), [quote()], []),
          ("book_flight", b_args("q_3e77b0", "P-20417"), [book(), book()], [3000 * MS])]),
        ("sess-gate-healthy-1", "09:52:36.774",
         [("quote_price", q_args("BER", "2026-09-14"), [quote()], []),
          ("book_flight", b_args("q_61d2f9", "P-20425"), [book()], [])]),
        ("sess-gate-healthy-2", "10:05:09.158",
         [("quote_price", q_args("VIE", "2026-09-18"), [quote()], []),
          ("book_flight", b_args("q_c40a5e", "P-20433"), [book()], [])]),
    ]
    genai = []
    for session, hms, steps in cases:
        start = at(day, hms)
        turn = genai_turn(f"gate/{session}", session, start, "booking-agent", empty_parent=True)
        chat_end = start + (15 + rng.between(1200, 1700)) * MS
        chat(turn, start + 15 * MS, chat_end, (3100, 240))
        t = chat_end + rng.between(20, 45) * MS
        for tool, args, attempts, gaps in steps:
            t = run_calls(turn, tool, args, t, attempts, gaps, **ok_kw) + rng.between(30, 80) * MS
        turn.close(t + rng.between(1200, 1800) * MS)
        genai.append(turn)
    return genai, [openinference_turn(rng, day)], [vercel_turn(rng, day)]


def openinference_turn(rng: Rng, day: str) -> Turn:
    session, start = "sess-gate-openinference", at(day, "10:14:27.509")
    args = '{"from":"LIS","to":"CPH","date":"2026-09-21","cabin":"economy"}'
    turn = Turn("gate/openinference", session, start, "booking-agent",
                [("openinference.span.kind", "AGENT"), ("session.id", session)], empty_parent=True)
    llm_end = start + (10 + rng.between(1200, 1700)) * MS
    turn.span(turn.root, "ChatCompletion", 1, start + 10 * MS, llm_end, [
        ("openinference.span.kind", "LLM"), ("llm.model_name", "gpt-4o"),
        ("llm.token_count.prompt", 3100), ("llm.token_count.completion", 240),
        ("session.id", session)])
    t0 = llm_end + 30 * MS
    t1 = t0 + rng.between(280, 620) * MS
    turn.span(turn.root, "quote_price", 1, t0, t1, [
        ("openinference.span.kind", "TOOL"), ("tool.name", "quote_price"),
        ("tool_call.id", "call_" + hex_id("call/gate/openinference", 12)),
        ("input.value", args), ("input.mime_type", "application/json"),
        ("output.value", '{"quote_id":"q_0b19c3","price_eur":143.2}'),
        ("output.mime_type", "application/json"), ("session.id", session)])
    turn.close(t1 + rng.between(1200, 1800) * MS)
    return turn


def vercel_turn(rng: Rng, day: str) -> Turn:
    session, start = "sess-gate-vercel", at(day, "10:21:48.066")
    args = '{"from":"LIS","to":"DUB","date":"2026-09-24","cabin":"economy"}'
    meta = [("ai.telemetry.metadata.sessionId", session), ("session.id", session)]
    turn = Turn("gate/vercel", session, start, "ai.generateText", [
        ("operation.name", "ai.generateText"), ("ai.operationId", "ai.generateText"),
        ("ai.model.id", "gpt-4o"), ("ai.model.provider", "openai.chat")] + meta,
        empty_parent=True)
    gen_end = start + (10 + rng.between(1200, 1700)) * MS
    turn.span(turn.root, "ai.generateText.doGenerate", 1, start + 10 * MS, gen_end, [
        ("operation.name", "ai.generateText.doGenerate"),
        ("ai.operationId", "ai.generateText.doGenerate"), ("ai.model.id", "gpt-4o"),
        ("ai.usage.promptTokens", 3100), ("ai.usage.completionTokens", 240)] + meta)
    t0 = gen_end + 25 * MS
    t1 = t0 + rng.between(280, 620) * MS
    turn.span(turn.root, "ai.toolCall", 1, t0, t1, [
        ("operation.name", "ai.toolCall"), ("ai.operationId", "ai.toolCall"),
        ("ai.toolCall.name", "quote_price"),
        ("ai.toolCall.id", "call_" + hex_id("call/gate/vercel", 12)),
        ("ai.toolCall.args", args),
        ("ai.toolCall.result", '{"quote_id":"q_e2a7d4","price_eur":129.9}')] + meta)
    turn.close(t1 + rng.between(1200, 1800) * MS)
    return turn


# ------------------------------------------------------- rendering, manifest


def render(service: str, scopes: list[tuple[dict, list[Turn]]]) -> tuple[str, dict]:
    """OTLP JSON with one span per line, so a diff shows which spans changed."""
    dumps = lambda x: json.dumps(x, separators=(",", ":"))  # noqa: E731
    resource = {"attributes": [attr("service.name", service)]}
    doc = {"resourceSpans": [{"resource": resource, "scopeSpans": [
        {"scope": scope, "spans": [sp for t in turns for sp in t.spans]} for scope, turns in scopes]}]}
    lines = ['{"resourceSpans":[{"resource":' + dumps(resource) + ',"scopeSpans":[']
    for si, scope_spans in enumerate(doc["resourceSpans"][0]["scopeSpans"]):
        spans = scope_spans["spans"]
        lines.append('{"scope":' + dumps(scope_spans["scope"]) + ',"spans":[')
        lines += [dumps(sp) + ("," if i + 1 < len(spans) else "") for i, sp in enumerate(spans)]
        lines.append("]}" + ("," if si + 1 < len(doc["resourceSpans"][0]["scopeSpans"]) else ""))
    lines.append("]}]}")
    text = "\n".join(lines) + "\n"
    check(json.loads(text) == doc, "rendered text round-trips to the document")
    return text, doc


def flat(doc: dict) -> list[tuple[dict, dict]]:
    """(span, {attribute key: plain value}) for every span of a document."""
    out = []
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                attrs = {}
                for a in sp["attributes"]:
                    (kind, v), = a["value"].items()
                    attrs[a["key"]] = int(v) if kind == "intValue" else v
                out.append((sp, attrs))
    return out


def tool_name(a: dict) -> str | None:
    """detection.md s1: which convention marks the tool call decides the name."""
    if a.get("gen_ai.operation.name") == "execute_tool":
        return a.get("gen_ai.tool.name")
    if a.get("openinference.span.kind") == "TOOL":
        return a.get("tool.name")
    if "ai.toolCall.name" in a:
        return a["ai.toolCall.name"]
    return None


SESSION_KEYS = ["session.id", "gen_ai.conversation.id", "gen_ai.session.id",
                "langfuse.session.id", "traceloop.association.properties.session_id"]


def summarize(name: str, doc: dict) -> dict:
    spans = flat(doc)
    by_tool_day: dict = {}
    durations: dict = {}
    sessions = set()
    for sp, a in spans:
        s = next((a[k] for k in SESSION_KEYS if k in a), None)
        if s is not None:
            sessions.add(s)
        tool = tool_name(a)
        if tool is None:
            continue
        start, end = int(sp["startTimeUnixNano"]), int(sp["endTimeUnixNano"])
        cell = by_tool_day.setdefault(tool, {}).setdefault(day_of(start), {"calls": 0, "errors": 0})
        cell["calls"] += 1
        cell["errors"] += sp.get("status", {}).get("code") == 2
        durations.setdefault((tool, day_of(start)), []).append(end - start)
    for tool in by_tool_day:
        by_tool_day[tool] = dict(sorted(by_tool_day[tool].items()))
        for d, cell in by_tool_day[tool].items():
            cell["p50_ms"] = round(statistics.median(durations[(tool, d)]) / MS, 3)
    return {"file": name, "spans": len(spans),
            "turns": len({sp["traceId"] for sp, _ in spans}),
            "tool_calls": sum(tool_name(a) is not None for _, a in spans),
            "by_tool_day": dict(sorted(by_tool_day.items())), "sessions": sorted(sessions)}


# ------------------------------------------------------------------- checks

# The checks compare against these copies of the seed text, not against the
# constants above, so that an edit to those constants fails loudly.
POSTMORTEM_DAY_TABLE = """
Jul 26     5 calls    0 errors    p50 0.94s
Jul 27    10 calls    1 error     p50 0.96s
Jul 28     9 calls    1 error     p50 0.58s
Jul 29    62 calls   53 errors    p50 5.12s
Jul 30     7 calls    2 errors    p50 0.89s
Jul 31     5 calls    0 errors    p50 0.92s
"""
POSTMORTEM_BRUNO_TABLE = """
19:46:34.532   503 after 4.8s
19:46:39.419   503 after 5.6s
19:46:45.062   503 after 3.7s
19:46:48.847   503 after 6.4s
19:46:55.320   503 after 8.4s
19:47:03.773   503 after 6.5s
19:47:10.325   503 after 3.5s
19:47:13.909   503 after 5.6s
19:47:19.546   503 after 8.6s
19:47:28.240   503 after 5.7s
19:47:34.018   503 after 4.6s
19:47:38.673   503 after 3.6s
19:47:42.353   503 after 9.0s
19:47:51.365   503 after 2.5s
19:47:53.882   503 after 7.9s
"""
# detection.md s5: Jul 7-25 calls, one error on Jul 10/14/18/22; Aug 1-5
DETECTION_EARLY = "5, 8, 10, 6, 7, 9, 5, 8, 6, 7, 10, 5, 9, 6, 8, 7, 5, 9, 6"
DETECTION_AUG = {"08-01": (6, 0), "08-02": (7, 0), "08-03": (5, 0), "08-04": (11, 6), "08-05": (11, 6)}


def seed_expectations() -> tuple[dict, list[tuple[int, int]]]:
    """{day: (calls, errors, p50 ms or None)} and Bruno's [(start ns, duration ns)]."""
    want = {}
    for k, c in enumerate(DETECTION_EARLY.split(", ")):
        d = date(2026, 7, 7) + timedelta(days=k)
        want[d.isoformat()] = (int(c), int(d.day in (10, 14, 18, 22)), None)
    for line in POSTMORTEM_DAY_TABLE.strip().splitlines():
        _mon, dd, calls, _, errors, _, _, p50 = line.split()
        want[f"2026-07-{int(dd):02d}"] = (int(calls), int(errors), round(float(p50[:-1]) * 1000))
    for mmdd, (calls, errors) in DETECTION_AUG.items():
        want[f"2026-{mmdd}"] = (calls, errors, None)
    bruno = []
    for line in POSTMORTEM_BRUNO_TABLE.strip().splitlines():
        hms, code, _, secs = line.split()
        check(code == "503", "Bruno's calls are 503s")
        bruno.append((at(JUL29, hms), round(float(secs[:-1]) * 1000) * MS))
    return want, bruno



def check_common(name: str, doc: dict) -> None:
    spans = flat(doc)
    ids = [sp["spanId"] for sp, _ in spans]
    check(len(ids) == len(set(ids)), f"{name}: span ids unique")
    roots = {}
    for sp, _ in spans:
        check(len(sp["traceId"]) == 32 and int(sp["traceId"], 16), f"{name}: trace id")
        check(len(sp["spanId"]) == 16 and int(sp["spanId"], 16), f"{name}: span id")
        check(int(sp["endTimeUnixNano"]) >= int(sp["startTimeUnixNano"]), f"{name}: end >= start")
        if not sp.get("parentSpanId"):
            check(sp["traceId"] not in roots, f"{name}: one root per trace")
            roots[sp["traceId"]] = sp
    for sp, _ in spans:
        root = roots[sp["traceId"]]
        check(int(root["startTimeUnixNano"]) <= int(sp["startTimeUnixNano"])
              and int(sp["endTimeUnixNano"]) <= int(root["endTimeUnixNano"]),
              f"{name}: {sp['spanId']} inside its turn")
    # consecutive calls of one tool in one trace never overlap
    calls: dict = {}
    for sp, a in spans:
        if tool_name(a):
            calls.setdefault((sp["traceId"], tool_name(a)), []).append(sp)
    for group in calls.values():
        group.sort(key=lambda s: int(s["startTimeUnixNano"]))
        for x, y in zip(group, group[1:]):
            check(int(y["startTimeUnixNano"]) - int(x["endTimeUnixNano"]) >= 0,
                  f"{name}: negative gap in trace {x['traceId']}")


def wilson_lower(errors: int, calls: int, z: float = 1.6448536) -> float:
    p, n = errors / calls, calls
    centre = p + z * z / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - margin) / (1 + z * z / n)


def spike_flags(days: dict) -> tuple[list[str], dict]:
    """detection.md s4.1 with its defaults, to prove the history pins the expected flags."""
    flagged: list[str] = []
    info = {}
    for d in sorted(days):
        dd = date.fromisoformat(d)
        prior = lambda k: [(dd - timedelta(days=i)).isoformat() for i in range(1, k + 1)]  # noqa: E731
        usable = [x for x in prior(7) if x in days and x not in flagged]
        if len(usable) < 3:
            usable = [x for x in prior(28) if x in days and x not in flagged]
        if len(usable) < 3:
            usable = [x for x in prior(7) if x in days]
        hist = sum(1 for x in days if x < d)
        if hist < 3:
            base = 0.05
        else:
            base = max(0.01, sum(days[x][1] for x in usable) / sum(days[x][0] for x in usable))
        calls, errors = days[d]
        lower = wilson_lower(errors, calls)
        info[d] = (base, lower)
        if calls >= 10 and errors >= 3 and lower > 3 * base:
            flagged.append(d)
    return flagged, info


def check_history(doc: dict, storms_doc: dict) -> None:
    spans = flat(doc)
    s = summarize("history", doc)["by_tool_day"]["search_flights"]
    want, _ = seed_expectations()
    check(list(s) == sorted(want), "history covers Jul 7 .. Aug 5, no other day")
    for d, (calls, errors, p50) in want.items():
        check((s[d]["calls"], s[d]["errors"]) == (calls, errors),
              f"{d}: {s[d]['calls']}/{s[d]['errors']} calls/errors, want {calls}/{errors}")
        durs = sorted(int(sp["endTimeUnixNano"]) - int(sp["startTimeUnixNano"])
                      for sp, a in spans
                      if tool_name(a) and day_of(int(sp["startTimeUnixNano"])) == d)
        if p50:
            mid = [durs[(len(durs) - 1) // 2], durs[len(durs) // 2]]
            check(mid == [p50 * MS] * 2, f"{d}: middle durations {mid}, want {p50} ms")
    flags, info = spike_flags({d: (c["calls"], c["errors"]) for d, c in s.items()})
    check(flags == EXPECTED_FLAGS, f"error-rate flags {flags}, want {EXPECTED_FLAGS}")
    base, lower = info["2026-08-04"]
    check(abs(base - 3 / 39) < 1e-9 and abs(lower - 0.315) < 0.001, "Aug 4 baseline and bound")
    # every storm span is in the history file, unchanged
    hist_ids = {sp["spanId"]: sp for sp, _ in spans}
    for sp, _ in flat(storms_doc):
        check(hist_ids.get(sp["spanId"]) == sp, "storm spans appear unchanged in the history")
    # healthy single-call turns are 3 spans, every turn its own session
    per_trace: dict = {}
    for sp, a in spans:
        per_trace.setdefault(sp["traceId"], []).append(a)
    check(all(len(v) >= 3 for v in per_trace.values()), "every turn has root, chat and a call")
    sess = [next(a["session.id"] for a in v if "session.id" in a) for v in per_trace.values()]
    check(len(sess) == len(set(sess)), "one session per turn")


def check_storms(doc: dict) -> None:
    spans = flat(doc)
    roots = {sp["traceId"]: (sp, a) for sp, a in spans if not sp.get("parentSpanId")}
    secs = sorted((int(sp["endTimeUnixNano"]) - int(sp["startTimeUnixNano"])) / SEC
                  for sp, _ in roots.values())
    check(secs == [74, 78, 89, 98], f"storm turn lengths {secs}")
    calls = [(sp, a) for sp, a in spans if tool_name(a)]
    check(len(calls) == 53, f"{len(calls)} storm calls, want 53")
    for sp, a in calls:
        dur = int(sp["endTimeUnixNano"]) - int(sp["startTimeUnixNano"])
        check(a["http.response.status_code"] == 503 and sp["status"]["code"] == 2, "every call a 503")
        check(2500 * MS <= dur <= 9000 * MS, f"storm call lasting {dur / SEC} s")
    for trace in roots:
        group = sorted((sp for sp, _ in calls if sp["traceId"] == trace),
                       key=lambda sp: int(sp["startTimeUnixNano"]))
        check(12 <= len(group) <= 15, "12-15 calls per storm turn")
        args = {next(x["value"]["stringValue"] for x in sp["attributes"]
                     if x["key"] == "gen_ai.tool.call.arguments") for sp in group}
        check(len(args) == 1, "one arguments string per storm turn")
        gaps = [int(y["startTimeUnixNano"]) - int(x["endTimeUnixNano"]) for x, y in zip(group, group[1:])]
        check(all(0 <= g < 100 * MS for g in gaps), "storm gaps are 0-100 ms")
    bruno = sorted(int(sp["startTimeUnixNano"]) for sp, a in calls
                   if a["session.id"] == "sess-bruno-0729-b")
    _, seed = seed_expectations()
    check(bruno == [start for start, _ in seed], "Bruno's 15 start times are the seed's")
    bruno_durs = [int(sp["endTimeUnixNano"]) - int(sp["startTimeUnixNano"])
                  for sp, a in sorted(calls, key=lambda c: int(c[0]["startTimeUnixNano"]))
                  if a["session.id"] == "sess-bruno-0729-b"]
    nexts = bruno[1:] + [None]
    check(all(d == (want if nxt is None or start + want < nxt else nxt - MS - start)
              for d, (start, want), nxt in zip(bruno_durs, seed, nexts)),
          "Bruno's 15 durations are the seed's (clamped to the next start)")
    order = sorted((int(sp["startTimeUnixNano"]), int(sp["endTimeUnixNano"]), a["session.id"])
                   for sp, a in roots.values())
    check([o[2] for o in order] == ["sess-viktor-0729", "sess-elena-0729", "sess-bruno-0729-a",
                                    "sess-bruno-0729-b"], "storm turns in the seed's order")
    check(all(x[1] <= y[0] for x, y in zip(order, order[1:])), "storm turns do not overlap")
    check(order[3][0] - order[2][0] >= 25 * 60 * SEC, "Bruno comes back about half an hour later")
    check(order[3][0] < at(JUL29, "19:46:34.532") and order[0][0] >= at(JUL29, "18:45:00"),
          "the storm fits in one bad hour")
    sessions = sorted({a["session.id"] for _, a in spans})
    check(sessions == ["sess-bruno-0729-a", "sess-bruno-0729-b", "sess-elena-0729",
                       "sess-viktor-0729"], f"storm sessions {sessions}")


def tool_calls_by_session(doc: dict) -> dict:
    out: dict = {}
    for sp, a in flat(doc):
        if tool_name(a):
            out.setdefault(a["session.id"], []).append((sp, a))
    for v in out.values():
        v.sort(key=lambda x: int(x[0]["startTimeUnixNano"]))
    return out


def gaps_ms(calls) -> list[int]:
    return [(int(y["startTimeUnixNano"]) - int(x["endTimeUnixNano"])) // MS
            for (x, _), (y, _) in zip(calls, calls[1:])]


def outcome(calls) -> list[int]:
    return [sp.get("status", {}).get("code", 0) for sp, _ in calls]


def check_fixed_loop(doc: dict) -> None:
    by = tool_calls_by_session(doc)
    want = {"sess-loop-healthy": ([0], []), "sess-loop-blip-2nd": ([2, 0], [250]),
            "sess-loop-blip-3rd": ([2, 2, 0], [250, 500]),
            "sess-loop-sustained": ([2, 2, 2], [250, 500])}
    for session, (codes, gaps) in want.items():
        check((outcome(by[session]), gaps_ms(by[session])) == (codes, gaps), f"{session} shape")


def check_retry_gate(doc: dict) -> None:
    by = tool_calls_by_session(doc)
    for session, code in [("sess-gate-400-invalid-airport", 400),
                          ("sess-gate-410-expired-contract", 410)]:
        retried = [c for c in by[session] if c[1].get("http.response.status_code") == code]
        check(len(retried) == 5 and gaps_ms(retried) == [1000, 2000, 4000, 8000],
              f"{session}: five attempts, 1/2/4/8 s backoff")
        check(len({a["gen_ai.tool.call.arguments"] for _, a in retried}) == 1, f"{session}: same args")
    books = [c for c in by["sess-gate-lost-confirmation"] if tool_name(c[1]) == "book_flight"]
    check(len(books) == 2 and gaps_ms(books) == [3000] and outcome(books) == [1, 1]
          and all(a["http.response.status_code"] == 200 for _, a in books)
          and books[0][1]["gen_ai.tool.call.arguments"] == books[1][1]["gen_ai.tool.call.arguments"],
          "lost confirmation: two 200 bookings, same arguments, 3 s apart")
    check(gaps_ms(by["sess-gate-429-blip"]) == [1000], "429 blip: 1 s")
    b503 = [c for c in by["sess-gate-503-blip"] if tool_name(c[1]) == "book_flight"]
    check(gaps_ms(b503) == [1000, 2000] and outcome(b503) == [2, 2, 1], "503 blip: 1 s, 2 s, ok")
    check([tool_name(a) for _, a in by["sess-gate-openinference"] + by["sess-gate-vercel"]]
          == ["quote_price", "quote_price"], "OpenInference and Vercel tool spans")


# --------------------------------------------------------------------- main


def build() -> dict[str, tuple[str, dict]]:
    hist, storms = history()
    ta = {"name": "travel-agent", "version": "1.0"}
    gate_genai, gate_oi, gate_vercel = retry_gate()
    files = {
        "search_flights_history.json": render("travel-agent", [(ta, hist)]),
        "storms_jul29.json": render("travel-agent", [(ta, storms)]),
        "fixed_loop.json": render("travel-agent", [(ta, fixed_loop())]),
        "retry_gate.json": render("booking-agent", [
            ({"name": "booking-agent", "version": "1.0"}, gate_genai),
            ({"name": "openinference.instrumentation.openai", "version": "0.1.0"}, gate_oi),
            ({"name": "ai"}, gate_vercel)]),
    }
    for name, (_, doc) in files.items():
        check_common(name, doc)
    check_storms(files["storms_jul29.json"][1])
    check_history(files["search_flights_history.json"][1], files["storms_jul29.json"][1])
    check_fixed_loop(files["fixed_loop.json"][1])
    check_retry_gate(files["retry_gate.json"][1])
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "fixtures",
                    help="output directory (default: fixtures/ at the repository root)")
    out = ap.parse_args(argv).out
    files = build()
    out.mkdir(parents=True, exist_ok=True)
    manifest = []
    for name, (text, _) in files.items():
        (out / name).write_text(text, encoding="utf-8")
        # the manifest counts what was written, re-read from disk
        manifest.append(summarize(name, json.loads((out / name).read_text(encoding="utf-8"))))
        print(f"{name}: {manifest[-1]['spans']} spans, {manifest[-1]['tool_calls']} tool calls,"
              f" {len(text)} bytes")
    (out / "manifest.json").write_text(json.dumps({"files": manifest}, indent=1) + "\n",
                                       encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
