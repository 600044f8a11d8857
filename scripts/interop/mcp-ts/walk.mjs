// Walk stormwatch's MCP server through the demo incident with the official
// MCP TypeScript SDK's client (@modelcontextprotocol/sdk: Client over
// StreamableHTTPClientTransport), pinned in package-lock.json and installed
// with `npm ci`.
//
//   node walk.mjs --url http://127.0.0.1:PORT/mcp [--token TOKEN] [--days 30]
//
// The SDK 1.x speaks the initialize handshake (its newest revision is
// 2025-11-25), so this is the stateful era: initialize, `Mcp-Session-Id`,
// and at the end a DELETE that ends the session (terminateSession), then one
// POST by hand with the ended session's id, which the server must not know.
// --token sends `Authorization: Bearer TOKEN` on every request
// (requestInit.headers).
//
// The walk is scripts/interop/mcp-py/walk.py's (the contract's demo walk):
// tools/list (every page), `list_tools`, `list_signals` {kind: retry_storm},
// `get_signal`, `list_signal_traces` (every page; on the earliest flagged
// day, then on every day), `get_trace` of the first trace. Every call must succeed (no isError), its structuredContent must be
// a JSON object valid against the tool's outputSchema (checked here with Ajv,
// draft 2020-12 or draft-07 as the schema says, besides the SDK's own check)
// and equal to the JSON of its one text content block.
//
// stdout: one JSON line of walk.py's shape ({mode: "typescript",
// protocol_version, tools, flagged_days, signal, signal_kind, signal_tool,
// evidence, day, trace_id, traces, traces_all_days, attempts, rhythm, remedy,
// remedy_line}) plus session:
// {delete_status, status_after_delete}, the HTTP statuses of the DELETE and
// of the POST after it. On any failure: a message naming the step (and the
// HTTP status the SDK reports) on stderr, nothing on stdout, exit 1. Exit 2
// for bad arguments.
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const PAGE_CAP = 50;

const { values: opts } = parseArgs({
  options: {
    url: { type: 'string' },
    token: { type: 'string' },
    days: { type: 'string', default: '30' },
  },
});
if (!opts.url || !/^\d+$/.test(opts.days)) {
  console.error('usage: node walk.mjs --url http://HOST:PORT/mcp [--token TOKEN] [--days 30]');
  process.exit(2);
}

class WalkError extends Error {}

// One Ajv per draft; formats it does not know (int64, uint, double: schemars'
// own) are annotations, as JSON Schema says, not errors.
function makeAjv(Cls) {
  const ajv = new Cls({ strict: false, allErrors: true, logger: false });
  addFormats(ajv);
  return ajv;
}
const ajvs = { 2020: makeAjv(Ajv2020.default ?? Ajv2020), 7: makeAjv(Ajv.default ?? Ajv) };
function validatorFor(schema) {
  const draft = String(schema.$schema ?? '').includes('2020-12') ? 2020 : 7;
  return ajvs[draft].compile(schema);
}

function describe(e) {
  const code = e && e.code !== undefined ? ` (code ${e.code})` : '';
  return `${e?.name ?? 'Error'}${code}: ${e?.message ?? String(e)}`;
}

const headers = opts.token !== undefined ? { Authorization: `Bearer ${opts.token}` } : {};
// The SDK's own fetch, watched for the status of the DELETE (which the SDK
// lets pass as 405 too, "termination not allowed").
let deleteStatus;
async function watchedFetch(url, init) {
  const response = await fetch(url, init);
  if (init?.method === 'DELETE') deleteStatus = response.status;
  return response;
}
const transport = new StreamableHTTPClientTransport(new URL(opts.url), {
  requestInit: { headers },
  fetch: watchedFetch,
});
const client = new Client({ name: 'stormwatch-mcp-ts-walk', version: '1.0.0' });
const schemas = new Map();

async function listAllTools() {
  const names = [];
  let cursor;
  for (let i = 0; i < PAGE_CAP; i++) {
    const page = await client.listTools(cursor ? { cursor } : {});
    for (const t of page.tools) {
      names.push(t.name);
      schemas.set(t.name, t.outputSchema);
    }
    cursor = page.nextCursor;
    if (!cursor) return names;
  }
  throw new WalkError(`tools/list did not end within ${PAGE_CAP} pages`);
}

async function call(name, args) {
  const what = `tools/call ${name} ${JSON.stringify(args)}`;
  if (!schemas.has(name)) throw new WalkError(`${what}: the server does not list the tool ${name}`);
  const schema = schemas.get(name);
  if (!schema) throw new WalkError(`${what}: the tool has no outputSchema`);
  const result = await client.callTool({ name, arguments: args });
  const texts = (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text);
  if (result.isError) throw new WalkError(`${what}: isError: ${texts.join(' ')}`);
  const sc = result.structuredContent;
  if (!sc || typeof sc !== 'object' || Array.isArray(sc)) {
    throw new WalkError(`${what}: structuredContent is not a JSON object: ${JSON.stringify(sc)}`);
  }
  let validate;
  try {
    validate = validatorFor(schema);
  } catch (e) {
    throw new WalkError(`${what}: outputSchema does not compile: ${e.message}`);
  }
  if (!validate(sc)) {
    const detail = validate.errors.slice(0, 5).map((e) => `at ${e.instancePath || '/'}: ${e.message}`).join('; ');
    throw new WalkError(`${what}: structuredContent does not match outputSchema: ${detail}`);
  }
  if (texts.length !== 1) throw new WalkError(`${what}: ${texts.length} text content blocks, the contract says one`);
  let asText;
  try {
    asText = JSON.parse(texts[0]);
  } catch {
    throw new WalkError(`${what}: the text content block is not JSON: ${texts[0].slice(0, 200)}`);
  }
  if (!deepEqual(asText, sc)) throw new WalkError(`${what}: the text content block is not the structuredContent's JSON`);
  return sc;
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
}

async function pages(name, args, key) {
  const items = [];
  let next = { ...args };
  for (let i = 0; i < PAGE_CAP; i++) {
    const page = await call(name, next);
    if (!Array.isArray(page[key])) throw new WalkError(`${name}: no ${key} list in ${JSON.stringify(page).slice(0, 300)}`);
    items.push(...page[key]);
    if (!page.next_cursor) return items;
    next = { ...args, cursor: page.next_cursor };
  }
  throw new WalkError(`${name} did not end within ${PAGE_CAP} pages`);
}

async function demo() {
  const tools = await listAllTools();
  const days = Number(opts.days);

  const rows = await pages('list_tools', { days }, 'tools');
  const flights = rows.filter((r) => r.tool === 'search_flights');
  if (!flights.length) throw new WalkError(`list_tools {days: ${days}}: no search_flights among ${JSON.stringify(rows.map((r) => r.tool))}`);

  const signals = await pages('list_signals', { kind: 'retry_storm' }, 'signals');
  const storms = signals.filter((s) => s.tool === 'search_flights');
  if (!storms.length) throw new WalkError(`list_signals {kind: retry_storm}: none on search_flights: ${JSON.stringify(signals).slice(0, 400)}`);
  const signalId = storms[0].id;
  const signal = await call('get_signal', { id: signalId });

  // The storm's turns on the incident's first flagged day, and on every day.
  const flagged = flights[0].flagged_days;
  if (!Array.isArray(flagged) || !flagged.length) throw new WalkError(`list_tools: search_flights has no flagged days: ${JSON.stringify(flights[0]).slice(0, 300)}`);
  const day = [...flagged].sort()[0];
  const traces = await pages('list_signal_traces', { id: signalId, day }, 'traces');
  if (!traces.length) throw new WalkError(`list_signal_traces {id: ${signalId}, day: ${day}}: no traces`);
  const everyTrace = await pages('list_signal_traces', { id: signalId }, 'traces');

  const traceId = traces[0].trace_id;
  const trace = await call('get_trace', { trace_id: traceId });
  const loops = (trace.loops ?? []).filter((l) => l.tool === 'search_flights');
  if (!loops.length) throw new WalkError(`get_trace {trace_id: ${traceId}}: no loop on search_flights: ${JSON.stringify(trace.loops).slice(0, 400)}`);
  const loop = loops.reduce((a, b) => ((b.attempts ?? 0) > (a.attempts ?? 0) ? b : a));

  return {
    mode: 'typescript',
    protocol_version: transport.protocolVersion,
    tools,
    flagged_days: flagged,
    signal: signalId,
    signal_kind: signal.kind,
    signal_tool: signal.tool,
    evidence: signal.evidence,
    day,
    trace_id: traceId,
    traces: traces.length,
    traces_all_days: everyTrace.length,
    attempts: loop.attempts,
    rhythm: loop.rhythm,
    // The four-part remedy: remedy_detail (the server's docs/mcp.md), or
    // remedy when that is the object (the contract's spelling).
    remedy: isObject(signal.remedy_detail) ? signal.remedy_detail : signal.remedy,
    remedy_line: typeof signal.remedy === 'string' ? signal.remedy : null,
  };
}

let step = `connect to ${opts.url}`;
try {
  await client.connect(transport);
  step = `the walk (protocol ${transport.protocolVersion}, session ${transport.sessionId})`;
  const out = await demo();
  step = 'ending the session (DELETE)';
  const sessionId = transport.sessionId;
  if (!sessionId) throw new WalkError('the server gave no Mcp-Session-Id');
  await transport.terminateSession();
  // The ended session's id, used again by hand: the server must not know it.
  const after = await fetch(opts.url, {
    method: 'POST',
    headers: {
      ...headers,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'Mcp-Session-Id': sessionId,
      'MCP-Protocol-Version': transport.protocolVersion,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'tools/list', params: {} }),
  });
  await after.body?.cancel();
  out.session = { delete_status: deleteStatus, status_after_delete: after.status };
  step = 'closing the client';
  await client.close();
  console.log(JSON.stringify(out));
} catch (e) {
  console.error(`walk.mjs: ${step}: ${describe(e)}`);
  await client.close().catch(() => {});
  process.exit(1);
}
