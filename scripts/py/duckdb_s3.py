"""The README's ad hoc SQL over a shared store, run by DuckDB with httpfs.

    python duckdb_s3.py s3://bucket/prefix 2026-07-29

Prints one JSON object, tool name -> [calls, errors], for the tool calls of
that day, leaving out what each day's `_sealed.json` says is not live (the
parts a seal replaced, until the detect node deletes them; the outputs of a
seal still uploading), so the counts are right at any moment. The S3 endpoint, keys and region come from the usual AWS variables
(AWS_ENDPOINT_URL for a MinIO-style server on plain HTTP). The httpfs
extension is loaded from the `duckdb-extension-httpfs` package, so nothing is
fetched from the network.
"""

import json
import os
import pathlib
import sys
from urllib.parse import urlparse

import duckdb
import duckdb_extension_httpfs


def httpfs_path() -> pathlib.Path:
    root = pathlib.Path(duckdb_extension_httpfs.__path__[0])
    found = sorted(root.glob(f"extensions/v{duckdb.__version__}/httpfs.duckdb_extension"))
    if not found:
        sys.exit(f"no httpfs extension for DuckDB {duckdb.__version__} under {root}")
    return found[0]


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    store, day = sys.argv[1].rstrip("/"), sys.argv[2]
    con = duckdb.connect()
    con.execute(f"LOAD '{httpfs_path()}'")
    endpoint = urlparse(os.environ.get("AWS_ENDPOINT_URL", "https://s3.amazonaws.com"))
    def lit(s: str) -> str:
        return "'" + s.replace("'", "''") + "'"

    con.execute(
        f"CREATE SECRET (TYPE s3, KEY_ID {lit(os.environ['AWS_ACCESS_KEY_ID'])}, "
        f"SECRET {lit(os.environ['AWS_SECRET_ACCESS_KEY'])}, "
        f"REGION {lit(os.environ.get('AWS_REGION', 'us-east-1'))}, "
        f"ENDPOINT {lit(endpoint.netloc)}, URL_STYLE 'path', "
        f"USE_SSL {'true' if endpoint.scheme == 'https' else 'false'})"
    )
    # What a glob lists but is not live: the parts a seal replaced (until
    # the holder deletes them) and the outputs of a seal still uploading.
    spans = f"{store}/spans"
    try:
        docs = con.execute(f"SELECT filename, content FROM read_text('{spans}/*/_sealed.json')").fetchall()
    except duckdb.IOException:
        docs = []
    named, skip = set(), []
    for path, content in docs:
        day_dir = path.rsplit("/", 1)[0]
        doc = json.loads(content)
        skip += [f"{day_dir}/{r['name']}" for r in doc.get("replaced", [])]
        named |= {f"{day_dir}/{o}" for o in doc.get("outputs", [])}
    files = [f for (f,) in con.execute(f"SELECT file FROM glob('{spans}/*/*.parquet')").fetchall()]
    skip += [f for f in files if f.endswith("-s.parquet") and f not in named]
    # The README's query, but for the store, the day and those files.
    rows = con.execute(
        f"""
        SELECT tool_name, count(*) AS calls, count(*) FILTER (error_class <> 'ok') AS errors
        FROM read_parquet('{spans}/*/*.parquet', hive_partitioning = true, filename = true)
        WHERE is_tool_call AND date = ? AND NOT list_contains(?, filename)
        GROUP BY tool_name
        """,
        [day, skip],
    ).fetchall()
    print(json.dumps({tool: [calls, errors] for tool, calls, errors in rows}, sort_keys=True))


if __name__ == "__main__":
    main()
