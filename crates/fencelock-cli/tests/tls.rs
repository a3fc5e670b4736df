//! `fencelock` over TLS (`rediss://`) against a real TLS redis-server that requires client
//! certificates: the TLS options as flags and as environment variables, and each failure a
//! clear message with exit 69 (2 for a usage error), nothing held.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use crate::common;

use common::*;
use fencelock_testkit::{RedisServer, TlsFiles, free_port};

fn tls_server(files: &TlsFiles) -> (RedisServer, String) {
    let port = free_port().unwrap();
    let args = files.server_args(port, true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = RedisServer::start_with_args(&args).expect("a TLS redis-server");
    (server, format!("rediss://localhost:{port}"))
}

fn text(path: std::path::PathBuf) -> String {
    path.to_string_lossy().into_owned()
}

#[test]
fn run_and_status_over_tls_with_flags_and_environment() {
    let files = TlsFiles::generate().expect("test certificates (openssl)");
    let (server, url) = tls_server(&files);
    let (cert, key) = files.client();
    let (ca, cert, key) = (text(files.ca()), text(cert), text(key));
    let ran = run(&[
        "run",
        "--url",
        &url,
        "--tls-ca",
        &ca,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "tls-job",
        "--",
        "sh",
        "-c",
        "test -n \"$FENCELOCK_FENCE\"",
    ]);
    assert_eq!(ran.code, Some(0), "{}", ran.explain());
    let mut status = fencelock(&["status", "--url", &url, "--json", "tls-job"]);
    status
        .env("FENCELOCK_TLS_CA", &ca)
        .env("FENCELOCK_TLS_CERT", &cert)
        .env("FENCELOCK_TLS_KEY", &key);
    let status = Running::start(status).finish();
    assert_eq!(status.code, Some(0), "{}", status.explain());
    assert!(
        status.stdout.contains("\"held\":false") && status.stdout.contains("\"last_fence\":1"),
        "{}",
        status.explain()
    );
    assert_eq!(keys_of(&server), ["fencelock:{tls-job}:fence"]);
}

#[test]
fn tls_failures_exit_69_with_the_cause_and_hold_nothing() {
    let files = TlsFiles::generate().expect("test certificates (openssl)");
    let (server, url) = tls_server(&files);
    let (cert, key) = files.client();
    let (ca, rogue, cert, key) = (
        text(files.ca()),
        text(files.rogue_ca()),
        text(cert),
        text(key),
    );
    let job = ["--", "true"];
    let cases: [(&str, Vec<&str>, &str); 3] = [
        (
            "untrusted server certificate",
            vec!["--tls-ca", &rogue, "--tls-cert", &cert, "--tls-key", &key],
            "certificate",
        ),
        ("no client certificate", vec!["--tls-ca", &ca], "TLS"),
        ("plain client on the TLS port", vec![], "rediss://"),
    ];
    for (case, flags, expected) in cases {
        let target = if case.starts_with("plain") {
            url.replacen("rediss://", "redis://", 1)
        } else {
            url.clone()
        };
        let mut args = vec!["run", "--url", &target];
        args.extend(flags.iter().copied());
        args.push("tls-fail");
        args.extend(job);
        let failed = run(&args);
        assert_eq!(failed.code, Some(69), "{case}: {}", failed.explain());
        assert!(
            failed.stderr.contains(expected) && failed.stderr.starts_with("fencelock:"),
            "{case}: {}",
            failed.explain()
        );
        assert!(
            failed.elapsed < std::time::Duration::from_secs(10),
            "{case}: {}",
            failed.explain()
        );
    }
    // A client certificate without its key is a usage error.
    let usage = run(&["status", "--url", &url, "--tls-cert", &cert, "x"]);
    assert_eq!(usage.code, Some(2), "{}", usage.explain());
    assert!(keys_of(&server).is_empty());
}

/// The keys on `server`, read on its plain port.
fn keys_of(server: &RedisServer) -> Vec<String> {
    let mut keys = server.keys().unwrap();
    keys.sort();
    keys
}
