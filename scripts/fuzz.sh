#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets) one after the other, one
# process each (the machine is shared), and prints one summary line per
# target: executions, coverage (cov: edges, ft: features) and crashes.
#
#   FUZZ_SECS=60 scripts/fuzz.sh                 # 60 s per target
#   FUZZ_RUNS=10000000 FUZZ_SECS=3600 scripts/fuzz.sh wire_headers
#   FUZZ_SAN=address scripts/fuzz.sh             # AddressSanitizer build
#
# Needs a nightly toolchain and cargo-fuzz (docs/fuzzing.md). New inputs go
# to fuzz/work/<target> (not checked in); the checked-in seeds in
# fuzz/corpus/<target> are read, never written. A crash (crash-*, leak-*,
# timeout-*, oom-*) leaves its input in fuzz/artifacts/<target>/ and makes
# the script exit non-zero; a slow-unit-* (an input that took over 10 s,
# on a loaded machine usually a stall of the process) is reported in the
# summary line, not counted as a crash. Only the targets named are built.
set -uo pipefail
cd "$(dirname "$0")/../fuzz"
SECS=${FUZZ_SECS:-60}
RUNS=${FUZZ_RUNS:-0}
SAN=${FUZZ_SAN:-none}
LOGS=${FUZZ_LOGS:-work/logs}
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz: needs a nightly toolchain and cargo-fuzz (docs/fuzzing.md)" >&2
    exit 2
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
mkdir -p "$LOGS"
if [ $# -eq 0 ]; then
    cargo +nightly fuzz build -O -s "$SAN" >/dev/null || exit 2
else
    for t in "${targets[@]}"; do
        cargo +nightly fuzz build -O -s "$SAN" "$t" >/dev/null || exit 2
    done
fi
status=0
for t in "${targets[@]}"; do
    mkdir -p "work/$t" "corpus/$t" "artifacts/$t"
    before=$(ls "artifacts/$t")
    args=(-max_total_time="$SECS" -close_fd_mask=3 -print_final_stats=1 -rss_limit_mb=4096)
    if [ "$RUNS" != 0 ]; then
        args+=(-runs="$RUNS") # whichever comes first: RUNS or SECS
    fi
    log="$LOGS/$t.log"
    start=$(date +%s)
    cargo +nightly fuzz run -O -s "$SAN" "$t" "work/$t" "corpus/$t" -- "${args[@]}" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' <<<"$last" | tail -1)
    ft=$(grep -o 'ft: [0-9]*' <<<"$last" | tail -1)
    # Artifacts this run left (earlier runs' stay where they are).
    new=$(comm -13 <(echo "$before") <(ls "artifacts/$t"))
    crashes=0
    slow=0
    if [ -n "$new" ]; then
        crashes=$(grep -cv '^slow-unit-' <<<"$new")
        slow=$(grep -c '^slow-unit-' <<<"$new")
    fi
    printf '%-14s execs %-10s %-10s %-10s %5ss crashes %s slow %s rc %s\n' \
        "$t" "${runs:-?}" "${cov:-cov: ?}" "${ft:-ft: ?}" "$secs" "$crashes" "$slow" "$rc"
    if [ "$rc" != 0 ] || [ "$crashes" != 0 ]; then
        status=1
    fi
done
exit $status
