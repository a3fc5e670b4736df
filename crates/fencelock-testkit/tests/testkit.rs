//! Tests of the testkit itself: each checks one behaviour the fencelock tests
//! rely on, against a real redis-server.

use std::error::Error;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use fencelock_testkit::{
    CHILD_ENV, ClockedServer, FaultProxy, RedisCluster, RedisServer, free_port, pid_alive,
    redis_server_in_path, require_test_child, spawn_test_child,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

type TestResult = Result<(), Box<dyn Error>>;

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
const PONG: &[u8] = b"+PONG\r\n";

fn as_string(v: redis::Value) -> Result<String, Box<dyn Error>> {
    Ok(redis::from_redis_value::<String>(v)?)
}

/// A `redis-server` process with this PID is gone (absent or another program).
fn server_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => !stat.contains("(redis-server)"),
    }
}

fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}

#[test]
fn free_port_is_bindable() -> TestResult {
    let port = free_port()?;
    assert_ne!(port, 0);
    let _listener = std::net::TcpListener::bind(("127.0.0.1", port))?;
    Ok(())
}

#[test]
fn two_servers_are_independent_and_drop_kills() -> TestResult {
    let a = RedisServer::start()?;
    let b = RedisServer::start()?;
    assert_ne!(a.port(), b.port());
    assert_ne!(a.pid(), b.pid());
    assert_eq!(a.url(), format!("redis://127.0.0.1:{}", a.port()));
    assert_eq!(a.addr().port(), a.port());
    assert!(a.is_running() && b.is_running());
    for s in [&a, &b] {
        assert_eq!(as_string(s.cmd(&["PING"])?)?, "PONG");
    }
    a.cmd(&["SET", "a", "1"])?;
    assert_eq!(as_string(a.cmd(&["GET", "a"])?)?, "1");
    assert_eq!(b.cmd(&["GET", "a"])?, redis::Value::Nil);
    assert_eq!(a.keys()?, vec!["a".to_string()]);
    assert!(b.keys()?.is_empty());

    let (addr, pid) = (a.addr(), a.pid());
    drop(a);
    assert!(!pid_alive(pid), "pid {pid} still alive after drop");
    assert!(server_gone(pid), "redis-server pid {pid} still in /proc");
    let refused = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
    assert!(refused.is_err(), "port {} still accepts", addr.port());
    // The other server is unaffected.
    assert_eq!(as_string(b.cmd(&["PING"])?)?, "PONG");
    Ok(())
}

#[test]
fn start_with_args_are_applied() -> TestResult {
    let s = RedisServer::start_with_args(&["--maxmemory", "1mb"])?;
    let reply = s.cmd(&["CONFIG", "GET", "maxmemory"])?;
    let pair: Vec<String> = redis::from_redis_value(reply)?;
    assert_eq!(pair, vec!["maxmemory".to_string(), "1048576".to_string()]);
    // No persistence configured.
    let save: Vec<String> = redis::from_redis_value(s.cmd(&["CONFIG", "GET", "save"])?)?;
    assert_eq!(save, vec!["save".to_string(), String::new()]);
    assert!(s.log_tail(50).contains("Ready to accept connections"));
    Ok(())
}

#[test]
fn start_binary_runs_the_given_program_with_its_args() -> TestResult {
    let program = redis_server_in_path().ok_or("no redis-server in PATH")?;
    let s = RedisServer::start_binary(&program, &["--maxmemory", "2mb"])?;
    let pair: Vec<String> = redis::from_redis_value(s.cmd(&["CONFIG", "GET", "maxmemory"])?)?;
    assert_eq!(pair, vec!["maxmemory".to_string(), "2097152".to_string()]);
    let info = as_string(s.cmd(&["INFO", "server"])?)?;
    assert!(info.contains(&format!("process_id:{}", s.pid())), "{info}");
    Ok(())
}

#[test]
fn cmd_reports_server_errors() -> TestResult {
    let s = RedisServer::start()?;
    assert!(s.cmd(&["NOSUCHCOMMAND"]).is_err());
    assert!(s.cmd(&[]).is_err());
    Ok(())
}

#[test]
fn pause_and_resume() -> TestResult {
    let s = RedisServer::start()?;
    let client = redis::Client::open(s.url())?;
    let mut con = client.get_connection_with_timeout(Duration::from_secs(5))?;
    con.set_read_timeout(Some(Duration::from_millis(300)))?;
    let pong: String = redis::cmd("PING").query(&mut con)?;
    assert_eq!(pong, "PONG");

    s.pause()?;
    assert!(s.is_running(), "a paused server counts as running");
    let started = Instant::now();
    let err = match redis::cmd("PING").query::<String>(&mut con) {
        Ok(v) => return Err(format!("PING answered while paused: {v}").into()),
        Err(e) => e,
    };
    assert!(err.is_timeout(), "expected a timeout, got {err}");
    assert!(started.elapsed() >= Duration::from_millis(250));

    s.resume()?;
    assert_eq!(as_string(s.cmd(&["PING"])?)?, "PONG");
    Ok(())
}

#[test]
fn kill_is_idempotent_and_drop_kills_paused_server() -> TestResult {
    let mut s = RedisServer::start()?;
    let pid = s.pid();
    s.kill()?;
    assert!(!s.is_running());
    assert!(server_gone(pid));
    s.kill()?;
    assert!(s.pause().is_err());
    assert!(s.cmd(&["PING"]).is_err());

    let paused = RedisServer::start()?;
    let pid = paused.pid();
    paused.pause()?;
    drop(paused);
    assert!(server_gone(pid), "paused server {pid} survived drop");
    Ok(())
}

#[test]
fn restart_keeps_port_and_loses_data() -> TestResult {
    let mut s = RedisServer::start()?;
    let (port, pid) = (s.port(), s.pid());
    s.cmd(&["SET", "before", "1"])?;
    s.cmd(&["SAVE"])?; // even an explicit snapshot must not survive
    s.restart()?;
    assert_eq!(s.port(), port);
    assert_ne!(s.pid(), pid);
    assert!(server_gone(pid));
    assert!(s.is_running());
    assert_eq!(s.cmd(&["GET", "before"])?, redis::Value::Nil);
    assert!(s.keys()?.is_empty());

    // Restart after a kill and while paused.
    s.kill()?;
    s.restart()?;
    assert_eq!(as_string(s.cmd(&["PING"])?)?, "PONG");
    s.pause()?;
    s.restart()?;
    assert_eq!(s.port(), port);
    assert_eq!(as_string(s.cmd(&["PING"])?)?, "PONG");
    Ok(())
}

#[test]
fn flushes_and_keys() -> TestResult {
    let s = RedisServer::start()?;
    s.cmd(&["SET", "k2", "v"])?;
    s.cmd(&["SET", "k1", "v"])?;
    assert_eq!(s.keys()?, vec!["k1".to_string(), "k2".to_string()]);
    let sha = as_string(s.cmd(&["SCRIPT", "LOAD", "return 1"])?)?;
    s.script_flush()?;
    let exists: Vec<i64> = redis::from_redis_value(s.cmd(&["SCRIPT", "EXISTS", &sha])?)?;
    assert_eq!(exists, vec![0]);
    s.flushall()?;
    assert!(s.keys()?.is_empty());
    Ok(())
}

#[test]
fn client_pause_holds_commands() -> TestResult {
    let s = RedisServer::start()?;
    s.client_pause(Duration::from_millis(400))?;
    let started = Instant::now();
    assert_eq!(s.cmd(&["GET", "x"])?, redis::Value::Nil);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "GET was not held: {:?}",
        started.elapsed()
    );
    Ok(())
}

#[test]
fn debug_sleep_blocks_server_not_caller() -> TestResult {
    let s = RedisServer::start()?;
    let started = Instant::now();
    let sleeper = s.debug_sleep(Duration::from_millis(500));
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "caller was blocked"
    );

    let client = redis::Client::open(s.url())?;
    // Connecting itself needs a reply (CLIENT SETINFO), so it must time out.
    let probe = client.get_connection_with_timeout(Duration::from_millis(200));
    assert!(probe.is_err(), "server answered during DEBUG SLEEP");

    sleeper
        .join()
        .map_err(|_| "debug_sleep thread panicked")??;
    assert!(started.elapsed() >= Duration::from_millis(450));
    assert_eq!(as_string(s.cmd(&["PING"])?)?, "PONG");
    Ok(())
}

#[test]
fn drop_kills_server_when_test_panics() -> TestResult {
    let pid = std::sync::Mutex::new(None);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let s = match RedisServer::start() {
            Ok(s) => s,
            Err(e) => return Err::<(), _>(e),
        };
        if let Ok(mut slot) = pid.lock() {
            *slot = Some(s.pid());
        }
        panic!("deliberate panic with a running server");
    }));
    assert!(result.is_err(), "the closure should have panicked");
    let pid = pid
        .lock()
        .map_err(|_| "poisoned")?
        .ok_or("server did not start")?;
    assert!(!pid_alive(pid), "server {pid} survived the panic");
    assert!(server_gone(pid));
    Ok(())
}

// ---------------------------------------------------------------- proxy

async fn ping(stream: &mut tokio::net::TcpStream) -> std::io::Result<Vec<u8>> {
    stream.write_all(PING).await?;
    let mut buf = vec![0u8; PONG.len()];
    stream.read_exact(&mut buf).await?;
    Ok(buf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_forwards_and_adds_latency() -> TestResult {
    let server = RedisServer::start()?;
    let proxy = FaultProxy::start(server.addr()).await?;
    assert_eq!(proxy.url(), format!("redis://{}", proxy.addr()));

    let client = redis::Client::open(proxy.url())?;
    let mut con = client.get_multiplexed_async_connection().await?;
    redis::cmd("SET")
        .arg("via-proxy")
        .arg("yes")
        .query_async::<()>(&mut con)
        .await?;
    assert_eq!(as_string(server.cmd(&["GET", "via-proxy"])?)?, "yes");
    assert_eq!(proxy.connections(), 1);

    let mut raw = tokio::net::TcpStream::connect(proxy.addr()).await?;
    let started = Instant::now();
    assert_eq!(ping(&mut raw).await?, PONG);
    let fast = started.elapsed();

    proxy.set_latency(Duration::from_millis(50));
    let started = Instant::now();
    assert_eq!(ping(&mut raw).await?, PONG);
    let slow = started.elapsed();
    assert!(
        slow >= Duration::from_millis(100),
        "round trip {slow:?} (without latency {fast:?})"
    );

    proxy.set_latency(Duration::ZERO);
    assert_eq!(ping(&mut raw).await?, PONG);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_latency_does_not_serialise() -> TestResult {
    let server = RedisServer::start()?;
    let proxy = FaultProxy::start(server.addr()).await?;
    proxy.set_latency(Duration::from_millis(100));
    let mut raw = tokio::net::TcpStream::connect(proxy.addr()).await?;
    // Ten pipelined PINGs, written one by one: with a queue they all arrive
    // ~100 ms later, not 10 * 100 ms.
    let started = Instant::now();
    for _ in 0..10 {
        raw.write_all(PING).await?;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut buf = vec![0u8; PONG.len() * 10];
    raw.read_exact(&mut buf).await?;
    assert_eq!(buf, PONG.repeat(10));
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(200), "took {took:?}");
    assert!(
        took < Duration::from_millis(900),
        "latency serialised: {took:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_cut_all_closes_connections() -> TestResult {
    let server = RedisServer::start()?;
    let proxy = FaultProxy::start(server.addr()).await?;
    let mut raw = tokio::net::TcpStream::connect(proxy.addr()).await?;
    assert_eq!(ping(&mut raw).await?, PONG);
    assert_eq!(proxy.connections(), 1);

    proxy.cut_all();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(2), raw.read(&mut buf)).await?;
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "connection still open: {read:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(2);
    while proxy.connections() != 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(proxy.connections(), 0);

    // New connections still work.
    let mut again = tokio::net::TcpStream::connect(proxy.addr()).await?;
    assert_eq!(ping(&mut again).await?, PONG);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_blackhole_holds_then_delivers() -> TestResult {
    let server = RedisServer::start()?;
    let proxy = FaultProxy::start(server.addr()).await?;
    let mut raw = tokio::net::TcpStream::connect(proxy.addr()).await?;
    assert_eq!(ping(&mut raw).await?, PONG);

    proxy.set_blackhole(true);
    raw.write_all(PING).await?;
    let mut buf = vec![0u8; PONG.len()];
    let held = tokio::time::timeout(Duration::from_millis(300), raw.read_exact(&mut buf)).await;
    assert!(held.is_err(), "request answered through the black hole");
    assert_eq!(
        proxy.connections(),
        1,
        "black hole must keep the connection"
    );

    // A new connection is accepted but gets no reply either.
    let mut fresh = tokio::net::TcpStream::connect(proxy.addr()).await?;
    let held = tokio::time::timeout(Duration::from_millis(200), ping(&mut fresh)).await;
    assert!(
        held.is_err(),
        "new connection answered through the black hole"
    );

    // Off: the held request is delivered and answered.
    proxy.set_blackhole(false);
    tokio::time::timeout(Duration::from_secs(2), raw.read_exact(&mut buf)).await??;
    assert_eq!(buf, PONG);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_refusing() -> TestResult {
    let server = RedisServer::start()?;
    let proxy = FaultProxy::start(server.addr()).await?;
    let mut existing = tokio::net::TcpStream::connect(proxy.addr()).await?;
    assert_eq!(ping(&mut existing).await?, PONG);

    proxy.set_refusing(true);
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(2), existing.read(&mut buf)).await?;
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "existing connection not cut: {read:?}"
    );

    let client = redis::Client::open(proxy.url())?;
    let refused = tokio::time::timeout(
        Duration::from_secs(2),
        client.get_multiplexed_async_connection(),
    )
    .await?;
    assert!(
        refused.is_err(),
        "connection through a refusing proxy worked"
    );

    proxy.set_refusing(false);
    let mut con = client.get_multiplexed_async_connection().await?;
    let pong: String = redis::cmd("PING").query_async(&mut con).await?;
    assert_eq!(pong, "PONG");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_drop_closes_connections() -> TestResult {
    let server = RedisServer::start()?;
    let proxy = FaultProxy::start(server.addr()).await?;
    let addr = proxy.addr();
    let mut raw = tokio::net::TcpStream::connect(addr).await?;
    assert_eq!(ping(&mut raw).await?, PONG);
    drop(proxy);
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(2), raw.read(&mut buf)).await?;
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "connection survived drop: {read:?}"
    );
    // The listener is gone too (give the aborted task a moment).
    let gone = wait_until(Duration::from_secs(2), || {
        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err()
    });
    assert!(gone, "proxy still listening after drop");
    Ok(())
}

#[tokio::test]
async fn proxy_rejects_non_loopback_upstream() {
    let res = FaultProxy::start("192.0.2.1:6379".parse().unwrap_or_else(|_| unreachable!())).await;
    assert!(matches!(res, Err(e) if e.kind() == ErrorKind::InvalidInput));
}

// ------------------------------------------------------------ test child

/// Child role for `spawn_test_child_reads_output`.
#[test]
#[ignore = "child role: run by spawn_test_child"]
fn child_role_hello() {
    require_test_child();
    assert_eq!(std::env::var("TESTKIT_CHILD").as_deref(), Ok("1"));
    println!("HELLO 42");
}

#[test]
fn spawn_test_child_reads_output() -> TestResult {
    let mut child = spawn_test_child("child_role_hello", &[("TESTKIT_CHILD", "1")])?;
    let line = child.wait_for_line("HELLO", Duration::from_secs(30))?;
    assert_eq!(line, "HELLO 42");
    let status = child
        .wait_timeout(Duration::from_secs(30))?
        .ok_or("child did not exit")?;
    assert!(status.success(), "child failed: {status}");
    // Everything has been read once the child is gone.
    loop {
        match child.read_line_timeout(Duration::from_secs(5)) {
            Ok(Some(_)) => continue,
            Ok(None) => return Err("stdout not closed after exit".into()),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
                break;
            }
        }
    }
    Ok(())
}

/// Runs this test binary directly (not through `spawn_test_child`) with `args`; the child
/// environment variable is set only when `as_child` is true. Returns the exit status and
/// everything the run wrote (stdout, then stderr).
fn run_self(
    args: &[&str],
    as_child: bool,
) -> Result<(std::process::ExitStatus, String), Box<dyn Error>> {
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command
        .args(args)
        .env_remove(CHILD_ENV)
        .env("TESTKIT_CHILD", "1")
        .stdin(std::process::Stdio::null());
    if as_child {
        command.env(CHILD_ENV, "child_role_hello");
    }
    let output = command.output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((output.status, text))
}

/// A child role is `#[ignore]`d: a run that names it without `--include-ignored` (as a normal
/// run, or `spawn_test_child` before it passed that flag) counts it as ignored and runs
/// nothing; and run on its own with `--include-ignored` (`cargo test -- --ignored`), it fails
/// instead of passing as a no-op.
#[test]
fn a_child_role_is_ignored_in_a_normal_run_and_fails_when_run_on_its_own() -> TestResult {
    let (status, text) = run_self(&["child_role_hello", "--exact", "--nocapture"], true)?;
    assert!(status.success(), "{status}: {text}");
    assert!(text.contains("1 ignored"), "{text}");
    assert!(
        !text.contains("HELLO 42"),
        "an ignored child role ran: {text}"
    );

    let args = [
        "child_role_hello",
        "--exact",
        "--include-ignored",
        "--nocapture",
    ];
    let (status, text) = run_self(&args, false)?;
    assert!(!status.success(), "a child role passed on its own: {text}");
    assert!(text.contains("this is a child role"), "{text}");
    assert!(!text.contains("HELLO 42"), "{text}");

    // The same run as a child (what spawn_test_child does) passes and does its work.
    let (status, text) = run_self(&args, true)?;
    assert!(status.success(), "{status}: {text}");
    assert!(text.contains("HELLO 42"), "{text}");
    Ok(())
}

/// Child role: start a redis-server, report its PID, then wait to be killed.
#[test]
#[ignore = "child role: run by spawn_test_child"]
fn child_role_server_holder() -> TestResult {
    require_test_child();
    assert_eq!(std::env::var("TESTKIT_CHILD").as_deref(), Ok("holder"));
    let server = RedisServer::start()?;
    println!("SERVER {}", server.pid());
    std::thread::sleep(Duration::from_secs(60));
    Ok(())
}

#[test]
fn sigkilled_test_process_leaves_no_server() -> TestResult {
    let mut child = spawn_test_child("child_role_server_holder", &[("TESTKIT_CHILD", "holder")])?;
    let line = child.wait_for_line("SERVER ", Duration::from_secs(30))?;
    let pid: u32 = line.trim_start_matches("SERVER ").parse()?;
    assert!(pid_alive(pid));

    child.pause()?;
    assert!(
        pid_alive(pid),
        "pausing the child must not affect its server"
    );
    child.resume()?;

    let child_pid = child.pid();
    let status = child.kill()?; // SIGKILL: no destructors run in the child
    assert!(!status.success());
    assert!(!pid_alive(child_pid));
    assert!(
        wait_until(Duration::from_secs(5), || server_gone(pid)),
        "redis-server {pid} outlived its SIGKILLed test process"
    );
    child.kill()?; // idempotent
    assert!(child.pause().is_err());
    Ok(())
}

#[test]
fn drop_of_child_guard_kills_child() -> TestResult {
    let mut child = spawn_test_child("child_role_server_holder", &[("TESTKIT_CHILD", "holder")])?;
    // Running for sure (a child that had already exited would pass this test for nothing).
    child.wait_for_line("SERVER ", Duration::from_secs(30))?;
    let pid = child.pid();
    assert!(pid_alive(pid));
    drop(child);
    assert!(!pid_alive(pid));
    Ok(())
}

// ------------------------------------------------------------ cluster

#[test]
fn a_cluster_forms_serves_every_slot_and_fails_over_to_a_replica() -> TestResult {
    let cluster = RedisCluster::start(3, 1)?;
    assert_eq!(cluster.nodes.len(), 6);
    // Keys of different slots land on their own masters; one lock's keys share a slot.
    let key = "fencelock:{failover}";
    let master = cluster.master_of(key)?;
    assert_eq!(
        cluster.master_of("fencelock:{failover}:fence")?.port(),
        master.port()
    );
    master.cmd(&["SET", key, "v"])?;
    let m = cluster
        .masters()
        .iter()
        .position(|n| n.port() == master.port())
        .ok_or("the key's master is not one of the masters")?;
    let replica = &cluster.nodes[3 + m];
    // Let the write reach the replica, then promote it.
    master.cmd(&["WAIT", "1", "2000"])?;
    cluster.failover(replica, false)?;
    assert_eq!(cluster.master_of(key)?.port(), replica.port());
    assert_eq!(
        replica.cmd(&["GET", key])?,
        redis::Value::BulkString(b"v".to_vec())
    );
    Ok(())
}

/// A clocked server's time is the one set, to the millisecond, standing still in between: a
/// key lasts exactly its lease of that clock (`PTTL` 0 in its last millisecond), and the
/// clock goes back as readily.
#[test]
fn a_clocked_server_keeps_the_time_it_is_set_to() -> TestResult {
    let start = 1_767_225_600_250;
    let mut server = ClockedServer::start(start)?;
    assert_eq!(server.server_ms()?, start);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(server.server_ms()?, start, "the clock moved on its own");
    server.cmd(&["SET", "k", "v", "PX", "5"])?;
    server.advance(Duration::from_millis(5))?;
    assert_eq!(server.now_ms(), start + 5);
    assert_eq!(server.server_ms()?, start + 5);
    assert_eq!(
        redis::from_redis_value::<i64>(server.cmd(&["PTTL", "k"])?)?,
        0
    );
    server.advance(Duration::from_millis(1))?;
    assert_eq!(
        redis::from_redis_value::<i64>(server.cmd(&["PTTL", "k"])?)?,
        -2
    );
    server.set(start - 60_000)?;
    assert_eq!(server.server_ms()?, start - 60_000);
    Ok(())
}
