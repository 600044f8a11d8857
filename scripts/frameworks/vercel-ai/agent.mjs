// One Vercel AI SDK `generateText` turn, offline, sending the SDK's own
// OpenTelemetry spans to an OTLP/HTTP (protobuf) endpoint.
//
//   node agent.mjs --sdk 6|7 storm|healthy --endpoint URL [--session ID]
//
// The model is the SDK's mock from `ai/test` (MockLanguageModelV3 for AI SDK 6,
// MockLanguageModelV4 for 7): it answers each step from the prompt so far,
// asking for the next tool call until the plan is done, then giving a final
// text. `stopWhen: stepCountIs(20)` lets generateText run the tool loop.
//
//   storm    `fetch_page` with the same url 10 times; every call throws
//            Error("upstream 503 Service Unavailable") (the SDK hands the
//            model a tool-error result and carries on); then a final answer.
//   healthy  a coding agent: `run_command` with 10 different commands;
//            calls 3 and 7 throw Error("command timed out after 30s").
//
// Telemetry, as each version documents it:
//   6: experimental_telemetry { isEnabled, functionId, metadata: { sessionId } }
//      with a registered NodeTracerProvider: spans ai.generateText >
//      ai.generateText.doGenerate, ai.toolCall (ai.toolCall.name/id/args/result).
//   7: telemetry.integrations [new OpenTelemetry()] from @ai-sdk/otel: spans
//      invoke_agent > step N > chat, execute_tool (gen_ai.* conventions); the
//      session goes on every span as `session.id` through enrichSpan from
//      runtimeContext (AI SDK 7 has no session attribute of its own).
//
// Prints one JSON manifest line on stdout (trace ids, tool, calls, failures,
// every exported span).
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { z } from 'zod';

const { values: opts, positionals } = parseArgs({
  allowPositionals: true,
  options: { sdk: { type: 'string' }, endpoint: { type: 'string' }, session: { type: 'string' } },
});
const scenarioName = positionals[0];
if (!['6', '7'].includes(opts.sdk) || !['storm', 'healthy'].includes(scenarioName) || !opts.endpoint) {
  console.error('usage: node agent.mjs --sdk 6|7 storm|healthy --endpoint URL [--session ID]');
  process.exit(2);
}
const pkg = opts.sdk === '6' ? 'ai' : 'ai-v7';
const ai = await import(pkg);
const { [opts.sdk === '6' ? 'MockLanguageModelV3' : 'MockLanguageModelV4']: MockModel } = await import(`${pkg}/test`);
const aiVersion = createRequire(import.meta.url)(`${pkg}/package.json`).version;
const session = opts.session ?? `vercel-ai-${opts.sdk}-${scenarioName}`;

const TOOL_MS = 15; // each tool call takes a little time, as a real one would
const SCENARIOS = {
  storm: {
    tool: 'fetch_page',
    description: 'Fetch a web page',
    schema: z.object({ url: z.string() }),
    calls: Array.from({ length: 10 }, () => ({ url: 'https://status.example.com/incidents/latest' })),
    fail: new Set(Array.from({ length: 10 }, (_, i) => i)),
    error: 'upstream 503 Service Unavailable',
    prompt: 'What does the latest incident report say?',
    answer: 'I could not load the incident page: the site keeps answering 503.',
  },
  healthy: {
    tool: 'run_command',
    description: 'Run a shell command in the repository',
    schema: z.object({ command: z.string() }),
    calls: [
      'git status --short',
      'ls src',
      'cargo build --release',
      'cat src/main.rs',
      'grep -rn retry src',
      'cargo test --lib',
      'cargo test --test it',
      'git diff --stat',
      'cargo fmt --check',
      'cargo clippy -- -D warnings',
    ].map(command => ({ command })),
    fail: new Set([2, 6]), // the 3rd and 7th calls; never adjacent
    error: 'command timed out after 30s',
    prompt: 'Fix the failing build.',
    answer: 'The build is fixed and the tests pass.',
  },
};
const scenario = SCENARIOS[scenarioName];

// The real exporter, keeping what it sent and whether every batch got through.
const inner = new OTLPTraceExporter({ url: opts.endpoint, timeoutMillis: 10_000 });
const sent = [];
let exportFailures = 0;
const exporter = {
  export(spans, done) {
    inner.export(spans, result => {
      if (result.code === 0) sent.push(...spans);
      else exportFailures += 1;
      done(result);
    });
  },
  shutdown: () => inner.shutdown(),
  forceFlush: () => inner.forceFlush(),
};
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': `vercel-ai-${opts.sdk}-${scenarioName}` }),
  spanProcessors: [new BatchSpanProcessor(exporter)],
});
provider.register();

const usage = {
  inputTokens: { total: 40, noCache: 40, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 12, text: 12, reasoning: undefined },
};
const model = new MockModel({
  modelId: 'scripted',
  doGenerate: async ({ prompt }) => {
    const made = prompt
      .filter(m => m.role === 'assistant')
      .flatMap(m => m.content)
      .filter(p => p.type === 'tool-call').length;
    if (made < scenario.calls.length) {
      const input = JSON.stringify(scenario.calls[made]);
      const call = { type: 'tool-call', toolCallId: `call_${String(made + 1).padStart(2, '0')}`, toolName: scenario.tool, input };
      return { content: [call], finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] };
    }
    return { content: [{ type: 'text', text: scenario.answer }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
  },
});

let executed = 0;
const tools = {
  [scenario.tool]: ai.tool({
    description: scenario.description,
    inputSchema: scenario.schema,
    execute: async () => {
      const i = executed++;
      await sleep(TOOL_MS);
      if (scenario.fail.has(i)) throw new Error(scenario.error);
      return { ok: true, output: `step ${i + 1} done` };
    },
  }),
};

const functionId = scenarioName === 'storm' ? 'research-agent' : 'coding-agent';
const common = { model, prompt: scenario.prompt, tools, stopWhen: ai.stepCountIs(20) };
let result;
if (opts.sdk === '6') {
  result = await ai.generateText({
    ...common,
    experimental_telemetry: { isEnabled: true, functionId, metadata: { sessionId: session } },
  });
} else {
  const { OpenTelemetry } = await import('@ai-sdk/otel');
  const otel = new OpenTelemetry({
    agentSpanName: 'functionId',
    enrichSpan: ({ runtimeContext }) => (runtimeContext?.sessionId ? { 'session.id': runtimeContext.sessionId } : {}),
  });
  result = await ai.generateText({
    ...common,
    runtimeContext: { sessionId: session },
    telemetry: { functionId, integrations: [otel], includeRuntimeContext: { sessionId: true } },
  });
}
await provider.forceFlush();
await provider.shutdown();
if (exportFailures > 0) {
  console.error(`error: ${exportFailures} export batch(es) to ${opts.endpoint} failed`);
  process.exit(1);
}

const toolName = s => s.attributes['ai.toolCall.name'] ?? (s.attributes['gen_ai.operation.name'] === 'execute_tool' ? s.attributes['gen_ai.tool.name'] : undefined);
const toolSpans = sent.filter(s => toolName(s) !== undefined);
const manifest = {
  framework: 'vercel-ai',
  version: aiVersion,
  scenario: scenarioName,
  output: result.text,
  trace_ids: [...new Set(sent.map(s => s.spanContext().traceId))].sort(),
  session_id: session,
  tool: scenario.tool,
  tool_calls: toolSpans.length,
  failures: toolSpans.filter(s => s.status.code === 2).length,
  spans: sent.map(s => ({
    trace_id: s.spanContext().traceId,
    span_id: s.spanContext().spanId,
    name: s.name,
    tool_name: toolName(s) ?? null,
    failed: s.status.code === 2,
  })),
};
process.stdout.write(JSON.stringify(manifest) + '\n');
