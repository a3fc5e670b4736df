//! Finding the server binary.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const NOT_FOUND: &str =
    "redis-server not found: install it with `apt-get install -y redis-server` (Debian/Ubuntu)";

/// The environment variable naming the server binary the tests run instead of `redis-server`
/// (for instance a `valkey-server`; see `scripts/test`).
pub const SERVER_ENV: &str = "FENCELOCK_TEST_SERVER";

/// Whether a server binary can be found: the one named by [`SERVER_ENV`], else
/// `/usr/bin/redis-server` or `redis-server` in `PATH`.
pub fn redis_server_available() -> bool {
    find_redis_server().is_ok()
}

/// The first executable file named `redis-server` in a directory of `PATH`, if any.
///
/// Unlike the servers of [`RedisServer::start`](crate::RedisServer::start), this looks at
/// `PATH` only (not at [`SERVER_ENV`] or `/usr/bin`): for a program that starts the
/// `redis-server` its user would run, with [`RedisServer::start_binary`](crate::RedisServer::start_binary).
pub fn redis_server_in_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The server binary the test kit starts: see [`redis_server_available`].
pub(super) fn find_redis_server() -> io::Result<PathBuf> {
    if let Some(chosen) = std::env::var_os(SERVER_ENV).filter(|v| !v.is_empty()) {
        let chosen = PathBuf::from(chosen);
        if chosen.is_file() {
            return Ok(chosen);
        }
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{SERVER_ENV} names {}, which is not a file",
                chosen.display()
            ),
        ));
    }
    let default = Path::new("/usr/bin/redis-server");
    if default.is_file() {
        return Ok(default.to_path_buf());
    }
    redis_server_in_path().ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, NOT_FOUND))
}
