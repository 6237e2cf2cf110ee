//! Reading a static pod manifest as the kubelet reads it.

use super::kubeadm_pod;
use crate::component::Component;
use crate::conversion::parse_manifest;

#[test]
fn manifests_are_read_as_the_kubelet_reads_them() {
    let pod = kubeadm_pod(Component::ApiServer, 33, vec![]);
    let yaml = crate::render::to_yaml(&pod).expect("yaml");
    assert_eq!(parse_manifest(&yaml), Ok(pod));
    let rows = [
        (
            "apiVersion: apps/v1\nkind: Deployment\n",
            "found apiVersion \"apps/v1\" and kind \"Deployment\"",
        ),
        ("just text", "found apiVersion \"\""),
        ("{ not: [yaml", "not YAML"),
        ("apiVersion: v1\nkind: Pod\nspec: 3\n", "not a valid Pod"),
    ];
    for (text, expected) in rows {
        let err = parse_manifest(text).expect_err(text).to_string();
        assert!(err.contains(expected), "{text:?}: {err}");
    }
}
