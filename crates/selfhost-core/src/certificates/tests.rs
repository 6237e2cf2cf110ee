//! Which files a pod reads certificates from and where they are kept, and what their bytes
//! hold, on kubeadm's own layouts (static pods, DaemonSets with certificates in Secrets).

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

use super::*;
use crate::component::Component;
use crate::daemonset::{DaemonSetOptions, build_daemonset};

fn fixture(component: Component) -> Pod {
    crate::daemonset::tests::fixture(component)
}

fn static_spec(component: Component) -> PodSpec {
    fixture(component).spec.expect("a spec")
}

fn daemonset_spec(component: Component) -> PodSpec {
    let ds = build_daemonset(
        component,
        &fixture(component),
        &DaemonSetOptions {
            certs_in_secrets: true,
        },
    )
    .expect("builds");
    ds.spec
        .and_then(|s| s.template.spec)
        .expect("a template spec")
}

fn sources(files: &[CertificateFile]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|f| (f.path.clone(), f.source.to_string()))
        .collect()
}

#[test]
fn a_static_apiservers_certificates_are_files_on_the_node() {
    let files = certificate_files(
        &static_spec(Component::ApiServer),
        "kube-apiserver",
        "kube-apiserver",
    );
    let found = sources(&files);
    for file in [
        "ca.crt",
        "apiserver.crt",
        "apiserver-kubelet-client.crt",
        "etcd/ca.crt",
        "apiserver-etcd-client.crt",
        "front-proxy-client.crt",
        "front-proxy-ca.crt",
    ] {
        let path = format!("/etc/kubernetes/pki/{file}");
        assert!(
            found.contains(&(path.clone(), format!("{path} on the node"))),
            "{file} in {found:?}"
        );
    }
    // The CA is named by one flag; a key file never is a certificate file.
    assert!(files.iter().all(|f| !f.path.ends_with(".key")), "{found:?}");
    let ca = files
        .iter()
        .find(|f| f.path == "/etc/kubernetes/pki/ca.crt")
        .expect("the CA");
    assert_eq!(ca.used_by, vec!["kube-apiserver --client-ca-file"]);
}

#[test]
fn with_certificates_in_secrets_each_file_is_a_key_of_its_secret() {
    let files = certificate_files(
        &daemonset_spec(Component::ApiServer),
        "kube-apiserver",
        "kube-apiserver",
    );
    let found = sources(&files);
    assert!(
        found.contains(&(
            "/etc/kubernetes/pki/apiserver-etcd-client.crt".into(),
            "Secret kube-system/apiserver-etcd-client key tls.crt".into()
        )),
        "{found:?}"
    );
    assert!(
        found.contains(&(
            "/etc/kubernetes/pki/etcd/ca.crt".into(),
            "Secret kube-system/etcd-ca key tls.crt".into()
        )),
        "{found:?}"
    );
}

#[test]
fn a_controller_managers_kubeconfig_comes_from_its_secret_or_the_node() {
    let files = certificate_files(
        &daemonset_spec(Component::ControllerManager),
        "kube-controller-manager",
        "kube-controller-manager",
    );
    let kubeconfig = files
        .iter()
        .find(|f| f.kind == FileKind::Kubeconfig)
        .expect("a kubeconfig");
    assert_eq!(
        kubeconfig.source,
        CertificateSource::Secret {
            name: "controller-manager.conf".into(),
            key: "controller-manager.conf".into()
        },
        "{files:?}"
    );
    // --kubeconfig, --authentication-kubeconfig and --authorization-kubeconfig: one file.
    assert_eq!(kubeconfig.used_by.len(), 3, "{:?}", kubeconfig.used_by);

    let on_node = certificate_files(
        &static_spec(Component::ControllerManager),
        "kube-controller-manager",
        "kube-controller-manager",
    );
    let kubeconfig = on_node
        .iter()
        .find(|f| f.kind == FileKind::Kubeconfig)
        .expect("a kubeconfig");
    assert_eq!(
        kubeconfig.source,
        CertificateSource::HostFile {
            path: "/etc/kubernetes/controller-manager.conf".into()
        }
    );
}

#[test]
fn a_file_on_no_volume_is_unmounted_and_readers_merge_by_where_a_file_is_kept() {
    let mut spec = static_spec(Component::Scheduler);
    spec.containers[0]
        .command
        .get_or_insert_with(Vec::new)
        .push("--client-ca-file=/opt/ca.crt".into());
    let files = certificate_files(&spec, "kube-scheduler", "kube-scheduler");
    let opt = files
        .iter()
        .find(|f| f.path == "/opt/ca.crt")
        .expect("the flag's file");
    assert_eq!(opt.source, CertificateSource::Unmounted);

    let apiserver = certificate_files(
        &static_spec(Component::ApiServer),
        "kube-apiserver",
        "kube-apiserver",
    );
    let manager = certificate_files(
        &static_spec(Component::ControllerManager),
        "kube-controller-manager",
        "kube-controller-manager",
    );
    let merged = merge_readers(apiserver.into_iter().chain(manager).collect());
    let ca = merged
        .iter()
        .find(|f| f.path == "/etc/kubernetes/pki/ca.crt")
        .expect("the CA");
    assert!(
        ca.used_by
            .contains(&"kube-controller-manager --root-ca-file".to_string())
            && ca
                .used_by
                .contains(&"kube-apiserver --client-ca-file".to_string()),
        "{:?}",
        ca.used_by
    );
    assert_eq!(
        merged
            .iter()
            .filter(|f| f.path == "/etc/kubernetes/pki/ca.crt")
            .count(),
        1
    );
}

/// A certificate valid from `from` to `until` (seconds since the epoch), PEM.
fn pem(name: &str, from: i64, until: i64, ca: bool) -> (String, KeyPair) {
    let key = KeyPair::generate().expect("a key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.not_before =
        rcgen::date_time_ymd(1970, 1, 1) + std::time::Duration::from_secs(from as u64);
    params.not_after =
        rcgen::date_time_ymd(1970, 1, 1) + std::time::Duration::from_secs(until as u64);
    if ca {
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    }
    let cert = params.self_signed(&key).expect("signed");
    (cert.pem(), key)
}

const T0: i64 = 1_800_000_000;
const DAY: i64 = 24 * 3600;

#[test]
fn pem_files_give_their_certificates_and_skip_keys_unparsed() {
    let (a, key) = pem("kube-apiserver", T0, T0 + 365 * DAY, false);
    let (b, _) = pem("kubernetes", T0, T0 + 3650 * DAY, true);
    let bundle = format!("{a}{}{b}", key.serialize_pem());
    let read = read_certificates(bundle.as_bytes()).expect("read");
    assert_eq!(read.len(), 2);
    assert_eq!(read[0].subject, "CN=kube-apiserver");
    assert!(!read[0].ca && read[1].ca);
    assert_eq!(read[0].not_before.as_second(), T0);
    assert_eq!(read[0].not_after.as_second(), T0 + 365 * DAY);

    for (bytes, error) in [
        (key.serialize_pem(), "holds no PEM certificate"),
        ("not a certificate".to_string(), "holds no PEM certificate"),
        (
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_string(),
            "PEM block 1 is not an X.509 certificate",
        ),
    ] {
        let err = read_certificates(bytes.as_bytes()).expect_err("refused");
        assert_eq!(err, error);
        assert!(!err.contains("PRIVATE"), "no content quoted: {err}");
    }
}

fn kubeconfig(cert: Option<&str>) -> String {
    let user = match cert {
        Some(pem) => format!(
            "client-certificate-data: {}\n      client-key-data: c2VjcmV0",
            serde_json::to_value(k8s_openapi::ByteString(pem.as_bytes().to_vec()))
                .expect("base64")
                .as_str()
                .expect("a string")
        ),
        None => "token: abc".into(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nusers:\n  - name: system:kube-scheduler\n    user:\n      {user}\n"
    )
}

#[test]
fn kubeconfigs_give_their_embedded_client_certificates_only() {
    let (cert, _) = pem("system:kube-scheduler", T0, T0 + DAY, false);
    let read = read_kubeconfig_certificates(kubeconfig(Some(&cert)).as_bytes()).expect("read");
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].subject, "CN=system:kube-scheduler");

    let err = read_kubeconfig_certificates(kubeconfig(None).as_bytes()).expect_err("none");
    assert_eq!(
        err,
        "embeds no client certificate (client-certificate-data)"
    );
    let bad = "users:\n  - name: u\n    user:\n      client-certificate-data: '%%%'\n";
    let err = read_kubeconfig_certificates(bad.as_bytes()).expect_err("bad base64");
    assert_eq!(err, "user u: client-certificate-data is not base64");
    let err = read_kubeconfig_certificates(b"\xff\xfe").expect_err("binary");
    assert_eq!(err, "is not UTF-8 text");
}
