//! Certificates made by the test: a private CA and server certificates it
//! signs, written as PEM files into a temporary directory, for the TLS
//! listeners the tests start (HTTPS, a TLS Kafka listener, MariaDB with TLS).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// A certificate authority of the test's own; its files live as long as it.
pub struct TestCa {
    dir: tempfile::TempDir,
    cert: Certificate,
    key: KeyPair,
}

/// A server certificate and its key as PEM files, signed by a [`TestCa`].
#[derive(Clone, Debug)]
pub struct ServerCert {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM, PKCS#8).
    pub key: PathBuf,
}

impl TestCa {
    /// A new CA, its certificate written to [`TestCa::ca_file`]. The TLS
    /// tests name their servers `localhost` (the name their certificates
    /// carry); tests may send traffic only to 127.0.0.0/8, so a machine whose
    /// `localhost` resolves anywhere else fails here, before anything dials.
    pub fn new() -> Self {
        assert_localhost_is_loopback();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "trustmsg test CA");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("a CA key");
        let cert = params.self_signed(&key).expect("a self-signed CA");
        std::fs::write(dir.path().join("ca.pem"), cert.pem()).expect("write ca.pem");
        Self { dir, cert, key }
    }

    /// The CA's certificate (PEM): what a client must trust.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The directory the files are written to.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A server certificate for `names` (DNS names or IP addresses), written
    /// as `<file_stem>.pem` and `<file_stem>.key`.
    pub fn server_cert(&self, file_stem: &str, names: &[&str]) -> ServerCert {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names.clone()).expect("server params");
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_default(),
        );
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().expect("a server key");
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("a certificate signed by the CA");
        let files = ServerCert {
            cert: self.dir.path().join(format!("{file_stem}.pem")),
            key: self.dir.path().join(format!("{file_stem}.key")),
        };
        std::fs::write(&files.cert, cert.pem()).expect("write the certificate");
        std::fs::write(&files.key, key.serialize_pem()).expect("write the key");
        files
    }
}

/// Panics unless every address `localhost` resolves to is in 127.0.0.0/8.
fn assert_localhost_is_loopback() {
    use std::net::ToSocketAddrs;
    let addrs: Vec<std::net::SocketAddr> = ("localhost", 0)
        .to_socket_addrs()
        .expect("resolve localhost")
        .collect();
    assert!(
        !addrs.is_empty()
            && addrs.iter().all(|a| match a.ip() {
                std::net::IpAddr::V4(ip) => ip.is_loopback(),
                std::net::IpAddr::V6(_) => false,
            }),
        "localhost resolves to {addrs:?}: the TLS tests dial localhost and may only reach \
         127.0.0.0/8 (map localhost to 127.0.0.1 only in /etc/hosts)"
    );
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}
