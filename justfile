# sluice task runner. `just bench` reproduces the experiments; `just test` runs every test.

set shell := ["bash", "-euo", "pipefail", "-c"]

default:
    @just --list

# First installs what the tests use and is missing (scripts/install-test-deps.sh: MariaDB,
# sysbench, the PHP/Java/Python/Node drivers; apt-get as root, saying so first), as .ci/run does.
# The style checks after the tests: no function over 120 lines (scripts/fn-lengths.py), no issue
# number in the sources (scripts/no-issue-numbers.py), no import cycle (just cycles), no file
# over 600 lines (just sizes).
# Every test (unit, protocol byte samples, integration against a private MariaDB), then the style checks.
test:
    scripts/install-test-deps.sh
    cargo test --workspace -- --test-threads 4
    python3 scripts/fn-lengths.py proxy/src loadgen/src dbkit/src
    python3 scripts/no-issue-numbers.py proxy/src loadgen/src dbkit/src
    just cycles
    just sizes

# Installs mariadb-server with apt-get first when no server exists and you are root on
# Debian/Ubuntu. Flags and env tunables: `cargo run --release -p loadgen -- --help`,
# loadgen/README.md. loadgen prints its plan at start.
# Experiments A, B, C (a connection per client vs a bounded pool), the open loop and the proxy rows (planned 6 min on 2 cores).
bench *ARGS:
    loadgen/scripts/ensure-server.sh {{ARGS}}
    cargo run --release -p loadgen -- bench {{ARGS}}

# Also installs haproxy, strace, valgrind and sysbench when missing (overhead, sysbench), and
# builds the release sluice binary both measure. COST_COUNTS=1 adds overhead's callgrind counts.
# `just bench` plus experiments S, D, E, F, overhead and sysbench (planned 52 min on 2 cores).
bench-all *ARGS:
    loadgen/scripts/ensure-server.sh {{ARGS}}
    scripts/install-test-deps.sh --overhead
    scripts/install-test-deps.sh --sysbench
    cargo build --release -p sluice -p loadgen
    target_dir="${CARGO_TARGET_DIR:-target}"; "$target_dir/release/loadgen" bench --all {{ARGS}}

# Installs haproxy, strace and valgrind when missing; builds the release sluice and loadgen
# together, so the sluice measured is the one in this tree. --cost-counts (COST_COUNTS=1) adds
# instructions per query under valgrind (~2 min); --overhead-rounds N repeats the sequence.
# Relay cost: direct, the tokio relay, HAProxy and sluice P=4/64 side by side (~2.5 min).
overhead *ARGS:
    loadgen/scripts/ensure-server.sh {{ARGS}}
    scripts/install-test-deps.sh --overhead
    cargo build --release -p sluice -p loadgen
    target_dir="${CARGO_TARGET_DIR:-target}"; "$target_dir/release/loadgen" overhead {{ARGS}}

# Installs sysbench and haproxy when missing; builds the release sluice and loadgen together,
# so the sluice measured is the one in this tree (its defaults, --pool-size auto). Tunables:
# --sysbench-rounds/-threads/-workloads/-time/-warmup (loadgen --help), e.g. a smoke run:
# `just sysbench --sysbench-rounds 1 --sysbench-threads 16,1024 --label sysbench-smoke`.
# sysbench's OLTP workloads at 16-1024 threads: direct, HAProxy, sluice (planned 32 min on 2 cores).
sysbench *ARGS:
    loadgen/scripts/ensure-server.sh {{ARGS}}
    scripts/install-test-deps.sh --sysbench
    cargo build --release -p sluice -p loadgen
    target_dir="${CARGO_TARGET_DIR:-target}"; "$target_dir/release/loadgen" sysbench {{ARGS}}

# A short benchmark (short windows, fewer levels; planned under 2 min).
bench-quick *ARGS:
    loadgen/scripts/ensure-server.sh {{ARGS}}
    cargo run --release -p loadgen -- bench --quick {{ARGS}}

# Rewrite a results folder's summary.txt and plots from its CSVs, e.g. `just report results/<run>`.
report DIR:
    cargo run --release -p loadgen -- report {{DIR}}

# Import cycles between a crate's modules; the rule is in scripts/module-cycles.py (no module
# may name one that names it back). With no arguments: both crates, proxy and loadgen, in both
# modes (`--allow-parent`: submodules, a child may use its parent; `--depth=1`: top-level
# modules). Or pass crate dirs and flags, e.g. `just cycles proxy --depth=1`.
cycles *ARGS:
    #!/usr/bin/env bash
    set -uo pipefail
    if [ -n "{{ARGS}}" ]; then exec python3 scripts/module-cycles.py {{ARGS}}; fi
    rc=0
    python3 scripts/module-cycles.py proxy loadgen --allow-parent || rc=1
    python3 scripts/module-cycles.py proxy loadgen --depth=1 || rc=1
    exit $rc

# Lint and format check.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# Needs `cargo install cargo-fuzz --locked`; logs in fuzz/logs, crashes in fuzz/artifacts.
# Run every cargo-fuzz target (fuzz/) for FUZZ_SECS seconds each (default 600); print exec counts.
fuzz:
    fuzz/run.sh ${FUZZ_SECS:-600}

# Not part of `just test`; writes results/<stamp>-soak/{soak.csv,soak.svg,summary.txt}.
# Soak: 10,000 idle + 512 active clients through a release sluice for 30 min (--short: 10).
soak *ARGS:
    loadgen/scripts/ensure-server.sh {{ARGS}}
    cargo build --release -p sluice -p loadgen
    target_dir="${CARGO_TARGET_DIR:-target}"; "$target_dir/release/loadgen" soak {{ARGS}}

# No Rust file over 600 lines before its tests (the style rule; scripts/file-sizes.py).
sizes:
    python3 scripts/file-sizes.py proxy/src loadgen/src dbkit/src
