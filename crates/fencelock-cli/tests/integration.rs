//! The command's integration tests, one module a file, in one test binary (one build and one
//! link instead of one per file): `cargo test -p fencelock-cli --test integration signals::`
//! runs one file's tests.

mod common;

mod chaos;
mod chaos_report;
mod chaos_trace;
mod demo;
mod elect;
mod observability;
mod operator;
mod permits;
mod psql;
mod recipes;
mod run;
mod schedules;
mod signals;
mod supervision;
mod tls;
mod topologies;
mod watch;
