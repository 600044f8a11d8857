"""Validate JSON instances against JSON Schemas (for tests/it/mcp_http.rs).

Reads from stdin a JSON array of {"name", "schema", "instance"}; prints one
line per failure ("name: message at path") and exits 1 when any failed.
Uses the `jsonschema` package of the venv-mcp venv (pinned in
scripts/py/requirements-mcp.txt), with the draft each schema names (the
MCP tools' schemas say 2020-12).
"""

import json
import sys

import jsonschema


def main():
    failed = 0
    for case in json.load(sys.stdin):
        cls = jsonschema.validators.validator_for(case["schema"], default=jsonschema.Draft202012Validator)
        cls.check_schema(case["schema"])
        for e in cls(case["schema"]).iter_errors(case["instance"]):
            failed += 1
            path = "/".join(str(p) for p in e.absolute_path)
            print(f"{case['name']}: {e.message} at /{path}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
