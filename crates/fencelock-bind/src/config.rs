//! A client as a package describes it: where the servers are and the builder's options. It is
//! kept (not only the built client) so that a process that must connect afresh (a forked Python
//! child) can build it again.

use std::time::Duration;

use fencelock::{ClientBuilder, Shortfall};

/// Where the servers are.
#[derive(Clone, Debug)]
pub enum Deployment {
    /// One server (or a primary with replicas, through `wait_for_replicas`).
    Server(String),
    /// Independent servers, a lock held on a majority.
    Redlock(Vec<String>),
    /// A Redis Cluster, from its seed nodes.
    Cluster(Vec<String>),
    /// A primary found through Sentinel: the sentinels' URLs and the master's name.
    Sentinel(Vec<String>, String),
}

impl Deployment {
    /// The deployment `kind` (`server`, `redlock`, `cluster`, `sentinel`) of `urls`; `master`
    /// is the Sentinel master's name, and only for `sentinel`.
    ///
    /// # Errors
    ///
    /// The reason, for a kind that does not exist, a server given more or fewer than one URL,
    /// or a master named for another kind.
    pub fn new(kind: &str, urls: Vec<String>, master: Option<String>) -> Result<Self, String> {
        match (kind, master) {
            ("server", None) => match <[String; 1]>::try_from(urls) {
                Ok([url]) => Ok(Deployment::Server(url)),
                Err(_) => Err("a single server takes exactly one URL".to_owned()),
            },
            ("redlock", None) => Ok(Deployment::Redlock(urls)),
            ("cluster", None) => Ok(Deployment::Cluster(urls)),
            ("sentinel", Some(master)) => Ok(Deployment::Sentinel(urls, master)),
            ("sentinel", None) => Err("a Sentinel deployment needs the master's name".to_owned()),
            (other @ ("server" | "redlock" | "cluster"), Some(_)) => {
                Err(format!("a master's name is for Sentinel, not for {other}"))
            }
            (other, _) => Err(format!("unknown deployment {other:?}")),
        }
    }
}

/// TLS material: a file's path, or the PEM itself.
#[derive(Clone, Debug)]
pub enum Pem {
    File(String),
    Bytes(Vec<u8>),
}

impl Pem {
    /// The PEM, read from its file if it is one.
    ///
    /// # Errors
    ///
    /// The reason, naming the file, when it cannot be read.
    pub fn read(&self) -> Result<Vec<u8>, String> {
        match self {
            Pem::Bytes(bytes) => Ok(bytes.clone()),
            Pem::File(path) => {
                std::fs::read(path).map_err(|e| format!("cannot read the TLS file {path:?}: {e}"))
            }
        }
    }
}

/// Waiting for replicas after each write: how many, how long, and what a shortfall does.
#[derive(Clone, Copy, Debug)]
pub struct Replicas {
    pub replicas: u32,
    pub timeout: Duration,
    pub shortfall: Shortfall,
}

impl Replicas {
    /// The default wait for the replicas' acknowledgements when none is given.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);

    /// `shortfall` as a package names it: `fail` (the default) or `warn`.
    ///
    /// # Errors
    ///
    /// The reason, for any other name.
    pub fn shortfall(name: Option<&str>) -> Result<Shortfall, String> {
        match name {
            None | Some("fail") => Ok(Shortfall::Fail),
            Some("warn") => Ok(Shortfall::Warn),
            Some(other) => Err(format!(
                "the replica shortfall is \"fail\" or \"warn\", not {other:?}"
            )),
        }
    }
}

/// The builder's options, as a package gave them.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub key_prefix: Option<String>,
    pub command_timeout: Option<Duration>,
    pub instance_timeout: Option<Duration>,
    pub tls_ca: Option<Pem>,
    pub tls_client_cert: Option<(Pem, Pem)>,
    pub master_username: Option<String>,
    /// Never shown: `Debug` prints it as `<hidden>`.
    pub master_password: Option<Secret>,
    pub replicas: Option<Replicas>,
}

/// A password: kept, given to the builder, never printed.
#[derive(Clone)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<hidden>")
    }
}

/// A client's description: what [`builder`](Self::builder) makes a builder of.
#[derive(Clone, Debug)]
pub struct Connection {
    pub deployment: Deployment,
    pub options: Options,
}

impl Connection {
    /// The library's builder for this client.
    ///
    /// # Errors
    ///
    /// The reason, when a TLS file given with its PEM's partner as bytes cannot be read.
    pub fn builder(&self) -> Result<ClientBuilder, String> {
        let mut builder = match &self.deployment {
            Deployment::Server(url) => fencelock::Client::builder(url),
            Deployment::Redlock(urls) => fencelock::Client::redlock(urls),
            Deployment::Cluster(urls) => fencelock::Client::cluster(urls),
            Deployment::Sentinel(urls, master) => fencelock::Client::sentinel(urls, master),
        };
        let options = &self.options;
        if let Some(prefix) = &options.key_prefix {
            builder = builder.key_prefix(prefix.clone());
        }
        if let Some(timeout) = options.command_timeout {
            builder = builder.command_timeout(timeout);
        }
        if let Some(timeout) = options.instance_timeout {
            builder = builder.instance_timeout(timeout);
        }
        builder = match &options.tls_ca {
            Some(Pem::File(path)) => builder.tls_ca_file(path),
            Some(Pem::Bytes(pem)) => builder.tls_ca_pem(pem.clone()),
            None => builder,
        };
        builder = match &options.tls_client_cert {
            Some((Pem::File(cert), Pem::File(key))) => builder.tls_client_cert_files(cert, key),
            Some((cert, key)) => builder.tls_client_cert_pem(cert.read()?, key.read()?),
            None => builder,
        };
        if let Some(password) = &options.master_password {
            builder = builder.master_credentials(options.master_username.as_deref(), &password.0);
        }
        if let Some(r) = options.replicas {
            builder = builder.wait_for_replicas(r.replicas, r.timeout, r.shortfall);
        }
        Ok(builder)
    }
}
