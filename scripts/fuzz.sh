#!/usr/bin/env bash
# Run the cargo-fuzz targets over the ingest stage's decoders (fuzz/, which
# builds crates/otlp alone, without polars) and minimize their corpora.
#
#   scripts/fuzz.sh                    every target, 30 min or 10 M runs each
#   scripts/fuzz.sh decode_json        one target
#   FUZZ_SECONDS=60 scripts/fuzz.sh    a short run
#
# Needs the nightly toolchain (rustup installs it if missing) and cargo-fuzz
# (installed here, pinned, built with the stable toolchain). The corpora in
# fuzz/corpus/ are committed; a run adds to them and minimizes them again
# (`cargo fuzz cmin`). Crashes land in fuzz/artifacts/<target>/ and the run
# stops there with libFuzzer's reproduction command. Logs: fuzz/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.1
SECONDS_EACH="${FUZZ_SECONDS:-1800}"
RUNS_EACH="${FUZZ_RUNS:-10000000}"
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(decode_protobuf decode_json decompress read_file sql_guard)

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
if [[ "$(cargo fuzz --version 2>/dev/null || true)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]]; then
  # cargo-fuzz's own locked dependencies do not build on current nightly;
  # the tool itself needs no nightly, only the targets do.
  cargo +stable install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi

mkdir -p fuzz/logs
cd fuzz
cargo +nightly fuzz build --release
for t in "${TARGETS[@]}"; do
  mkdir -p "corpus/$t"
  log="logs/$t.log"
  printf '== %s: up to %s s or %s runs (%s)\n' "$t" "$SECONDS_EACH" "$RUNS_EACH" "$(date -u +%H:%M:%S)"
  cargo +nightly fuzz run --release "$t" "corpus/$t" -- \
    -max_total_time="$SECONDS_EACH" -runs="$RUNS_EACH" -rss_limit_mb=4096 \
    -print_final_stats=1 >"$log" 2>&1 || { tail -40 "$log"; echo "$t: the fuzzer stopped on a finding (above; artifacts in fuzz/artifacts/$t)" >&2; exit 1; }
  # libFuzzer's last status line and final stats: executions, edges
  # covered (cov), features (ft), corpus size.
  grep -E '^#[0-9]+' "$log" | tail -1
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log"
  cargo +nightly fuzz cmin --release "$t" "corpus/$t" >"logs/$t.cmin.log" 2>&1
  printf '%s: corpus minimized to %s inputs\n' "$t" "$(ls "corpus/$t" | wc -l)"
done
