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

# Lint and format check.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
