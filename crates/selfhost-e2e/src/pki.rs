//! The cluster's certificates and keys, minted by the harness as `kubeadm init phase certs`
//! and `kubeconfig` would: one CA, the kube-apiserver's serving certificate, the service
//! account key pair, and a client certificate per identity (admin, controller-manager,
//! scheduler, each node's kubelet); and etcd's own CA (`etcd-ca`), with etcd's serving
//! certificate and the kube-apiserver's client certificate for etcd. Keys are ECDSA P-256,
//! which every component accepts.

use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use crate::BedError;

/// A certificate and its private key, both PEM.
#[derive(Clone)]
pub struct KeyedCertificate {
    /// The certificate.
    pub cert_pem: String,
    /// The private key (PKCS#8). Never logged.
    pub key_pem: String,
}

impl std::fmt::Debug for KeyedCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedCertificate")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// The certificate authority; it signs everything else.
pub struct Authority {
    params: CertificateParams,
    key: KeyPair,
    /// The CA certificate and key as files hold them.
    pub keyed: KeyedCertificate,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("keyed", &self.keyed)
            .finish_non_exhaustive()
    }
}

fn distinguished(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    if let Some(org) = organization {
        name.push(DnType::OrganizationName, org);
    }
    name
}

impl Authority {
    /// A new CA named `kubernetes`, as kubeadm names it.
    ///
    /// # Errors
    /// Key generation or signing failed.
    pub fn mint() -> Result<Authority, BedError> {
        Authority::mint_named("kubernetes")
    }

    /// A new CA named `common_name` (kubeadm's etcd CA is `etcd-ca`).
    ///
    /// # Errors
    /// Key generation or signing failed.
    pub fn mint_named(common_name: &str) -> Result<Authority, BedError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.distinguished_name = distinguished(common_name, None);
        let cert = params.self_signed(&key)?;
        let keyed = KeyedCertificate {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        };
        Ok(Authority { params, key, keyed })
    }

    /// A serving certificate for the kube-apiserver: the names clients use inside the
    /// cluster, the service IP, and every address given (nodes, load balancer).
    ///
    /// # Errors
    /// Key generation or signing failed.
    pub fn apiserver_serving(&self, addresses: &[IpAddr]) -> Result<KeyedCertificate, BedError> {
        let mut names: Vec<SanType> = [
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "localhost",
        ]
        .iter()
        .map(|n| n.to_string().try_into().map(SanType::DnsName))
        .collect::<Result<_, _>>()?;
        let fixed: [IpAddr; 2] = [IpAddr::from([10, 96, 0, 1]), IpAddr::from([127, 0, 0, 1])];
        for ip in fixed.iter().chain(addresses) {
            let san = SanType::IpAddress(*ip);
            if !names.contains(&san) {
                names.push(san);
            }
        }
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.subject_alt_names = names;
        params.distinguished_name = distinguished("kube-apiserver", None);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    /// etcd's serving certificate, as kubeadm's `etcd/server.crt`: `localhost`, 127.0.0.1 and
    /// every address given, for serving and for clients (etcd's own gateway dials itself).
    ///
    /// # Errors
    /// Key generation or signing failed.
    pub fn etcd_serving(&self, addresses: &[IpAddr]) -> Result<KeyedCertificate, BedError> {
        let mut names = vec![SanType::DnsName("localhost".to_string().try_into()?)];
        for ip in std::iter::once(&IpAddr::from([127, 0, 0, 1])).chain(addresses) {
            let san = SanType::IpAddress(*ip);
            if !names.contains(&san) {
                names.push(san);
            }
        }
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.subject_alt_names = names;
        params.distinguished_name = distinguished("etcd", None);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        self.sign(params)
    }

    /// A client certificate for the user `common_name` in `organization` (a group).
    ///
    /// # Errors
    /// Key generation or signing failed.
    pub fn client(
        &self,
        common_name: &str,
        organization: Option<&str>,
    ) -> Result<KeyedCertificate, BedError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = distinguished(common_name, organization);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> Result<KeyedCertificate, BedError> {
        let key = KeyPair::generate()?;
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer)?;
        Ok(KeyedCertificate {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The service-account signing key pair (`sa.key`, `sa.pub`).
#[derive(Clone)]
pub struct ServiceAccountKeys {
    /// The private key, PKCS#8 PEM. Never logged.
    pub private_pem: String,
    /// The public key, SubjectPublicKeyInfo PEM.
    pub public_pem: String,
}

impl std::fmt::Debug for ServiceAccountKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountKeys")
            .field("public_pem", &self.public_pem)
            .finish_non_exhaustive()
    }
}

impl ServiceAccountKeys {
    /// A new key pair.
    ///
    /// # Errors
    /// Key generation failed.
    pub fn mint() -> Result<ServiceAccountKeys, BedError> {
        let key = KeyPair::generate()?;
        Ok(ServiceAccountKeys {
            private_pem: key.serialize_pem(),
            public_pem: key.public_key_pem(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serving_certificate_names_every_address_once_and_the_service_names() {
        let ca = Authority::mint().unwrap();
        let node: IpAddr = [127, 0, 1, 1].into();
        let cert = ca
            .apiserver_serving(&[node, [127, 0, 0, 1].into()])
            .unwrap();
        assert!(cert.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(cert.key_pem.contains("PRIVATE KEY"));
        let debug = format!("{cert:?}");
        assert!(!debug.contains(&cert.key_pem), "a key is never printed");
    }

    #[test]
    fn the_etcd_authority_is_its_own_and_signs_serving_and_client_certificates() {
        let etcd_ca = Authority::mint_named("etcd-ca").unwrap();
        let cluster_ca = Authority::mint().unwrap();
        assert_ne!(etcd_ca.keyed.cert_pem, cluster_ca.keyed.cert_pem);
        let serving = etcd_ca.etcd_serving(&[[127, 0, 1, 253].into()]).unwrap();
        assert!(serving.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let client = etcd_ca
            .client("kube-apiserver-etcd-client", Some("system:masters"))
            .unwrap();
        assert!(client.key_pem.contains("PRIVATE KEY"));
    }

    #[test]
    fn service_account_keys_are_a_pair_of_pem_documents() {
        let keys = ServiceAccountKeys::mint().unwrap();
        assert!(keys.public_pem.contains("BEGIN PUBLIC KEY"));
        assert!(!format!("{keys:?}").contains("PRIVATE"));
    }
}
