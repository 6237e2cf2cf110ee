//! The files a node needs when certificates are mounted from Secrets.

use super::kubeadm_pod;
use crate::component::Component;
use crate::conversion::{SecretFile, secret_files, self_hosted_daemonset};
use crate::daemonset::DaemonSetOptions;

#[test]
fn files_from_secrets_are_listed_with_private_keys_0600() {
    let options = DaemonSetOptions {
        certs_in_secrets: true,
    };
    let files = |component| {
        let pod = kubeadm_pod(component, 33, vec![]);
        let ds = self_hosted_daemonset(component, &pod, &options).expect("ds");
        secret_files(ds.spec.expect("spec").template.spec.as_ref().expect("spec"))
    };
    let apiserver = files(Component::ApiServer);
    let find = |files: &[SecretFile], path: &str| {
        files
            .iter()
            .find(|f| f.path == path)
            .cloned()
            .unwrap_or_else(|| panic!("{path} in {files:?}"))
    };
    let key = find(&apiserver, "/etc/kubernetes/pki/apiserver-etcd-client.key");
    assert_eq!(
        (key.secret.as_str(), key.key.as_str(), key.mode),
        ("apiserver-etcd-client", "tls.key", 0o600)
    );
    let ca = find(&apiserver, "/etc/kubernetes/pki/etcd/ca.crt");
    assert_eq!((ca.secret.as_str(), ca.mode), ("etcd-ca", 0o644));
    let scheduler = files(Component::Scheduler);
    assert_eq!(
        scheduler,
        vec![SecretFile {
            secret: "scheduler.conf".into(),
            key: "scheduler.conf".into(),
            path: "/etc/kubernetes/scheduler.conf".into(),
            mode: 0o600,
        }]
    );
    let without = self_hosted_daemonset(
        Component::ApiServer,
        &kubeadm_pod(Component::ApiServer, 33, vec![]),
        &DaemonSetOptions::default(),
    )
    .expect("ds");
    assert!(
        secret_files(
            without
                .spec
                .expect("spec")
                .template
                .spec
                .as_ref()
                .expect("spec")
        )
        .is_empty()
    );
}
