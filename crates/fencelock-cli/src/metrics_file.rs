//! `--metrics-file PATH` of `run` and `elect`: the run's metrics (fencelock's instruments,
//! docs/observability.md) in the Prometheus text format, where node_exporter's textfile
//! collector reads them: a run is too short-lived to be scraped. The file is written whole (a
//! temporary file in the same directory, renamed over it), when the run starts, every
//! [`EVERY`] while it runs, and when it ends, whatever the exit status.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fencelock::metrics::{LockLabels, Registry, set_lock_labels};

use crate::error::CliError;

/// How often the file is written while the run lasts.
pub const EVERY: Duration = Duration::from_secs(10);

/// The option.
#[derive(Debug, clap::Args)]
pub struct MetricsFileArgs {
    /// Write the run's metrics to PATH in the Prometheus text format, for node_exporter's
    /// textfile collector (name it *.prom, in the collector's directory): when the run starts,
    /// every 10s while it runs, and when it ends. Each series carries the lock's name (lock="NAME")
    #[arg(long, value_name = "PATH")]
    pub metrics_file: Option<PathBuf>,
}

/// The file, kept up to date while the run lasts.
pub struct MetricsFile {
    path: PathBuf,
    registry: Registry,
    lock: String,
    writer: tokio::task::JoinHandle<()>,
}

impl MetricsFile {
    /// Starts recording the run's metrics for the file (`None` without `--metrics-file`), and
    /// writes it a first time.
    ///
    /// # Errors
    ///
    /// A usage error if the file cannot be written (nothing is run then).
    pub async fn start(args: &MetricsFileArgs, lock: &str) -> Result<Option<Self>, CliError> {
        let Some(path) = args.metrics_file.clone() else {
            return Ok(None);
        };
        let registry = Registry::new();
        registry.install().map_err(|e| CliError::Failed {
            message: format!("--metrics-file: {e}"),
            code: 1,
        })?;
        // One lock per command: its name labels every series, so that the files of several
        // jobs merged by the collector do not collide.
        set_lock_labels(LockLabels::names());
        let lock = lock.to_owned();
        write(&path, &registry, &lock)
            .await
            .map_err(|e| CliError::Usage(format!("--metrics-file {}: {e}", path.display())))?;
        let writer = tokio::spawn({
            let (path, registry, lock) = (path.clone(), registry.clone(), lock.clone());
            async move {
                loop {
                    tokio::time::sleep(EVERY).await;
                    if let Err(e) = write(&path, &registry, &lock).await {
                        tracing::warn!(path = %path.display(), error = %e, "cannot write the metrics file");
                    }
                }
            }
        });
        Ok(Some(MetricsFile {
            path,
            registry,
            lock,
            writer,
        }))
    }

    /// Writes the file a last time (a failure is reported on stderr: the run's status stays
    /// the command's).
    pub async fn finish(self) {
        self.writer.abort();
        if let Err(e) = write(&self.path, &self.registry, &self.lock).await {
            eprintln!(
                "fencelock: cannot write the metrics file {}: {e}",
                self.path.display()
            );
        }
    }
}

/// Writes the registry's text to `path` whole: a temporary file beside it, renamed over it.
async fn write(path: &Path, registry: &Registry, lock: &str) -> std::io::Result<()> {
    let text = registry.render_with(&[("lock", lock)]);
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
            _ => PathBuf::from("."),
        };
        let mut file = tempfile::Builder::new()
            .prefix(".fencelock-metrics")
            .tempfile_in(dir)?;
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        // Readable by the collector, which runs as a user of its own.
        file.as_file()
            .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
        file.persist(&path).map_err(|e| e.error)?;
        Ok(())
    })
    .await
    .map_err(std::io::Error::other)?
}
