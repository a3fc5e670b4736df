//! Opening a server's URL: `redis://`, or `rediss://` (TLS) with the system's root certificates,
//! or a custom CA and a client certificate from the builder. TLS needs one of the cargo features
//! `tls-rustls` (rustls with the ring provider; no OpenSSL) or `tls-native-tls`.

#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
use std::path::Path;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::redact::redact_password;

/// PEM bytes given directly, or a file to read them from when the client is built.
#[derive(Clone)]
pub(crate) enum Pem {
    Bytes(Vec<u8>),
    File(PathBuf),
}

impl std::fmt::Debug for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // Never print the bytes: a client key is a secret.
            Pem::Bytes(bytes) => write!(f, "Pem({} bytes)", bytes.len()),
            Pem::File(path) => write!(f, "Pem({})", path.display()),
        }
    }
}

#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
impl Pem {
    fn read(&self, what: &str) -> Result<Vec<u8>> {
        match self {
            Pem::Bytes(bytes) => Ok(bytes.clone()),
            Pem::File(path) => read_file(path, what),
        }
    }
}

#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
fn read_file(path: &Path, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::Config {
        reason: format!("cannot read the {what} {}: {e}", path.display()),
    })
}

/// The TLS options of a builder: a CA to trust instead of the system's roots, and a client
/// certificate with its key (for servers with `tls-auth-clients yes`).
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsOptions {
    pub(crate) ca: Option<Pem>,
    pub(crate) client: Option<(Pem, Pem)>,
}

impl TlsOptions {
    pub(crate) fn is_set(&self) -> bool {
        self.ca.is_some() || self.client.is_some()
    }
}

/// The `redis` client for `url`, with `tls` applied to a `rediss://` URL.
pub(crate) fn open(url: &str, tls: &TlsOptions) -> Result<redis::Client> {
    let invalid = |e: redis::RedisError| Error::Config {
        reason: format!(
            "invalid Redis URL: {}",
            redact_password(&e.to_string(), url)
        ),
    };
    let secure = url.trim_start().starts_with("rediss://");
    if secure && !cfg!(any(feature = "tls-rustls", feature = "tls-native-tls")) {
        return Err(Error::Config {
            reason: "a rediss:// URL needs TLS: build fencelock with its `tls-rustls` feature \
                     (or `tls-native-tls`)"
                .into(),
        });
    }
    if !tls.is_set() {
        install_crypto_provider();
        return redis::Client::open(url).map_err(invalid);
    }
    if !secure {
        let server = redis::Client::open(url)
            .map(|c| c.get_connection_info().addr().to_string())
            .map_err(invalid)?;
        return Err(Error::Config {
            reason: format!(
                "TLS options were given, but the URL for {server} is redis://, not rediss://"
            ),
        });
    }
    open_tls(url, tls).map_err(invalid_or(url))
}

fn invalid_or(url: &str) -> impl Fn(Error) -> Error + '_ {
    move |e| match e {
        Error::Config { reason } => Error::Config {
            reason: redact_password(&reason, url),
        },
        other => other,
    }
}

#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
fn open_tls(url: &str, tls: &TlsOptions) -> Result<redis::Client> {
    install_crypto_provider();
    let certs = read_certificates(tls)?;
    redis::Client::build_with_tls(url, certs).map_err(|e| Error::Config {
        reason: format!("invalid TLS configuration: {e}"),
    })
}

/// The certificates of `tls` for clients that take them apart from a URL (a cluster's nodes,
/// the master a sentinel names); `None` when no TLS option was given.
pub(crate) fn certificates(tls: &TlsOptions) -> Result<Option<crate::connection::Certificates>> {
    if !tls.is_set() {
        return Ok(None);
    }
    #[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
    {
        read_certificates(tls).map(Some)
    }
    #[cfg(not(any(feature = "tls-rustls", feature = "tls-native-tls")))]
    Err(Error::Config {
        reason: "TLS options need fencelock's `tls-rustls` feature (or `tls-native-tls`)".into(),
    })
}

#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
fn read_certificates(tls: &TlsOptions) -> Result<redis::TlsCertificates> {
    let client_tls = match &tls.client {
        Some((cert, key)) => Some(redis::ClientTlsConfig {
            client_cert: cert.read("TLS client certificate")?,
            client_key: key.read("TLS client key")?,
        }),
        None => None,
    };
    let root_cert = match &tls.ca {
        Some(ca) => Some(ca.read("TLS CA certificate")?),
        None => None,
    };
    Ok(redis::TlsCertificates {
        client_tls,
        root_cert,
    })
}

#[cfg(not(any(feature = "tls-rustls", feature = "tls-native-tls")))]
fn open_tls(_url: &str, _tls: &TlsOptions) -> Result<redis::Client> {
    Err(Error::Config {
        reason: "TLS options need fencelock's `tls-rustls` feature (or `tls-native-tls`)".into(),
    })
}

/// Makes sure rustls has a process-wide crypto provider, so that an application never has to
/// call `CryptoProvider::install_default` itself (rustls cannot choose one on its own when
/// several are compiled in). An application that installed its own keeps it.
fn install_crypto_provider() {
    #[cfg(feature = "tls-rustls")]
    {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
