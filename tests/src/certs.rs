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
    /// A new CA, its certificate written to [`TestCa::ca_file`].
    pub fn new() -> Self {
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

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}
