// Tool-call spans sent to an OTLP/gRPC endpoint by the OpenTelemetry JS
// SDK's own gRPC exporter (@opentelemetry/exporter-trace-otlp-grpc, on
// @grpc/grpc-js), pinned in package-lock.json and installed with `npm ci`.
//
//   node export_spans.mjs --endpoint http://127.0.0.1:4317 --run-id RUN
//        [--compression none|gzip] [--token TOKEN] [--batch-size 8]
//
// The spans are made by a real BasicTracerProvider (explicit timestamps, over
// the last few minutes), collected by an InMemorySpanExporter behind a
// SimpleSpanProcessor, then handed to the OTLP/gRPC exporter in batches, one
// Export call each. --token sends the metadata `authorization: Bearer TOKEN`
// (a grpc-js Metadata in the exporter's `metadata` option); without it the
// exporter still reads OTEL_EXPORTER_OTLP_HEADERS as it always does.
//
// stdout: one JSON manifest line (every span with the tool, error class and
// session the receiver must store). Exit 1 when any batch is not exported
// (the exporter's error on stderr).
import { parseArgs } from 'node:util';
import { Metadata } from '@grpc/grpc-js';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

const { values: opts } = parseArgs({
  options: {
    endpoint: { type: 'string' },
    'run-id': { type: 'string' },
    compression: { type: 'string', default: 'none' },
    token: { type: 'string' },
    'batch-size': { type: 'string', default: '8' },
  },
});
if (!opts.endpoint || !opts['run-id'] || !['none', 'gzip'].includes(opts.compression)) {
  console.error('usage: node export_spans.mjs --endpoint URL --run-id RUN [--compression none|gzip] [--token T]');
  process.exit(2);
}
const runId = opts['run-id'];
const batchSize = Number(opts['batch-size']);
const SERVICE = 'node-grpc-interop';

// The HTTP status a tool call's upstream answered, and the class stored for it.
const CLASS = { 200: 'ok', 503: 'unavailable', 429: 'rate_limited', 410: 'not_found' };
const PLAN = [200, 503, 503, 200, 429, 200, 410, 503, 200];

const memory = new InMemorySpanExporter();
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ 'service.name': SERVICE, 'stormwatch.interop.run_id': runId }),
  spanProcessors: [new SimpleSpanProcessor(memory)],
});
const tracer = provider.getTracer('stormwatch.node-grpc-interop', '0.1.0');

const manifest = [];
const key = (span) => {
  const cx = span.spanContext();
  return { trace_id: cx.traceId, span_id: cx.spanId };
};
let clock = Date.now() - 5 * 60 * 1000;
for (let s = 1; s <= 3; s++) {
  const session = `${runId}-s${s}`;
  const root = tracer.startSpan(
    'invoke_agent travel-agent',
    {
      kind: SpanKind.INTERNAL,
      startTime: clock,
      attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'travel-agent', 'session.id': session },
    },
    ROOT_CONTEXT,
  );
  const parent = trace.setSpan(ROOT_CONTEXT, root);
  clock += 5;
  PLAN.forEach((status, i) => {
    const span = tracer.startSpan(
      'execute_tool search_flights',
      {
        kind: SpanKind.INTERNAL,
        startTime: clock,
        attributes: {
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': 'search_flights',
          'gen_ai.tool.call.id': `call_${runId}_${s}_${i}`,
          'gen_ai.tool.call.arguments': JSON.stringify({ origin: 'SFO', destination: 'JFK', leg: i }),
          'http.response.status_code': status,
          'session.id': session,
        },
      },
      parent,
    );
    clock += 150 + i * 10;
    span.setStatus(status >= 400 ? { code: SpanStatusCode.ERROR, message: `HTTP ${status}` } : { code: SpanStatusCode.OK });
    span.end(clock);
    clock += 20;
    manifest.push({ ...key(span), tool_name: 'search_flights', error_class: CLASS[status], session_id: session, is_tool_call: true });
  });
  root.end(clock);
  manifest.push({ ...key(root), tool_name: null, error_class: 'ok', session_id: session, is_tool_call: false });
  clock += 1000;
}
await provider.forceFlush();
const spans = memory.getFinishedSpans();
if (spans.length !== manifest.length) {
  console.error(`the SDK finished ${spans.length} spans, ${manifest.length} were started`);
  process.exit(1);
}

const config = { url: opts.endpoint, compression: opts.compression, timeoutMillis: 10_000 };
if (opts.token !== undefined) {
  const metadata = new Metadata();
  metadata.set('authorization', `Bearer ${opts.token}`);
  config.metadata = metadata;
}
const exporter = new OTLPTraceExporter(config);
let batches = 0;
for (let i = 0; i < spans.length; i += batchSize) {
  const batch = spans.slice(i, i + batchSize);
  const result = await new Promise((resolve) => exporter.export(batch, resolve));
  if (result.code !== 0) {
    console.error(`error: batch ${batches} (${batch.length} spans) to ${opts.endpoint} not exported: ${result.error}`);
    await exporter.shutdown();
    process.exit(1);
  }
  batches++;
}
await exporter.shutdown();
await provider.shutdown();
process.stdout.write(
  JSON.stringify({ service: SERVICE, compression: opts.compression, run_id: runId, batches, spans: manifest }) + '\n',
);
