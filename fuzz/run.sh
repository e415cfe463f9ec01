#!/usr/bin/env bash
# Runs every cargo-fuzz target (or the ones named after $1) for $1 seconds (default 600)
# each, one after the other, and prints a table of exec counts and results. Logs: fuzz/logs/<target>.log; a crash leaves its
# input under fuzz/artifacts/<target>/. Needs cargo-fuzz (`cargo install cargo-fuzz --locked`);
# RUSTC_BOOTSTRAP lets the stable toolchain accept the sanitizer flags.
set -uo pipefail
secs=${1:-600}
shift || true
cd "$(dirname "$0")"
export RUSTC_BOOTSTRAP=1 CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
mkdir -p logs
cargo fuzz build || exit 1
summary=()
status=0
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo fuzz list)
for target in "${targets[@]}"; do
    log=logs/$target.log
    # Seeds are committed as corpus/<target>/seed-*; inputs the fuzzer adds stay untracked.
    cargo fuzz run "$target" -- -max_total_time="$secs" -print_final_stats=1 >"$log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    if [ "$rc" -eq 0 ]; then result="no crash"; else result="CRASH (exit $rc, see $log)"; status=1; fi
    summary+=("$(printf '%-10s %14s %10s/s  %s' "$target" "${execs:-?}" "${rate:-?}" "$result")")
    echo "${summary[-1]}"
done
echo
echo "target              execs   execs/s  result (${secs}s each)"
printf '%s\n' "${summary[@]}"
exit $status
