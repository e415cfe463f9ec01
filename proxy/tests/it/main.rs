//! The proxy's integration tests: one binary, one private MariaDB (or `MYSQL_TEST_URL`),
//! sluice in-process on 127.0.0.1:0, real clients.

mod harness;

mod acceptance;
mod admin;
mod admission;
mod auth_backoff;
mod autosize;
mod backend_tls;
mod bad_input;
mod busy_poll;
mod clients;
mod connector_c;
mod connector_c_suite;
mod core;
mod drivers;
mod faults;
mod flood;
mod identity;
mod instances;
mod isolation;
mod locks;
mod pinning;
mod pipeline;
mod privileged;
mod reliability;
mod set_option;
mod tls;
mod unix_backend;
#[path = "../common/wire.rs"]
mod wire;
