#!/usr/bin/env bash
# Builds the fuzz targets and runs each for a bounded time: `fuzz/run.sh SECONDS [TARGET...]`.
#
# Stable Rust only: the build passes cargo-fuzz's own flags (SanitizerCoverage for libFuzzer,
# AddressSanitizer, debug assertions and overflow checks) straight to cargo, with
# RUSTC_BOOTSTRAP=1 for the one unstable flag (-Zsanitizer), so neither nightly nor cargo-fuzz
# has to be installed. With cargo-fuzz installed the same targets run as
# `RUSTC_BOOTSTRAP=1 cargo fuzz run -a TARGET` from the repository root.
#
# Environment: FUZZ_SANITIZER=address|none (default address); FUZZ_CODEGEN_UNITS (default 16,
# a fast build; cargo-fuzz uses 1, slower to build but faster to fuzz). libFuzzer's C++ runtime
# is compiled with CXXFLAGS=-O1 unless set (a third less build time than cargo's -O3).
# Each run's corpus grows in fuzz/corpus/TARGET (seeded from fuzz/seeds/TARGET) and its log is
# fuzz/artifacts/TARGET/fuzz.log. A crash stops the script with libFuzzer's exit status, prints
# the end of the log and leaves the crashing input in fuzz/artifacts/TARGET/.
set -euo pipefail
cd "$(dirname "$0")"

seconds=${1:?usage: fuzz/run.sh SECONDS [TARGET...]}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(tokenizer offsets store_decode index_roundtrip)
sanitizer=${FUZZ_SANITIZER:-address}
triple=$(rustc -vV | sed -n 's/^host: //p')

flags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
flags+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table"
flags+=" -Cllvm-args=-sanitizer-coverage-trace-compares -Cllvm-args=-simplifycfg-branch-fold-threshold=0"
flags+=" -Cllvm-args=-sanitizer-coverage-stack-depth --cfg fuzzing -Cdebug-assertions"
flags+=" -Ccodegen-units=${FUZZ_CODEGEN_UNITS:-16}"
[ "$sanitizer" = none ] || flags+=" -Zsanitizer=$sanitizer"

# --target keeps RUSTFLAGS away from build scripts and proc macros (as cargo-fuzz does)
RUSTC_BOOTSTRAP=1 RUSTFLAGS="$flags ${RUSTFLAGS:-}" CXXFLAGS="${CXXFLAGS:--O1}" \
  cargo build --locked --release --target "$triple" --config 'profile.release.debug="line-tables-only"' \
  --target-dir target/fuzz-"$sanitizer" --bins

for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  log="artifacts/$t/fuzz.log"
  echo "== fuzz $t for ${seconds}s"
  # -rss_limit_mb: nothing may allocate much more than its input (libFuzzer's default is 2048)
  status=0
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_odr_violation=0}" "target/fuzz-$sanitizer/$triple/release/$t" -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="artifacts/$t/" "corpus/$t" "seeds/$t" >"$log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$log"
    echo "fuzz target $t failed (status $status): crashing input in fuzz/artifacts/$t/"
    exit "$status"
  fi
  # one line: executions, time, coverage (edges) at start and end, corpus size, peak memory
  awk '$2 == "INITED" { c0 = $4 } $2 == "DONE" { c1 = $4; corp = $8 }
       /^Done/ { runs = $2; secs = $5 } /peak_rss_mb/ { rss = $2 }
       END { printf "   %s runs in %s s, coverage %s -> %s edges, corpus %s, peak RSS %s MB\n", runs, secs, c0, c1, corp, rss }' "$log"
done
