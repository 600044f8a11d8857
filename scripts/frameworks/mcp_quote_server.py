"""An MCP tool server (MCP Python SDK 2.x, stdio) with four tools behind one
upstream that can be down, with the SDK's own OpenTelemetry spans exported
over OTLP/HTTP (protobuf): the dependency whose outage becomes one incident.

    <python> scripts/frameworks/mcp_quote_server.py [--down all|none|TOOL,TOOL,...]
        [--error TEXT] [--spans-out FILE] [--tool-seconds S]

Like mcp_fare_server.py (whose `serve_stdio` runs it: the same tracing, the
same --spans-out file, the same stdio channel with nothing else written on
stdout), for the same interpreters (venv-pydantic-mcp, venv-oai-agents). Its
four tools, made with the SDK's high-level `MCPServer`
(`mcp.server.mcpserver`), each sleep --tool-seconds (default 0.015) and then
answer with a JSON text, or fail:

  get_quote(symbol: str)                           {"symbol", "price_usd", "call"}
  get_fx_rate(base: str, quote: str)               {"base", "quote", "rate", "call"}
  convert_amount(amount: float, base: str, quote: str)
                                                   {"amount", "base", "quote", "converted", "call"}
  list_rates(base: str)                            {"base", "rates": {code: rate}, "call"}

Which tools are down (every call of a down tool fails; calls are counted per
server process, over all four tools):
  --down all | none | a comma list of tool names   (env QUOTE_MCP_DOWN; default none)
  --error TEXT    the failure's words              (env QUOTE_MCP_ERROR;
                                                    default "HTTP 503 Service Unavailable")
A failing call raises `mcp.server.mcpserver.exceptions.ToolError(TEXT)`, the
SDK's way for an anticipated failure: the result has isError=true and one
text block "Error executing tool <tool>: TEXT"; the server's
`tools/call <tool>` SERVER span gets `error.type` = tool_error and status
ERROR.

Environment: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (full traces URL; unset: no
export), OTEL_SERVICE_NAME (resource service.name, default quote-mcp: the
name stormwatch records as the tools' `dependency`), QUOTE_MCP_SPANS_OUT (as
--spans-out; the file mcp_fare_server.py describes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from harness import TOOL_SECONDS
from mcp_fare_server import serve_stdio

SCRIPT = os.path.abspath(__file__)
SERVICE = "quote-mcp"
TOOLS = ("get_quote", "get_fx_rate", "convert_amount", "list_rates")

# A fixed table, so answers are the same on every run.
USD_RATES = {"EUR": 0.92, "GBP": 0.79, "JPY": 151.4, "CHF": 0.88, "CAD": 1.37}
PRICES_USD = {"ACME": 182.5, "GLOBEX": 47.25, "INITECH": 12.8, "UMBRELLA": 301.0}


def parse_down(text: str) -> set[str]:
    text = text.strip()
    if text.lower() in ("all", "none", ""):
        return set(TOOLS) if text.lower() == "all" else set()
    down = {t.strip() for t in text.split(",") if t.strip()}
    unknown = down - set(TOOLS)
    if unknown:
        raise argparse.ArgumentTypeError(f"--down: all, none or tools among {', '.join(TOOLS)}; not {sorted(unknown)}")
    return down


def rate(base: str, quote: str) -> float:
    """quote units per base unit, through USD."""
    usd = {"USD": 1.0, **USD_RATES}
    return round(usd.get(quote.upper(), 1.0) / usd.get(base.upper(), 1.0), 6)


def build_server(down: set[str], error: str, tool_seconds: float, counts: dict[str, int]) -> Any:
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer(SERVICE, instructions="Stock quotes and currency rates.", log_level="WARNING")

    async def call(tool: str) -> int:
        """Count the call, take the upstream's time, fail it if its tool is down; the call's number."""
        counts["calls"] += 1
        n = counts["calls"]
        await anyio.sleep(tool_seconds)
        if tool in down:
            counts["failures"] += 1
            raise ToolError(error)
        return n

    @server.tool(name="get_quote", structured_output=False)
    async def get_quote(symbol: str) -> str:
        """The latest price of a stock symbol, in USD."""
        n = await call("get_quote")
        price = PRICES_USD.get(symbol.upper(), 100.0 + sum(map(ord, symbol)) % 50)
        return json.dumps({"symbol": symbol, "price_usd": price, "call": n})

    @server.tool(name="get_fx_rate", structured_output=False)
    async def get_fx_rate(base: str, quote: str) -> str:
        """The exchange rate from base to quote (ISO 4217 currency codes)."""
        n = await call("get_fx_rate")
        return json.dumps({"base": base, "quote": quote, "rate": rate(base, quote), "call": n})

    @server.tool(name="convert_amount", structured_output=False)
    async def convert_amount(amount: float, base: str, quote: str) -> str:
        """Convert an amount of the base currency into the quote currency."""
        n = await call("convert_amount")
        converted = round(amount * rate(base, quote), 2)
        return json.dumps({"amount": amount, "base": base, "quote": quote, "converted": converted, "call": n})

    @server.tool(name="list_rates", structured_output=False)
    async def list_rates(base: str) -> str:
        """Every rate the service knows, against the base currency."""
        n = await call("list_rates")
        rates = {code: rate(base, code) for code in ["USD", *USD_RATES] if code != base.upper()}
        return json.dumps({"base": base, "rates": rates, "call": n})

    return server


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--down", type=parse_down, default=parse_down(os.environ.get("QUOTE_MCP_DOWN", "none")))
    ap.add_argument("--error", default=os.environ.get("QUOTE_MCP_ERROR", "HTTP 503 Service Unavailable"))
    ap.add_argument("--spans-out", default=os.environ.get("QUOTE_MCP_SPANS_OUT") or None)
    ap.add_argument("--tool-seconds", type=float, default=TOOL_SECONDS)
    args = ap.parse_args(argv)
    return serve_stdio(
        lambda counts: build_server(args.down, args.error, args.tool_seconds, counts),
        SERVICE,
        args.spans_out,
        "mcp_quote_server.py",
    )


if __name__ == "__main__":
    sys.exit(main())
