#!/usr/bin/env python3
"""Walk stormwatch's MCP server through the demo incident with the official
MCP Python SDK's client (`mcp.client.client.Client` of mcp 2.x, pinned in
scripts/py/requirements-mcp.txt, run with the venv-mcp interpreter).

Usage:
    walk.py --url http://127.0.0.1:PORT/mcp [--token T] [--mode MODE] [--days 30]
    walk.py --stdio BIN --data-dir DIR [--mode MODE] [--days 30]

--url speaks Streamable HTTP (the SDK's `streamable_http_client`, given an
httpx2 client that sends `Authorization: Bearer T` when --token is set);
--stdio launches `BIN mcp --stdio --data-dir DIR` and speaks over its
stdin/stdout. --mode is the client's: "legacy" (the initialize handshake,
2025-11-25), "auto" (probe `server/discover`, fall back to initialize) or
"2026-07-28" (adopt the stateless revision without a probe).

The walk is the contract's demo walk, as an agent would follow it:
tools/list (every page), then `list_tools` (search_flights and its flagged
days), `list_signals` {kind: retry_storm} (the signal on search_flights),
`get_signal` (its remedy and evidence count), `list_signal_traces` (every
page: the storm's turns on the earliest flagged day, then on every day) and
`get_trace` of the first of them (the search_flights loop: attempts and
rhythm). Every
call must succeed (no isError), and its structuredContent must be a JSON
object valid against the tool's outputSchema (checked here with jsonschema,
besides the SDK's own check) and equal to the JSON of its text content block.

stdout: exactly one JSON document
    {"mode", "protocol_version", "tools": [names], "flagged_days",
     "signal", "signal_kind", "signal_tool", "evidence", "day", "trace_id",
     "traces" (on that day), "traces_all_days", "attempts", "rhythm",
     "remedy" (the four-part object: get_signal's remedy_detail, or its
     remedy when that is the object), "remedy_line" (a one-line remedy string)}
On any failure: a message naming the step on stderr (with the HTTP status
and body the server answered, when one was >= 400), nothing on stdout,
exit 1. Exit 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from contextlib import AsyncExitStack
from typing import Any

import httpx2
import jsonschema
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

MODES = ("legacy", "auto", "2026-07-28")
PAGE_CAP = 50  # no paginator of this walk may run longer


class WalkError(Exception):
    """A step of the walk that did not go as the contract says."""


class HttpLog:
    """The HTTP responses of status >= 400 the server gave, for the message on failure."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    async def on_response(self, response: httpx2.Response) -> None:
        if response.status_code < 400:
            return
        await response.aread()
        body = response.text[:300].replace("\n", " ")
        auth = response.headers.get("www-authenticate")
        line = f"HTTP {response.status_code} {response.reason_phrase} to {response.request.method} {response.request.url}"
        if auth:
            line += f" (WWW-Authenticate: {auth})"
        if body:
            line += f": {body}"
        self.errors.append(line)


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (possibly nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(leaves(inner))
        return out
    return [exc]


def describe(exc: BaseException) -> str:
    parts = []
    for leaf in leaves(exc):
        code = getattr(leaf, "code", None)
        text = str(leaf) or repr(leaf)
        parts.append(f"{type(leaf).__name__}{f' {code}' if isinstance(code, int) else ''}: {text}")
    return "; ".join(parts)


def remedy(signal: dict[str, Any]) -> Any:
    """get_signal's four-part remedy: `remedy_detail` (the server's docs/mcp.md),
    or `remedy` when that is the object (the contract's spelling)."""
    if isinstance(signal.get("remedy_detail"), dict):
        return signal["remedy_detail"]
    return signal.get("remedy")


class Walk:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.schemas: dict[str, dict[str, Any] | None] = {}

    async def list_tools(self) -> list[str]:
        names: list[str] = []
        cursor: str | None = None
        for _ in range(PAGE_CAP):
            page = await self.client.list_tools(cursor=cursor)
            for tool in page.tools:
                names.append(tool.name)
                self.schemas[tool.name] = tool.output_schema
            cursor = page.next_cursor
            if not cursor:
                return names
        raise WalkError(f"tools/list did not end within {PAGE_CAP} pages")

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        what = f"tools/call {name} {json.dumps(arguments)}"
        if name not in self.schemas:
            raise WalkError(f"{what}: the server does not list the tool {name!r} (tools: {sorted(self.schemas)})")
        schema = self.schemas[name]
        if schema is None:
            raise WalkError(f"{what}: the tool has no outputSchema")
        result = await self.client.call_tool(name, arguments)
        texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
        if result.is_error:
            raise WalkError(f"{what}: isError: {' '.join(texts)}")
        sc = result.structured_content
        if not isinstance(sc, dict):
            raise WalkError(f"{what}: structuredContent is not a JSON object: {sc!r}")
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as e:
            raise WalkError(f"{what}: outputSchema is not a valid JSON Schema: {e.message}") from e
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        errors = sorted(validator.iter_errors(sc), key=lambda e: list(e.absolute_path))
        if errors:
            detail = "; ".join(f"at /{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5])
            raise WalkError(f"{what}: structuredContent does not match outputSchema: {detail}")
        if len(texts) != 1:
            raise WalkError(f"{what}: {len(texts)} text content blocks, the contract says one")
        try:
            as_text = json.loads(texts[0])
        except json.JSONDecodeError as e:
            raise WalkError(f"{what}: the text content block is not JSON: {texts[0][:200]!r}") from e
        if as_text != sc:
            raise WalkError(f"{what}: the text content block is not the structuredContent's JSON")
        return sc

    async def pages(self, name: str, arguments: dict[str, Any], key: str) -> list[Any]:
        """Every item under `key` of a paginated tool, following next_cursor."""
        items: list[Any] = []
        args = dict(arguments)
        for _ in range(PAGE_CAP):
            page = await self.call(name, args)
            if not isinstance(page.get(key), list):
                raise WalkError(f"{name}: no {key!r} list in {json.dumps(page)[:300]}")
            items.extend(page[key])
            cursor = page.get("next_cursor")
            if not cursor:
                return items
            args = {**arguments, "cursor": cursor}
        raise WalkError(f"{name} did not end within {PAGE_CAP} pages")

    async def demo(self, mode: str, days: int) -> dict[str, Any]:
        tools = await self.list_tools()

        # 1. The tool with the spike.
        rows = await self.pages("list_tools", {"days": days}, "tools")
        flights = [r for r in rows if r.get("tool") == "search_flights"]
        if not flights:
            raise WalkError(f"list_tools {{days: {days}}}: no search_flights among {[r.get('tool') for r in rows]}")
        flagged = flights[0].get("flagged_days")

        # 2. Its retry storm.
        signals = await self.pages("list_signals", {"kind": "retry_storm"}, "signals")
        storms = [s for s in signals if s.get("tool") == "search_flights"]
        if not storms:
            raise WalkError(f"list_signals {{kind: retry_storm}}: none on search_flights: {json.dumps(signals)[:400]}")
        signal_id = storms[0]["id"]
        signal = await self.call("get_signal", {"id": signal_id})

        # 3. The storm's turns: on the flagged day, and all of them.
        if not isinstance(flagged, list) or not flagged:
            raise WalkError(f"list_tools: search_flights has no flagged days: {json.dumps(flights[0])[:300]}")
        day = min(flagged)  # the incident's first flagged day
        traces = await self.pages("list_signal_traces", {"id": signal_id, "day": day}, "traces")
        if not traces:
            raise WalkError(f"list_signal_traces {{id: {signal_id!r}, day: {day!r}}}: no traces")
        every_trace = await self.pages("list_signal_traces", {"id": signal_id}, "traces")

        # 4. One of them, down to the loop.
        trace_id = traces[0]["trace_id"]
        trace = await self.call("get_trace", {"trace_id": trace_id})
        loops = [lp for lp in trace.get("loops", []) if lp.get("tool") == "search_flights"]
        if not loops:
            raise WalkError(f"get_trace {{trace_id: {trace_id!r}}}: no loop on search_flights: {json.dumps(trace.get('loops'))[:400]}")
        loop = max(loops, key=lambda lp: lp.get("attempts", 0))

        return {
            "mode": mode,
            "protocol_version": self.client.protocol_version,
            "tools": tools,
            "flagged_days": flagged,
            "signal": signal_id,
            "signal_kind": signal.get("kind"),
            "signal_tool": signal.get("tool"),
            "evidence": signal.get("evidence"),
            "day": day,
            "trace_id": trace_id,
            "traces": len(traces),
            "traces_all_days": len(every_trace),
            "attempts": loop.get("attempts"),
            "rhythm": loop.get("rhythm"),
            "remedy": remedy(signal),
            "remedy_line": signal.get("remedy") if isinstance(signal.get("remedy"), str) else None,
        }


async def main(opts: argparse.Namespace) -> dict[str, Any]:
    http_log = HttpLog()
    step = "start"
    try:
        async with AsyncExitStack() as stack:
            if opts.url:
                headers = {"Authorization": f"Bearer {opts.token}"} if opts.token is not None else {}
                http = httpx2.AsyncClient(
                    headers=headers,
                    timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
                    event_hooks={"response": [http_log.on_response]},
                )
                await stack.enter_async_context(http)
                server: Any = streamable_http_client(opts.url, http_client=http)
                where = opts.url
            else:
                server = StdioServerParameters(
                    command=opts.stdio,
                    args=["mcp", "--stdio", "--data-dir", opts.data_dir],
                    # The demo incident is dated July 2026: keep it whatever today is.
                    env={
                        "STORMWATCH_RETENTION_DAYS": os.environ.get("STORMWATCH_RETENTION_DAYS", "0"),
                        "RUST_LOG": os.environ.get("RUST_LOG", "warn"),
                    },
                )
                where = f"{opts.stdio} mcp --stdio --data-dir {opts.data_dir}"
            step = f"connect to {where} (mode {opts.mode})"
            client = await stack.enter_async_context(Client(server, mode=opts.mode, read_timeout_seconds=60))
            step = f"the walk (mode {opts.mode}, protocol {client.protocol_version})"
            out = await Walk(client).demo(opts.mode, opts.days)
            step = "closing the connection"
        return out
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        msg = f"{step}: {describe(e)}"
        for line in http_log.errors:
            msg += f"\n  the server answered {line}"
        raise WalkError(msg) from e


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="the server's Streamable HTTP endpoint, http://HOST:PORT/mcp")
    where.add_argument("--stdio", metavar="BIN", help="the stormwatch binary, run as `BIN mcp --stdio`")
    p.add_argument("--data-dir", help="with --stdio: the data dir the server reads")
    p.add_argument("--mode", default="auto", choices=MODES)
    p.add_argument("--token", help="with --url: sent as Authorization: Bearer TOKEN")
    p.add_argument("--days", type=int, default=30, help="list_tools' window (default 30)")
    opts = p.parse_args(argv)
    if opts.stdio and not opts.data_dir:
        p.error("--stdio needs --data-dir")
    if opts.stdio and opts.token is not None:
        p.error("--token is for --url (stdio has no HTTP auth)")
    return opts


if __name__ == "__main__":
    opts = parse_args(sys.argv[1:])
    try:
        out = asyncio.run(main(opts))
    except WalkError as e:
        print(f"walk.py: {e}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(out))
