//! Configuring a [`Client`](crate::Client).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::tls::{self, Pem, TlsOptions};
use super::{Client, DEFAULT_COMMAND_TIMEOUT, DEFAULT_PREFIX};
#[cfg(feature = "cluster")]
use crate::connection::ClusterSeeds;
#[cfg(feature = "sentinel")]
use crate::connection::SentinelSet;
use crate::connection::{Endpoint, is_tls};
use crate::engine::Shared;
use crate::engine::watchdog::Watchdog;
use crate::engine::{ReplicaAck, Shortfall};
use crate::error::{Error, Result};
use crate::keys;
use crate::lease::ClockDrift;
use crate::quorum::Instances;

/// Configures a [`Client`].
///
/// ```no_run
/// # fn example() -> fencelock::Result<()> {
/// use std::time::Duration;
/// let client = fencelock::Client::builder("redis://127.0.0.1:6379")
///     .key_prefix("myapp-locks")
///     .command_timeout(Duration::from_millis(500))
///     .build()?;
/// # Ok(()) }
/// ```
///
/// Over TLS (`rediss://`, with the `tls-rustls` or `tls-native-tls` feature), the system's
/// root certificates are trusted unless a CA is given, and a client certificate is sent when
/// one is given:
///
/// ```no_run
/// # fn example() -> fencelock::Result<()> {
/// let client = fencelock::Client::builder("rediss://locks.internal:6380")
///     .tls_ca_file("/etc/redis/ca.pem")
///     .tls_client_cert_files("/etc/redis/client.pem", "/etc/redis/client.key")
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ClientBuilder {
    topology: Topology,
    master_credentials: Option<Credentials>,
    tls: TlsOptions,
    prefix: String,
    command_timeout: Duration,
    instance_timeout: Option<Duration>,
    drift: ClockDrift,
    replica_ack: Option<ReplicaAck>,
}

/// A server given to a builder: a URL, or a `redis` client made by the caller.
#[derive(Debug)]
pub(super) enum Target {
    Url(String),
    Client(Box<redis::Client>),
}

/// Where the client's Redis is.
#[derive(Debug)]
pub(super) enum Topology {
    /// One server, or independent servers for Redlock.
    Instances(Vec<Target>),
    /// The seed nodes of one Redis Cluster.
    #[cfg(feature = "cluster")]
    Cluster(Vec<String>),
    /// The sentinels of one master, and its name.
    #[cfg(feature = "sentinel")]
    Sentinel {
        sentinels: Vec<String>,
        master: String,
    },
}

/// A user and password for the data nodes behind Sentinel; never printed.
struct Credentials {
    username: Option<String>,
    password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl ClientBuilder {
    pub(super) fn new(topology: Topology) -> Self {
        ClientBuilder {
            topology,
            master_credentials: None,
            tls: TlsOptions::default(),
            prefix: DEFAULT_PREFIX.to_owned(),
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            instance_timeout: None,
            drift: ClockDrift::default(),
            replica_ack: None,
        }
    }

    /// Over TLS: trust this CA (PEM) instead of the system's root certificates.
    pub fn tls_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.ca = Some(Pem::Bytes(pem.into()));
        self
    }

    /// Over TLS: trust the CA in this PEM file (read when the client is built) instead of the
    /// system's root certificates.
    pub fn tls_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.ca = Some(Pem::File(path.into()));
        self
    }

    /// Over TLS: present this client certificate and key (PEM), for servers that require one
    /// (`tls-auth-clients yes`).
    pub fn tls_client_cert_pem(
        mut self,
        cert: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client = Some((Pem::Bytes(cert.into()), Pem::Bytes(key.into())));
        self
    }

    /// Over TLS: present the client certificate and key in these PEM files (read when the
    /// client is built).
    pub fn tls_client_cert_files(
        mut self,
        cert: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> Self {
        self.tls.client = Some((Pem::File(cert.into()), Pem::File(key.into())));
        self
    }

    /// After each grant, wait (at most `timeout`) until `replicas` replicas of the granting
    /// server have it (`WAIT` on the connection that made the grant), as Redisson's
    /// `syncSlaves`. With [`Shortfall::Fail`], a grant that fewer replicas acknowledged is
    /// given back and the acquisition fails with [`Error::NotReplicated`]; with
    /// [`Shortfall::Warn`] it is kept and a warning is logged. This narrows the window in which
    /// a failover loses a granted lock; it cannot close it (replication is asynchronous), so
    /// keep checking fences at the resource. Off by default.
    ///
    /// `WAIT` holds the client's connection until the replicas answer, so other operations of
    /// the client queue behind it: the cost is a replication round trip per grant. `timeout`
    /// must be shorter than the [`command_timeout`](Self::command_timeout), which bounds every
    /// command ([`build`](Self::build) refuses it otherwise).
    pub fn wait_for_replicas(
        mut self,
        replicas: u32,
        timeout: Duration,
        on_shortfall: Shortfall,
    ) -> Self {
        self.replica_ack = Some(ReplicaAck {
            replicas,
            timeout,
            on_shortfall,
        });
        self
    }

    /// With Sentinel ([`Client::sentinel`](crate::Client::sentinel)): the user
    /// (`None` for the default user) and password for the master the sentinels name. The
    /// sentinels' own credentials, if they need any, go in their URLs
    /// (`redis://user:password@sentinel:26379`); the two are often different.
    pub fn master_credentials(mut self, username: Option<&str>, password: &str) -> Self {
        self.master_credentials = Some(Credentials {
            username: username.map(str::to_owned),
            password: password.to_owned(),
        });
        self
    }

    /// The prefix of every key (default `fencelock`), without the colon that fencelock puts
    /// between it and a lock's name (keys are `PREFIX:{NAME}`): a prefix ending with `:` is
    /// refused by [`build`](Self::build) ([`Error::Config`](crate::Error::Config)). All users
    /// of a lock must agree on it.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The time limit for one command (default 2 s). A command that takes longer counts as
    /// Redis being unreachable. Renewals use the smaller of this and the time left on the lease.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Over Redlock: the time limit for one call to one instance (default: 5 % of the lease,
    /// at least 5 ms, at most the command timeout). Keep it small next to the lease, so that a
    /// stopped instance costs little.
    pub fn instance_timeout(mut self, timeout: Duration) -> Self {
        self.instance_timeout = Some(timeout);
        self
    }

    /// The clock-drift margin subtracted from every lease for the local deadline
    /// (default: 1 % of the lease + 2 ms).
    pub fn clock_drift(mut self, drift: ClockDrift) -> Self {
        self.drift = drift;
        self
    }

    fn tls_is_set(&self) -> bool {
        self.tls.ca.is_some() || self.tls.client.is_some()
    }

    /// Creates the client. No connection is made yet: the first operation connects, and a
    /// server that cannot be reached shows up as [`Error::Unreachable`](crate::Error::Unreachable) naming the lock.
    ///
    /// Must be called inside a Tokio runtime (it starts the client's background tasks); the
    /// [`blocking`](crate::blocking) module is for programs without one.
    pub fn build(self) -> Result<Client> {
        let endpoints = self.endpoints()?;
        keys::validate_prefix(&self.prefix)?;
        if self.command_timeout.is_zero() || self.instance_timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::Config {
                reason: "timeouts must be longer than zero".into(),
            });
        }
        if let Some(ack) = self.replica_ack
            && ack.timeout >= self.command_timeout
        {
            return Err(Error::Config {
                reason: format!(
                    "the replica wait ({:?}) must be shorter than the command timeout ({:?}), \
                     which bounds every command, WAIT included",
                    ack.timeout, self.command_timeout
                ),
            });
        }
        if !(0.0..0.5).contains(&self.drift.factor) {
            return Err(Error::Config {
                reason: format!(
                    "the clock drift factor must be in [0, 0.5), got {}",
                    self.drift.factor
                ),
            });
        }
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::Config {
                reason: "fencelock::Client must be built inside a Tokio runtime; use fencelock::blocking::Client otherwise".into(),
            });
        }
        let instances = Instances::new(endpoints, self.command_timeout, self.instance_timeout)
            .map_err(|e| Error::Config {
                reason: format!("cannot set up the Redis connection: {e}"),
            })?;
        let instances = Arc::new(instances);
        let watchdog = Watchdog::start(instances.clone(), self.drift);
        Ok(Client {
            shared: Arc::new(Shared {
                description: instances.describe(),
                instances,
                prefix: self.prefix,
                drift: self.drift,
                replica_ack: self.replica_ack,
                watchdog,
                next_id: AtomicU64::new(1),
                tokens: Default::default(),
            }),
        })
    }
}

impl ClientBuilder {
    /// Opens the URLs of the topology.
    fn endpoints(&self) -> Result<Vec<Endpoint>> {
        let sentinel = match self.topology {
            #[cfg(feature = "sentinel")]
            Topology::Sentinel { .. } => true,
            _ => false,
        };
        if self.master_credentials.is_some() && !sentinel {
            return Err(Error::Config {
                reason: "master credentials apply to a Sentinel client only; give a server's \
                         credentials in its URL"
                    .into(),
            });
        }
        match &self.topology {
            Topology::Instances(targets) => self.instances(targets),
            #[cfg(feature = "cluster")]
            Topology::Cluster(seeds) => {
                let nodes = self.open_all(seeds, "seed node")?;
                let nodes = nodes
                    .into_iter()
                    .map(|client| client.get_connection_info().clone())
                    .collect();
                Ok(vec![Endpoint::Cluster(ClusterSeeds {
                    nodes,
                    certs: tls::certificates(&self.tls)?,
                })])
            }
            #[cfg(feature = "sentinel")]
            Topology::Sentinel { sentinels, master } => {
                if master.is_empty() {
                    return Err(Error::Config {
                        reason: "the Sentinel master name is empty".into(),
                    });
                }
                let opened = self.open_all(sentinels, "sentinel")?;
                let tls = opened
                    .first()
                    .is_some_and(|c| is_tls(c.get_connection_info()));
                let mut node = redis::RedisConnectionInfo::default();
                if let Some(credentials) = &self.master_credentials {
                    if let Some(user) = &credentials.username {
                        node = node.set_username(user);
                    }
                    node = node.set_password(&credentials.password);
                }
                Ok(vec![Endpoint::Sentinel(SentinelSet {
                    sentinels: opened,
                    master: master.clone(),
                    node,
                    tls,
                    certs: tls::certificates(&self.tls)?,
                })])
            }
        }
    }

    /// Opens every URL of a cluster's seeds or of the sentinels; at least one, each once.
    fn open_all(&self, urls: &[String], what: &str) -> Result<Vec<redis::Client>> {
        if urls.is_empty() {
            return Err(Error::Config {
                reason: format!("no {what} URL was given"),
            });
        }
        let mut clients = Vec::with_capacity(urls.len());
        for url in urls {
            clients.push(tls::open(url, &self.tls)?);
        }
        let secure = |c: &redis::Client| is_tls(c.get_connection_info());
        if clients.iter().any(secure) && !clients.iter().all(secure) {
            return Err(Error::Config {
                reason: format!("mixed redis:// and rediss:// {what} URLs; use one scheme"),
            });
        }
        Ok(clients)
    }

    /// One server, or the independent servers of Redlock.
    fn instances(&self, targets: &[Target]) -> Result<Vec<Endpoint>> {
        let mut clients = Vec::with_capacity(targets.len());
        for target in targets {
            clients.push(match target {
                Target::Url(url) => tls::open(url, &self.tls)?,
                Target::Client(client) if self.tls_is_set() => {
                    let addr = client.get_connection_info().addr().to_string();
                    return Err(Error::Config {
                        reason: format!(
                            "TLS options cannot apply to a redis::Client made by the caller \
                             ({addr}); give its URL instead"
                        ),
                    });
                }
                Target::Client(client) => (**client).clone(),
            });
        }
        if clients.is_empty() {
            return Err(Error::Config {
                reason: "no Redis URL was given".into(),
            });
        }
        let mut seen = std::collections::HashSet::new();
        for client in &clients {
            let addr = client.get_connection_info().addr().to_string();
            if !seen.insert(addr.clone()) {
                return Err(Error::Config {
                    reason: format!("{addr} is listed twice; Redlock needs independent instances"),
                });
            }
        }
        Ok(clients.into_iter().map(Endpoint::Single).collect())
    }
}
