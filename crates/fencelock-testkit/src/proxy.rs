//! A user-space TCP proxy for latency, black holes and cut connections.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Timeout for connecting to the upstream.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// State shared by the proxy handle, the accept loop and every connection.
struct Shared {
    latency_nanos: AtomicU64,
    refusing: AtomicBool,
    /// `true` while the black hole is on.
    blackhole: watch::Sender<bool>,
    /// Bumped to close every current connection (cut, refusing, shutdown).
    epoch: watch::Sender<u64>,
    connections: AtomicUsize,
}

impl Shared {
    fn latency(&self) -> Duration {
        Duration::from_nanos(self.latency_nanos.load(Ordering::Relaxed))
    }

    fn cut_all(&self) {
        self.epoch.send_modify(|e| *e = e.wrapping_add(1));
    }
}

/// Counts a connection as open while alive.
struct ConnCount(Arc<Shared>);

impl ConnCount {
    fn new(shared: Arc<Shared>) -> Self {
        shared.connections.fetch_add(1, Ordering::SeqCst);
        ConnCount(shared)
    }
}

impl Drop for ConnCount {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A user-space TCP proxy (tokio) on `127.0.0.1:<random port>` in front of an
/// upstream address, for latency, black holes and cut connections (there is
/// no `tc netem` on the test machines).
///
/// Point a client at [`FaultProxy::url`] instead of the server's URL, then
/// inject faults at any time. Dropping the proxy stops the accept loop and
/// closes every proxied connection (both sides).
///
/// Faults act on data *delivery*: each direction of each connection has a
/// FIFO queue of chunks, each with a delivery time; reading never stops
/// (except on a cut), so byte order is always preserved.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_task: JoinHandle<()>,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("latency", &self.shared.latency())
            .field("blackhole", &*self.shared.blackhole.borrow())
            .field("refusing", &self.shared.refusing.load(Ordering::Relaxed))
            .field("connections", &self.connections())
            .finish()
    }
}

impl FaultProxy {
    /// Listen on `127.0.0.1:0` and forward every accepted connection to
    /// `upstream`, which must be a loopback address (this crate only talks to
    /// `127.0.0.1`; other addresses give `InvalidInput`).
    ///
    /// Must be called within a tokio runtime: the accept loop and the
    /// connections run as tasks on it.
    pub async fn start(upstream: SocketAddr) -> io::Result<FaultProxy> {
        if !upstream.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("FaultProxy only forwards to loopback addresses, not {upstream}"),
            ));
        }
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            latency_nanos: AtomicU64::new(0),
            refusing: AtomicBool::new(false),
            blackhole: watch::Sender::new(false),
            epoch: watch::Sender::new(0),
            connections: AtomicUsize::new(0),
        });
        let accept_task = tokio::spawn(accept_loop(listener, upstream, shared.clone()));
        Ok(FaultProxy {
            addr,
            shared,
            accept_task,
        })
    }

    /// The proxy's listening address (`127.0.0.1:PORT`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://127.0.0.1:PORT` for the proxy's address.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// Add a one-way delay `d` to every chunk forwarded, in both directions
    /// (so a request/reply round trip gains `2 * d`). Applies to chunks read
    /// from now on; order is preserved and throughput is not serialised (each
    /// chunk is due `d` after it was read). `Duration::ZERO` turns it off.
    pub fn set_latency(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.shared.latency_nanos.store(nanos, Ordering::Relaxed);
    }

    /// Close every current proxied connection (both sides) now. The
    /// connection tasks close the sockets asynchronously, within
    /// milliseconds. New connections still work.
    pub fn cut_all(&self) {
        self.shared.cut_all();
    }

    /// Black hole on/off. While on, new and current connections stay open but
    /// nothing is delivered in either direction: requests get no reply.
    ///
    /// Data received while the black hole is on is **held, not dropped**: when
    /// it is turned off, everything queued is delivered in order (like TCP
    /// retransmission after a healed partition), so the byte stream on each
    /// connection is never corrupted. To simulate a connection that does not
    /// survive the partition, call [`FaultProxy::cut_all`] before turning the
    /// black hole off.
    pub fn set_blackhole(&self, on: bool) {
        self.shared.blackhole.send_replace(on);
    }

    /// Refusing on/off. While on, new connections are accepted and closed at
    /// once (clients see the connection closed/reset, as with a refused
    /// connection), and turning it on also cuts every existing connection.
    pub fn set_refusing(&self, on: bool) {
        // Order matters: flag first, then cut (see `accept_loop`).
        self.shared.refusing.store(on, Ordering::SeqCst);
        if on {
            self.shared.cut_all();
        }
    }

    /// Number of currently open proxied connections.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept_task.abort();
        self.shared.cut_all();
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, shared: Arc<Shared>) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(e) => {
                tracing::debug!(error = %e, "FaultProxy accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        // Subscribe before checking `refusing`: `set_refusing(true)` sets the
        // flag before bumping the epoch, so either we see the flag or the
        // connection sees the cut.
        let epoch = shared.epoch.subscribe();
        if shared.refusing.load(Ordering::SeqCst) {
            drop(client);
            continue;
        }
        tokio::spawn(run_connection(client, upstream, shared.clone(), epoch));
    }
}

async fn run_connection(
    client: TcpStream,
    upstream: SocketAddr,
    shared: Arc<Shared>,
    mut epoch: watch::Receiver<u64>,
) {
    let _count = ConnCount::new(shared.clone());
    let work = async {
        let server = tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(upstream))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "upstream connect"))??;
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        tokio::try_join!(
            pipe(client_read, server_write, &shared),
            pipe(server_read, client_write, &shared),
        )?;
        Ok::<(), io::Error>(())
    };
    tokio::select! {
        result = work => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "FaultProxy connection ended");
            }
        }
        // Any epoch change (or the sender going away) closes the connection;
        // dropping `work` drops both sockets.
        _ = epoch.changed() => {}
    }
}

/// Forward one direction: read chunks, stamp them with their delivery time,
/// and deliver them in order, honouring the black hole. On EOF, everything
/// queued is delivered and the write side is shut down.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, shared: &Shared) -> io::Result<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = from.read(&mut buf).await?;
            if n == 0 {
                // Returning drops `tx`, which ends the writer once drained.
                return Ok::<(), io::Error>(());
            }
            let due = Instant::now() + shared.latency();
            if tx.send((due, buf[..n].to_vec())).is_err() {
                return Ok(());
            }
        }
    };
    let writer = async move {
        let mut blackhole = shared.blackhole.subscribe();
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            blackhole
                .wait_for(|on| !*on)
                .await
                .map_err(|_| io::Error::other("proxy stopped"))?;
            to.write_all(&chunk).await?;
        }
        to.shutdown().await
    };
    tokio::try_join!(reader, writer).map(drop)
}
