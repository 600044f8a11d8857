"""The README's ad hoc SQL over a shared store, run by DuckDB with httpfs.

    python duckdb_s3.py s3://bucket/prefix 2026-07-29

Prints one JSON object, tool name -> [calls, errors], for the tool calls of
that day. The S3 endpoint, keys and region come from the usual AWS variables
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
    # The README's query, word for word but for the store and the day.
    rows = con.execute(
        f"""
        SELECT tool_name, count(*) AS calls, count(*) FILTER (error_class <> 'ok') AS errors
        FROM read_parquet('{store}/spans/*/*.parquet', hive_partitioning = true)
        WHERE is_tool_call AND date = ?
        GROUP BY tool_name
        """,
        [day],
    ).fetchall()
    print(json.dumps({tool: [calls, errors] for tool, calls, errors in rows}, sort_keys=True))


if __name__ == "__main__":
    main()
