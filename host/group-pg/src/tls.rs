//! TLS to the group store, as libpq's `sslmode` means it, over rustls
//! (`tokio-postgres-rustls`): `disable` (plaintext), `prefer` (the
//! default: TLS when the server offers it, certificate not checked),
//! `require` (TLS or fail; the certificate is checked against `sslrootcert`
//! when one is given, as libpq does, else not), `verify-ca` (the chain must
//! lead to a trusted root) and `verify-full` (the chain, and the host name
//! the certificate names). Trusted roots come from `sslrootcert` (a PEM
//! file) or else the system's store. tokio-postgres reads only `disable`,
//! `prefer` and `require`, so [`split`] takes `sslmode` and `sslrootcert`
//! out of the connection string and [`connector`] builds the matching
//! rustls configuration.

use crate::conninfo;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_postgres::config::SslMode as PgSslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    /// Plaintext only.
    Disable,
    /// TLS when the server offers it, certificate not checked.
    Prefer,
    /// TLS or fail.
    Require,
    /// TLS with a certificate chain leading to a trusted root.
    VerifyCa,
    /// As `VerifyCa`, and the certificate names the host.
    VerifyFull,
}

impl SslMode {
    fn parse(s: &str) -> Option<SslMode> {
        Some(match s {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    /// Its name in a connection string.
    pub fn label(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// What tokio-postgres is told: whether TLS is tried and required.
    pub(crate) fn for_client(self) -> PgSslMode {
        match self {
            SslMode::Disable => PgSslMode::Disable,
            SslMode::Prefer => PgSslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => PgSslMode::Require,
        }
    }
}

/// The TLS parameters of a connection string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tls {
    /// `sslmode` (libpq's default: `prefer`).
    pub mode: SslMode,
    /// `sslrootcert`: a PEM file of trusted roots.
    pub rootcert: Option<PathBuf>,
}

/// Take `sslmode` and `sslrootcert` out of `url`: the rest (for
/// tokio-postgres) and what they said. An `sslmode` libpq does not know is
/// an error naming the values it does.
pub(crate) fn split(url: &str) -> Result<(String, Tls), String> {
    let mut tls = Tls {
        mode: SslMode::Prefer,
        rootcert: None,
    };
    for p in conninfo::params(url) {
        match p.key.as_str() {
            "sslmode" => {
                tls.mode = SslMode::parse(&p.value).ok_or_else(|| {
                    format!(
                        "sslmode={} is not one of disable, prefer, require, verify-ca, \
                         verify-full",
                        p.value
                    )
                })?
            }
            "sslrootcert" => tls.rootcert = Some(PathBuf::from(&p.value)),
            _ => {}
        }
    }
    let rest = conninfo::replace(
        url,
        |p| p.key == "sslmode" || p.key == "sslrootcert",
        |_| None,
    );
    Ok((rest, tls))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The trusted roots: `sslrootcert`'s, or the system's.
fn roots(tls: &Tls) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match &tls.rootcert {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("sslrootcert {} cannot be read: {e}", path.display()))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!(
                    "sslrootcert {} holds no certificate (a PEM file of CA certificates is \
                     expected)",
                    path.display()
                ));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(
                    "sslmode=verify-full needs trusted roots, and the system has none: give \
                     sslrootcert=<CA file>"
                        .into(),
                );
            }
        }
    }
    Ok(roots)
}

/// The rustls connector for `tls`.
pub(crate) fn connector(tls: &Tls) -> Result<MakeRustlsConnect, String> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let verify = match tls.mode {
        SslMode::VerifyFull => Some(true),
        SslMode::VerifyCa => Some(false),
        // As libpq: `require` with a root file checks the chain.
        SslMode::Require if tls.rootcert.is_some() => Some(false),
        _ => None,
    };
    let config = match verify {
        Some(names) => {
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots(tls)?), provider)
                    .build()
                    .map_err(|e| e.to_string())?;
            let verifier: Arc<dyn ServerCertVerifier> = if names {
                webpki
            } else {
                Arc::new(ChainOnly(webpki))
            };
            builder
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unchecked(
                provider.signature_verification_algorithms,
            )))
            .with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}

/// `verify-ca`: the chain must lead to a trusted root; the name is not
/// checked.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer` and `require` without a root file: encrypted, the certificate
/// not checked (libpq's meaning); the handshake's signatures still are.
#[derive(Debug)]
struct Unchecked(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_modes_are_taken_out_of_the_string_tokio_postgres_reads() {
        let (rest, tls) =
            split("postgres://latch@db/g?sslmode=verify-full&sslrootcert=/etc/ca.pem").unwrap();
        assert_eq!(rest, "postgres://latch@db/g");
        assert_eq!(tls.mode, SslMode::VerifyFull);
        assert_eq!(tls.rootcert, Some(PathBuf::from("/etc/ca.pem")));
        let (rest, tls) = split("host=db user=latch sslmode=require").unwrap();
        assert_eq!(rest, "host=db user=latch");
        assert_eq!(tls.mode, SslMode::Require);
        assert_eq!(split("host=db").unwrap().1.mode, SslMode::Prefer);
        let err = split("host=db sslmode=verify").unwrap_err();
        assert!(err.contains("verify-full"), "{err}");
    }

    #[test]
    fn a_missing_root_file_is_named() {
        let tls = Tls {
            mode: SslMode::VerifyFull,
            rootcert: Some("/nonexistent/ca.pem".into()),
        };
        let err = connector(&tls).err().unwrap();
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");
    }
}
