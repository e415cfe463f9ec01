//! The proxy's integration tests: one binary, one private MariaDB (or `MYSQL_TEST_URL`),
//! sluice in-process on 127.0.0.1:0, real clients.

mod harness;

mod acceptance;
mod accounts;
mod accounts_hosts;
mod accounts_suite;
mod admin;
mod admission;
mod audit;
mod auth_backoff;
mod autosize;
mod backend_tls;
mod bad_input;
mod busy_poll;
mod clients;
mod connector_c;
mod connector_c_suite;
mod core;
mod diagnostics;
mod disconnects;
mod drivers;
mod faults;
mod flood;
mod globals;
mod holders;
mod identity;
mod instances;
mod isolation;
mod kills;
mod lock_owner;
mod locks;
mod logins;
mod parses;
mod pinning;
mod pipeline;
mod privileged;
mod reference;
mod reliability;
mod set_option;
mod stalls;
mod steer;
mod steer_path;
mod tls;
mod trackers;
mod unix_backend;
mod values;
#[path = "../common/wire.rs"]
mod wire;
