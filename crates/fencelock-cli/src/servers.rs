//! Which Redis servers the lock commands (`run`, `status`, `list`, `release`) talk to, and the
//! lock client built on them.
//!
//! The URLs come from `--url` (repeatable: several mean Redlock), else `FENCELOCK_URL`
//! (comma-separated), else the file named by `FENCELOCK_URL_FILE` (one URL per line, or
//! comma-separated; `#` starts a comment line), else `redis://127.0.0.1:6379`. A password is
//! refused on the command line (other users can read it in `ps`), and never shown: servers are
//! named as `host:port`.

use std::path::PathBuf;

use crate::error::{CliError, EXIT_USAGE};
use crate::redis_url;

/// The server used when none is configured.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";
/// The environment variable with the URL(s), comma-separated.
pub const URL_ENV: &str = "FENCELOCK_URL";
/// The environment variable naming a file with the URL(s).
pub const URL_FILE_ENV: &str = "FENCELOCK_URL_FILE";
/// The environment variables with the credentials of a Sentinel-managed master.
pub const MASTER_USER_ENV: &str = "FENCELOCK_MASTER_USER";
/// See [`MASTER_USER_ENV`].
pub const MASTER_PASSWORD_ENV: &str = "FENCELOCK_MASTER_PASSWORD";

/// How the URLs are used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// One server, or independent servers for Redlock.
    Instances,
    /// Seed nodes of one Redis Cluster.
    Cluster,
    /// Sentinels of the master with this name.
    Sentinel(String),
}

/// The server options shared by the lock commands.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// A Redis server, as redis://[USER@]HOST:PORT[/DB], or rediss:// for TLS. Repeat it for
    /// Redlock over independent servers. Default: $FENCELOCK_URL (comma-separated), else the
    /// file named by $FENCELOCK_URL_FILE, else redis://127.0.0.1:6379. URLs with a password are
    /// refused here: put them in FENCELOCK_URL or FENCELOCK_URL_FILE.
    #[arg(long = "url", value_name = "URL")]
    pub urls: Vec<String>,

    /// The URLs are seed nodes of one Redis Cluster (not independent Redlock servers); one is
    /// enough, more survive a seed being down
    #[arg(
        long,
        env = "FENCELOCK_CLUSTER",
        value_parser = clap::builder::BoolishValueParser::new(),
        conflicts_with = "sentinel"
    )]
    pub cluster: bool,

    /// The URLs are Redis Sentinels; lock on the master they know by NAME, following its
    /// failovers. The master's credentials, if it needs any, come from FENCELOCK_MASTER_USER
    /// and FENCELOCK_MASTER_PASSWORD (never from the command line); the sentinels' go in their
    /// URLs
    #[arg(long, value_name = "NAME", env = "FENCELOCK_SENTINEL")]
    pub sentinel: Option<String>,

    /// The prefix of the lock keys in Redis; every user of a lock must use the same one
    #[arg(long, value_name = "PREFIX", default_value = fencelock::DEFAULT_PREFIX)]
    pub prefix: String,

    /// For rediss:// (TLS) URLs: trust the CA in this PEM file instead of the system's root
    /// certificates
    #[arg(long, value_name = "FILE", env = "FENCELOCK_TLS_CA")]
    pub tls_ca: Option<PathBuf>,

    /// For rediss:// URLs: the client certificate (PEM) to present, for servers that require
    /// one (tls-auth-clients yes); needs --tls-key
    #[arg(
        long,
        value_name = "FILE",
        env = "FENCELOCK_TLS_CERT",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,

    /// For rediss:// URLs: the client certificate's private key (PEM); needs --tls-cert
    #[arg(
        long,
        value_name = "FILE",
        env = "FENCELOCK_TLS_KEY",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
}

/// The resolved servers.
#[derive(Debug, Clone)]
pub struct Servers {
    /// The URLs, as given (they may hold passwords: never print them).
    pub urls: Vec<String>,
    /// Each server as `host:port`, in the same order.
    pub addrs: Vec<String>,
    /// The key prefix.
    pub prefix: String,
    /// How the URLs are used.
    pub topology: Topology,
    /// The TLS files: CA, and client certificate with its key.
    pub tls_ca: Option<PathBuf>,
    pub tls_client: Option<(PathBuf, PathBuf)>,
}

impl Servers {
    /// The servers for messages: `host:port`, comma-separated (with what they are, for a
    /// cluster or sentinels).
    pub fn describe(&self) -> String {
        let addrs = self.addrs.join(", ");
        match &self.topology {
            Topology::Instances => addrs,
            Topology::Cluster => format!("cluster of {addrs}"),
            Topology::Sentinel(name) => format!("master {name} (sentinels {addrs})"),
        }
    }

    /// A lock client for these servers (Redlock when there are several independent ones).
    pub fn client(&self) -> Result<fencelock::Client, CliError> {
        let builder = match (&self.topology, self.urls.as_slice()) {
            (Topology::Cluster, seeds) => fencelock::Client::cluster(seeds),
            (Topology::Sentinel(name), sentinels) => {
                let builder = fencelock::Client::sentinel(sentinels, name);
                match non_empty_env(MASTER_PASSWORD_ENV) {
                    Some(password) => builder
                        .master_credentials(non_empty_env(MASTER_USER_ENV).as_deref(), &password),
                    None => builder,
                }
            }
            (Topology::Instances, [one]) => fencelock::Client::builder(one),
            (Topology::Instances, many) => fencelock::Client::redlock(many),
        };
        let mut builder = builder.key_prefix(self.prefix.clone());
        if let Some(ca) = &self.tls_ca {
            builder = builder.tls_ca_file(ca);
        }
        if let Some((cert, key)) = &self.tls_client {
            builder = builder.tls_client_cert_files(cert, key);
        }
        Ok(builder.build()?)
    }
}

impl ServerArgs {
    /// Finds the URLs (see the module documentation) and checks that they parse.
    pub fn resolve(&self) -> Result<Servers, CliError> {
        let (urls, source) = if !self.urls.is_empty() {
            for (i, url) in self.urls.iter().enumerate() {
                if has_password(url) {
                    return Err(CliError::Usage(format!(
                        "--url #{} contains a password, which other users can read on the command \
                         line (ps, shell history); put the URL in {URL_ENV} or in a file named by \
                         {URL_FILE_ENV} instead",
                        i + 1
                    )));
                }
            }
            (self.urls.clone(), "--url".to_owned())
        } else if let Some(value) = non_empty_env(URL_ENV) {
            (split_urls(&value), URL_ENV.to_owned())
        } else if let Some(path) = non_empty_env(URL_FILE_ENV) {
            let path = PathBuf::from(path);
            let text = std::fs::read_to_string(&path).map_err(|e| CliError::Failed {
                message: format!("cannot read {URL_FILE_ENV} ({}): {e}", path.display()),
                code: EXIT_USAGE,
            })?;
            let urls = text
                .lines()
                .map(str::trim)
                .filter(|line| !line.starts_with('#'))
                .flat_map(split_urls)
                .collect();
            (urls, format!("{URL_FILE_ENV} ({})", path.display()))
        } else {
            (vec![DEFAULT_URL.to_owned()], "the default".to_owned())
        };
        if urls.is_empty() {
            return Err(CliError::Usage(format!("{source} holds no Redis URL")));
        }
        let mut addrs = Vec::with_capacity(urls.len());
        for (i, url) in urls.iter().enumerate() {
            let addr = redis_url::server_of(url).map_err(|reason| {
                let which = if urls.len() == 1 {
                    format!("from {source}")
                } else {
                    format!("#{} from {source}", i + 1)
                };
                CliError::InvalidUrl(format!("{which}: {reason}"))
            })?;
            addrs.push(addr);
        }
        let topology = match (&self.sentinel, self.cluster) {
            (Some(name), _) if name.trim().is_empty() => {
                return Err(CliError::Usage("--sentinel needs the master's name".into()));
            }
            (Some(name), _) => Topology::Sentinel(name.clone()),
            (None, true) => Topology::Cluster,
            (None, false) => Topology::Instances,
        };
        Ok(Servers {
            urls,
            addrs,
            prefix: self.prefix.clone(),
            topology,
            tls_ca: self.tls_ca.clone(),
            tls_client: self.tls_cert.clone().zip(self.tls_key.clone()),
        })
    }
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Comma-separated URLs, trimmed, without empty ones.
fn split_urls(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether `url` carries a password.
fn has_password(url: &str) -> bool {
    redis_url::redact(url, url) != url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_on_commas_and_lines() {
        assert_eq!(
            split_urls(" redis://a:1 ,redis://b:2,, "),
            vec!["redis://a:1".to_owned(), "redis://b:2".to_owned()]
        );
    }

    #[test]
    fn passwords_are_detected() {
        assert!(has_password("redis://user:pw@h:1"));
        assert!(has_password("redis://:pw@h:1/0"));
        assert!(!has_password("redis://user@h:1"));
        assert!(!has_password("redis://h:1"));
    }

    #[test]
    fn a_password_on_the_command_line_is_refused_without_echoing_it() {
        let args = ServerArgs {
            urls: vec!["redis://u:s3cret@127.0.0.1:1".into()],
            prefix: "fencelock".into(),
            cluster: false,
            sentinel: None,
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
        };
        let err = args.resolve().map(|_| ()).err().map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(err.contains("password") && !err.contains("s3cret"), "{err}");
    }
}
