# sluice task runner. `just bench` reproduces the experiments; `just test` runs every test.

set shell := ["bash", "-euo", "pipefail", "-c"]

default:
    @just --list

# Run every test (unit, protocol byte samples, integration against a private MariaDB).
test:
    cargo test --workspace -- --test-threads 4

# Run the whole benchmark (about 8 min on 2 cores) against an embedded MariaDB; installs
# mariadb-server with apt-get first when no server exists and you are root on Debian/Ubuntu.
# Flags and env tunables: `cargo run --release -p loadgen -- --help`, loadgen/README.md.
bench *ARGS:
    loadgen/scripts/ensure-server.sh {{ARGS}}
    cargo run --release -p loadgen -- bench {{ARGS}}

# A short benchmark (short windows, fewer levels; about 90 s).
bench-quick *ARGS:
    loadgen/scripts/ensure-server.sh {{ARGS}}
    cargo run --release -p loadgen -- bench --quick {{ARGS}}

# Import cycles between a crate's modules (default: loadgen). Pass crate dirs and flags, e.g.
# `just cycles proxy --depth=1`; see scripts/module-cycles.py for the rule.
cycles *ARGS="loadgen":
    python3 scripts/module-cycles.py {{ARGS}}

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
