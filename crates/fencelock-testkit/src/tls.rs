//! Certificates for TLS tests, made at test time with the `openssl` command: a CA, a server
//! certificate for `localhost` / `127.0.0.1` signed by it, a client certificate signed by it,
//! and a second, unrelated CA (to be distrusted).

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The files of one set of test certificates, in a directory removed on drop.
#[derive(Debug)]
pub struct TlsFiles {
    dir: tempfile::TempDir,
}

impl TlsFiles {
    /// Makes the certificates (EC P-256, valid for two days). Fails, saying what to install,
    /// when `openssl` is missing.
    pub fn generate() -> io::Result<TlsFiles> {
        let dir = tempfile::Builder::new()
            .prefix("fencelock-tls-")
            .tempdir()?;
        let files = TlsFiles { dir };
        let d = files.dir.path();
        std::fs::write(
            d.join("server.ext"),
            "basicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        )?;
        std::fs::write(
            d.join("client.ext"),
            "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
        )?;
        for ca in ["ca", "rogue-ca"] {
            openssl(
                d,
                &[
                    "req",
                    "-x509",
                    "-newkey",
                    "ec",
                    "-pkeyopt",
                    "ec_paramgen_curve:prime256v1",
                    "-nodes",
                    "-days",
                    "2",
                    "-subj",
                    &format!("/CN=fencelock test {ca}"),
                    "-keyout",
                    &format!("{ca}.key"),
                    "-out",
                    &format!("{ca}.pem"),
                ],
            )?;
        }
        for (leaf, cn) in [("server", "localhost"), ("client", "fencelock test client")] {
            openssl(
                d,
                &[
                    "req",
                    "-newkey",
                    "ec",
                    "-pkeyopt",
                    "ec_paramgen_curve:prime256v1",
                    "-nodes",
                    "-subj",
                    &format!("/CN={cn}"),
                    "-keyout",
                    &format!("{leaf}.key"),
                    "-out",
                    &format!("{leaf}.csr"),
                ],
            )?;
            openssl(
                d,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &format!("{leaf}.csr"),
                    "-CA",
                    "ca.pem",
                    "-CAkey",
                    "ca.key",
                    "-CAcreateserial",
                    "-days",
                    "2",
                    "-extfile",
                    &format!("{leaf}.ext"),
                    "-out",
                    &format!("{leaf}.pem"),
                ],
            )?;
        }
        Ok(files)
    }

    /// The CA that signed the server and client certificates.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A CA that signed nothing here.
    pub fn rogue_ca(&self) -> PathBuf {
        self.dir.path().join("rogue-ca.pem")
    }

    /// The server's certificate and key.
    pub fn server(&self) -> (PathBuf, PathBuf) {
        let d = self.dir.path();
        (d.join("server.pem"), d.join("server.key"))
    }

    /// The client's certificate and key.
    pub fn client(&self) -> (PathBuf, PathBuf) {
        let d = self.dir.path();
        (d.join("client.pem"), d.join("client.key"))
    }

    /// `redis-server` arguments for a TLS port `port` with these certificates; with
    /// `require_client_cert`, clients must present a certificate signed by the CA.
    pub fn server_args(&self, port: u16, require_client_cert: bool) -> Vec<String> {
        let (cert, key) = self.server();
        let path = |p: PathBuf| p.to_string_lossy().into_owned();
        vec![
            "--tls-port".into(),
            port.to_string(),
            "--tls-cert-file".into(),
            path(cert),
            "--tls-key-file".into(),
            path(key),
            "--tls-ca-cert-file".into(),
            path(self.ca()),
            "--tls-auth-clients".into(),
            if require_client_cert { "yes" } else { "no" }.into(),
        ]
    }
}

fn openssl(dir: &Path, args: &[&str]) -> io::Result<()> {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot run openssl ({e}); install it (Debian: apt-get install openssl)"),
            )
        })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "openssl {} failed: {}",
            args.first().copied().unwrap_or(""),
            String::from_utf8_lossy(&output.stderr)
        )))
    }
}
