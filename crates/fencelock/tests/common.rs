//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::time::Duration;

use fencelock::Client;
use fencelock_testkit::RedisServer;

/// A fresh server for one test.
pub fn server() -> RedisServer {
    match RedisServer::start() {
        Ok(server) => server,
        Err(e) => panic!("cannot start redis-server: {e}"),
    }
}

/// A client with a short command timeout, so that fault tests stay quick.
pub fn client(url: &str) -> Client {
    match Client::builder(url)
        .command_timeout(Duration::from_millis(500))
        .build()
    {
        Ok(client) => client,
        Err(e) => panic!("cannot build client: {e}"),
    }
}

/// Every key on the server, sorted.
pub fn keys(server: &RedisServer) -> Vec<String> {
    let mut keys = server.keys().unwrap_or_else(|e| panic!("SCAN failed: {e}"));
    keys.sort();
    keys
}
