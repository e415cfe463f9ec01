# sluice task runner. `just bench` reproduces the experiments; `just test` runs every test.

set shell := ["bash", "-euo", "pipefail", "-c"]

default:
    @just --list

# Run every test (unit, protocol byte samples, integration against a private MariaDB).
test:
    cargo build --workspace --release --bins
    cargo test --workspace -- --test-threads 4

# Run the whole benchmark against an embedded MariaDB (installs mariadb-server with apt when missing and root).
bench *ARGS:
    cargo run --release -p loadgen -- bench {{ARGS}}

# A short benchmark (short windows, fewer levels).
bench-quick *ARGS:
    cargo run --release -p loadgen -- bench --quick {{ARGS}}

# Lint and format check.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
