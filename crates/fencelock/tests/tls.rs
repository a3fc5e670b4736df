//! TLS (`rediss://`) against real redis-server processes with certificates made at test time:
//! a custom CA, client certificates, Redlock over TLS, and the failures (an untrusted server, a
//! missing client certificate, a plain client on a TLS port and the other way round), each a
//! clear error that comes quickly and leaves nothing held.

use crate::common;

use std::time::{Duration, Instant};

use fencelock::{Client, ClientBuilder, Error};
use fencelock_testkit::{RedisServer, TlsFiles, free_port};

use common::keys;

/// A server with a plain port (for the test's own inspection) and a TLS port, and the URL of
/// the TLS port.
fn tls_server(files: &TlsFiles, require_client_cert: bool) -> (RedisServer, String) {
    let port = free_port().unwrap_or_else(|e| panic!("no free port: {e}"));
    let args = files.server_args(port, require_client_cert);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = RedisServer::start_with_args(&args)
        .unwrap_or_else(|e| panic!("cannot start a TLS redis-server: {e}"));
    (server, format!("rediss://localhost:{port}"))
}

fn certificates() -> TlsFiles {
    TlsFiles::generate().unwrap_or_else(|e| panic!("cannot make test certificates: {e}"))
}

fn build(builder: ClientBuilder) -> Client {
    builder
        .command_timeout(Duration::from_millis(1500))
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The error of one acquire through `client`, and how long it took.
async fn failed_acquire(client: &Client, name: &str) -> (Error, Duration) {
    let started = Instant::now();
    match client
        .lock(name)
        .wait_up_to(Duration::from_secs(5))
        .acquire()
        .await
    {
        Ok(_) => panic!("{name}: acquired"),
        Err(err) => (err, started.elapsed()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_waiting_and_admin_work_over_tls_with_a_custom_ca() {
    let files = certificates();
    let (server, url) = tls_server(&files, false);
    let a = build(Client::builder(&url).tls_ca_file(files.ca()));
    let b = build(Client::builder(&url).tls_ca_pem(std::fs::read(files.ca()).unwrap()));
    let first = a.lock("tls").acquire().await.unwrap();
    // A waiter on the other client is woken by the release, over its TLS pub/sub connection.
    let waiter = tokio::spawn(async move {
        let guard = b
            .lock("tls")
            .wait_up_to(Duration::from_secs(10))
            .acquire()
            .await?;
        let fence = guard.fence();
        guard.release().await?;
        Ok::<u64, Error>(fence)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let first_fence = first.fence();
    assert_eq!(a.list("*").await.unwrap().locks.len(), 1);
    assert!(a.inspect("tls").await.unwrap().is_held());
    let released_at = Instant::now();
    assert!(first.release().await.unwrap());
    let second = waiter.await.unwrap().unwrap();
    assert!(second > first_fence, "fences grow");
    assert_eq!(keys(&server), [common::lock_subkey("tls", "fence")]);
    assert!(
        released_at.elapsed() < Duration::from_secs(2),
        "woken by the release, not by the lease"
    );
}

#[tokio::test]
async fn a_client_certificate_is_presented_when_the_server_requires_one() {
    let files = certificates();
    let (server, url) = tls_server(&files, true);
    let (cert, key) = files.client();
    let with_cert = build(
        Client::builder(&url)
            .tls_ca_file(files.ca())
            .tls_client_cert_files(&cert, &key),
    );
    let guard = with_cert.lock("mtls").acquire().await.unwrap();
    assert!(guard.release().await.unwrap());
    let pem = build(
        Client::builder(&url)
            .tls_ca_file(files.ca())
            .tls_client_cert_pem(std::fs::read(&cert).unwrap(), std::fs::read(&key).unwrap()),
    );
    let guard = pem.lock("mtls").acquire().await.unwrap();
    assert!(guard.release().await.unwrap());

    // Without one: refused at the handshake, quickly, with nothing held.
    let without = build(Client::builder(&url).tls_ca_file(files.ca()));
    let (err, took) = failed_acquire(&without, "mtls-missing").await;
    assert!(took < Duration::from_secs(4), "took {took:?}: {err}");
    assert!(matches!(err, Error::Tls { .. }), "{err:?}");
    assert!(!keys(&server).iter().any(|k| k.contains("mtls-missing")));
}

#[tokio::test]
async fn an_untrusted_server_certificate_is_a_quick_clear_error() {
    let files = certificates();
    let (server, url) = tls_server(&files, false);
    let client = build(Client::builder(&url).tls_ca_file(files.rogue_ca()));
    let (err, took) = failed_acquire(&client, "untrusted").await;
    assert!(took < Duration::from_secs(4), "took {took:?}: {err}");
    assert!(
        matches!(&err, Error::Tls { lock, .. } if lock == "untrusted"),
        "{err:?}"
    );
    assert!(err.to_string().contains("certificate"), "{err}");
    assert!(keys(&server).is_empty());
    // The system's roots do not know the test CA either.
    let system = build(Client::builder(&url));
    let (err, _) = failed_acquire(&system, "untrusted").await;
    assert!(matches!(err, Error::Tls { .. }), "{err:?}");
}

#[tokio::test]
async fn a_plain_client_on_a_tls_port_and_a_tls_client_on_a_plain_port_fail_quickly() {
    let files = certificates();
    let (server, url) = tls_server(&files, false);
    let plain_url = url.replacen("rediss://", "redis://", 1);
    let plain = build(Client::builder(&plain_url));
    let (err, took) = failed_acquire(&plain, "plain-on-tls").await;
    assert!(took < Duration::from_secs(4), "took {took:?}: {err}");
    assert!(
        matches!(&err, Error::Unreachable { hint, .. } if hint.is_some_and(|h| h.contains("rediss://"))),
        "{err:?}"
    );
    // The plain port does not answer a handshake at all: the command timeout bounds it.
    let tls_on_plain = Client::builder(&format!("rediss://localhost:{}", server.port()))
        .tls_ca_file(files.ca())
        .command_timeout(Duration::from_millis(400))
        .build()
        .unwrap();
    let (err, took) = failed_acquire(&tls_on_plain, "tls-on-plain").await;
    assert!(took < Duration::from_secs(4), "took {took:?}: {err}");
    assert!(
        matches!(&err, Error::Unreachable { hint, .. } if hint.is_some_and(|h| h.contains("does not speak TLS"))),
        "{err:?}"
    );
    assert!(keys(&server).is_empty());
}

#[tokio::test]
async fn redlock_over_tls_servers() {
    let files = certificates();
    let servers: Vec<(RedisServer, String)> = (0..3).map(|_| tls_server(&files, false)).collect();
    let urls: Vec<&str> = servers.iter().map(|(_, url)| url.as_str()).collect();
    let client = build(Client::redlock(&urls).tls_ca_file(files.ca()));
    let guard = client.lock("tls-redlock").acquire().await.unwrap();
    // The grant returns at a majority; the last instance follows.
    let since = Instant::now();
    while !servers
        .iter()
        .all(|(server, _)| keys(server).contains(&common::lock_key("tls-redlock")))
    {
        assert!(
            since.elapsed() < Duration::from_secs(5),
            "an instance never got the lock"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(guard.release().await.unwrap());
    assert!(client.wait_idle(Duration::from_secs(2)).await);
}

#[tokio::test]
async fn tls_options_are_checked_when_the_client_is_built() {
    let files = certificates();
    let err = Client::builder("redis://127.0.0.1:6379")
        .tls_ca_file(files.ca())
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("rediss://"), "{err}");
    let err = Client::builder("rediss://127.0.0.1:6379")
        .tls_ca_file("/nonexistent/ca.pem")
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config { reason } if reason.contains("/nonexistent/ca.pem")),
        "{err}"
    );
    let err = Client::builder("rediss://user:s3cret@127.0.0.1:6379")
        .tls_client_cert_pem(b"not a certificate".to_vec(), b"not a key".to_vec())
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err:?}");
    assert!(!err.to_string().contains("s3cret"), "{err}");
}
