"""Parse a `/metrics` exposition with the Python `prometheus_client` parsers
(for tests/it/metrics.rs).

Usage: parse_metrics.py openmetrics|text < exposition

`openmetrics` uses prometheus_client.openmetrics.parser, which is strict: it
refuses a missing `# EOF`, a counter sample without `_total`, a badly escaped
label, histogram buckets out of order or not cumulative, a `+Inf` bucket
that is missing or differs from `_count`, a family split in two. `text` uses
prometheus_client.parser (the Prometheus text format 0.0.4). Prints the
families as JSON: [{"name", "type", "unit", "help", "samples": [{"name",
"labels", "value"}]}]; on a parse error prints it to stderr and exits 1.
Uses the venv-proto venv (prometheus_client pinned in
scripts/py/requirements-proto.txt).
"""

import json
import math
import sys

from prometheus_client import parser as text_parser
from prometheus_client.openmetrics import parser as openmetrics_parser


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("openmetrics", "text"):
        sys.exit("usage: parse_metrics.py openmetrics|text < exposition")
    parse = {
        "openmetrics": openmetrics_parser.text_string_to_metric_families,
        "text": text_parser.text_string_to_metric_families,
    }[sys.argv[1]]
    exposition = sys.stdin.read()
    try:
        families = list(parse(exposition))
    except ValueError as e:
        print(f"parse error: {e}", file=sys.stderr)
        sys.exit(1)
    out = []
    for f in families:
        samples = []
        for s in f.samples:
            if not math.isfinite(s.value):
                print(f"parse error: {s.name} has the value {s.value}", file=sys.stderr)
                sys.exit(1)
            samples.append({"name": s.name, "labels": s.labels, "value": s.value})
        out.append(
            {
                "name": f.name,
                "type": f.type,
                "unit": f.unit,
                "help": f.documentation,
                "samples": samples,
            }
        )
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
