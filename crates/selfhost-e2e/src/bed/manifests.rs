//! The static pod manifests a kubeadm v1.20 `init`/`join --control-plane` writes, for one node
//! of the bed: the same flags, probes, volumes and labels, with what several nodes on one
//! machine need on top (each node binds its own loopback address). etcd is reached as kubeadm
//! reaches it: over TLS, with etcd's own CA and the kube-apiserver's etcd client certificate.

use std::net::IpAddr;

use serde_json::{Value, json};

/// Where the manifests, certificates and kubeconfigs are on a node (inside its root).
pub const KUBERNETES_DIR: &str = "/etc/kubernetes";
/// The certificates' directory.
pub const PKI_DIR: &str = "/etc/kubernetes/pki";
/// etcd's CA certificate on a node (kubeadm's path).
pub const ETCD_CA: &str = "/etc/kubernetes/pki/etcd/ca.crt";
/// The kube-apiserver's client certificate for etcd on a node (kubeadm's path).
pub const ETCD_CLIENT_CERT: &str = "/etc/kubernetes/pki/apiserver-etcd-client.crt";
/// Its key.
pub const ETCD_CLIENT_KEY: &str = "/etc/kubernetes/pki/apiserver-etcd-client.key";
/// The kube-apiserver's secure port.
pub const APISERVER_PORT: u16 = 6443;
/// The image repository of kubeadm v1.20.
pub const IMAGE_REPOSITORY: &str = "k8s.gcr.io";

/// What one node's control-plane manifests depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeManifestInput {
    /// The node's address (bind, advertise and probe address of every component).
    pub address: IpAddr,
    /// The image tag.
    pub tag: String,
    /// etcd's client URL (`https://…`).
    pub etcd_url: String,
}

fn host_path(name: &str, path: &str, kind: &str) -> Value {
    json!({"name": name, "hostPath": {"path": path, "type": kind}})
}

fn mount(name: &str, path: &str) -> Value {
    json!({"name": name, "mountPath": path, "readOnly": true})
}

fn https_probe(address: IpAddr, port: u16, path: &str, extra: Value) -> Value {
    let mut probe = json!({
        "httpGet": {"host": address.to_string(), "path": path, "port": port, "scheme": "HTTPS"},
        "timeoutSeconds": 15,
        "failureThreshold": 8,
        "initialDelaySeconds": 10,
        "periodSeconds": 10,
    });
    if let (Some(probe), Some(extra)) = (probe.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            probe.insert(k.clone(), v.clone());
        }
    }
    probe
}

fn static_pod(component: &str, input: &NodeManifestInput, pod: Value) -> Value {
    let mut manifest = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": component,
            "namespace": "kube-system",
            "labels": {"component": component, "tier": "control-plane"},
        },
        "spec": {
            "hostNetwork": true,
            "priorityClassName": "system-node-critical",
            "containers": [{
                "name": component,
                "image": format!("{IMAGE_REPOSITORY}/{component}:{}", input.tag),
                "imagePullPolicy": "IfNotPresent",
                "resources": {"requests": {"cpu": pod["cpu"].clone()}},
                "command": pod["command"].clone(),
                "livenessProbe": pod["liveness"].clone(),
                "startupProbe": pod["startup"].clone(),
                "volumeMounts": pod["mounts"].clone(),
            }],
            "volumes": pod["volumes"].clone(),
        },
        "status": {},
    });
    if let Some(readiness) = pod.get("readiness") {
        manifest["spec"]["containers"][0]["readinessProbe"] = readiness.clone();
    }
    if let Some(annotations) = pod.get("annotations") {
        manifest["metadata"]["annotations"] = annotations.clone();
    }
    manifest
}

/// kube-apiserver's manifest.
pub fn apiserver(input: &NodeManifestInput) -> Value {
    let a = input.address;
    let pki = |file: &str| format!("{PKI_DIR}/{file}");
    let command = vec![
        "kube-apiserver".to_string(),
        format!("--advertise-address={a}"),
        "--allow-privileged=true".into(),
        "--authorization-mode=Node,RBAC".into(),
        format!("--bind-address={a}"),
        format!("--client-ca-file={}", pki("ca.crt")),
        "--enable-admission-plugins=NodeRestriction".into(),
        "--enable-bootstrap-token-auth=true".into(),
        format!("--etcd-cafile={ETCD_CA}"),
        format!("--etcd-certfile={ETCD_CLIENT_CERT}"),
        format!("--etcd-keyfile={ETCD_CLIENT_KEY}"),
        format!("--etcd-servers={}", input.etcd_url),
        "--insecure-port=0".into(),
        format!("--secure-port={APISERVER_PORT}"),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
        format!("--service-account-key-file={}", pki("sa.pub")),
        format!("--service-account-signing-key-file={}", pki("sa.key")),
        "--service-cluster-ip-range=10.96.0.0/12".into(),
        format!("--tls-cert-file={}", pki("apiserver.crt")),
        format!("--tls-private-key-file={}", pki("apiserver.key")),
    ];
    static_pod(
        "kube-apiserver",
        input,
        json!({
            "cpu": "250m",
            "command": command,
            "annotations": {
                "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint":
                    format!("{a}:{APISERVER_PORT}"),
            },
            "liveness": https_probe(a, APISERVER_PORT, "/livez", json!({})),
            "readiness": https_probe(a, APISERVER_PORT, "/readyz",
                json!({"failureThreshold": 3, "periodSeconds": 1, "initialDelaySeconds": 0})),
            "startup": https_probe(a, APISERVER_PORT, "/livez", json!({"failureThreshold": 24})),
            "mounts": [mount("ca-certs", "/etc/ssl/certs"), mount("k8s-certs", PKI_DIR)],
            "volumes": [
                host_path("ca-certs", "/etc/ssl/certs", "DirectoryOrCreate"),
                host_path("k8s-certs", PKI_DIR, "DirectoryOrCreate"),
            ],
        }),
    )
}

/// kube-controller-manager's manifest.
pub fn controller_manager(input: &NodeManifestInput) -> Value {
    let a = input.address;
    let conf = format!("{KUBERNETES_DIR}/controller-manager.conf");
    let pki = |file: &str| format!("{PKI_DIR}/{file}");
    let command = vec![
        "kube-controller-manager".to_string(),
        format!("--authentication-kubeconfig={conf}"),
        format!("--authorization-kubeconfig={conf}"),
        format!("--bind-address={a}"),
        format!("--client-ca-file={}", pki("ca.crt")),
        "--cluster-name=kubernetes".into(),
        format!("--cluster-signing-cert-file={}", pki("ca.crt")),
        format!("--cluster-signing-key-file={}", pki("ca.key")),
        "--controllers=*,bootstrapsigner,tokencleaner".into(),
        format!("--kubeconfig={conf}"),
        "--leader-elect=true".into(),
        "--port=0".into(),
        format!("--root-ca-file={}", pki("ca.crt")),
        format!("--service-account-private-key-file={}", pki("sa.key")),
        "--use-service-account-credentials=true".into(),
    ];
    let probe = |extra| https_probe(a, 10257, "/healthz", extra);
    static_pod(
        "kube-controller-manager",
        input,
        json!({
            "cpu": "200m",
            "command": command,
            "liveness": probe(json!({})),
            "startup": probe(json!({"failureThreshold": 24})),
            "mounts": [
                mount("ca-certs", "/etc/ssl/certs"),
                mount("k8s-certs", PKI_DIR),
                mount("kubeconfig", &conf),
            ],
            "volumes": [
                host_path("ca-certs", "/etc/ssl/certs", "DirectoryOrCreate"),
                host_path("k8s-certs", PKI_DIR, "DirectoryOrCreate"),
                host_path("kubeconfig", &conf, "FileOrCreate"),
            ],
        }),
    )
}

/// kube-scheduler's manifest.
pub fn scheduler(input: &NodeManifestInput) -> Value {
    let a = input.address;
    let conf = format!("{KUBERNETES_DIR}/scheduler.conf");
    let command = vec![
        "kube-scheduler".to_string(),
        format!("--authentication-kubeconfig={conf}"),
        format!("--authorization-kubeconfig={conf}"),
        format!("--bind-address={a}"),
        format!("--kubeconfig={conf}"),
        "--leader-elect=true".into(),
        "--port=0".into(),
    ];
    let probe = |extra| https_probe(a, 10259, "/healthz", extra);
    static_pod(
        "kube-scheduler",
        input,
        json!({
            "cpu": "100m",
            "command": command,
            "liveness": probe(json!({})),
            "startup": probe(json!({"failureThreshold": 24})),
            "mounts": [mount("kubeconfig", &conf)],
            "volumes": [host_path("kubeconfig", &conf, "FileOrCreate")],
        }),
    )
}

/// The three manifests with their kubeadm file names.
pub fn control_plane(input: &NodeManifestInput) -> [(&'static str, Value); 3] {
    [
        ("kube-apiserver.yaml", apiserver(input)),
        ("kube-controller-manager.yaml", controller_manager(input)),
        ("kube-scheduler.yaml", scheduler(input)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> NodeManifestInput {
        NodeManifestInput {
            address: [127, 0, 1, 2].into(),
            tag: "v1.20.2".into(),
            etcd_url: "https://127.0.0.1:2379".into(),
        }
    }

    fn command(pod: &Value) -> Vec<String> {
        serde_json::from_value(pod["spec"]["containers"][0]["command"].clone()).unwrap()
    }

    #[test]
    fn every_component_binds_and_is_probed_on_its_nodes_own_address() {
        for (file, pod) in control_plane(&input()) {
            let name = pod["metadata"]["name"].as_str().unwrap();
            assert_eq!(file, format!("{name}.yaml"));
            assert!(
                command(&pod).contains(&"--bind-address=127.0.1.2".to_string()),
                "{name}"
            );
            let probe = &pod["spec"]["containers"][0]["livenessProbe"]["httpGet"];
            assert_eq!(probe["host"], "127.0.1.2", "{name}");
            assert_eq!(probe["scheme"], "HTTPS", "{name}");
            assert_eq!(
                pod["spec"]["containers"][0]["image"],
                format!("k8s.gcr.io/{name}:v1.20.2")
            );
        }
    }

    #[test]
    fn like_kubeadm_no_component_permits_port_sharing_before_conversion() {
        for (_, pod) in control_plane(&input()) {
            assert!(
                !command(&pod)
                    .iter()
                    .any(|f| f.contains("permit-port-sharing"))
            );
        }
    }

    #[test]
    fn the_apiserver_is_ready_only_when_it_serves_readyz_every_second() {
        let pod = apiserver(&input());
        let readiness = &pod["spec"]["containers"][0]["readinessProbe"];
        assert_eq!(readiness["httpGet"]["path"], "/readyz");
        assert_eq!(readiness["periodSeconds"], 1);
    }

    #[test]
    fn like_kubeadms_the_apiserver_reaches_etcd_over_tls_with_files_its_pki_mount_holds() {
        let pod = apiserver(&input());
        let command = command(&pod);
        for flag in [
            "--etcd-servers=https://127.0.0.1:2379".to_string(),
            format!("--etcd-cafile={ETCD_CA}"),
            format!("--etcd-certfile={ETCD_CLIENT_CERT}"),
            format!("--etcd-keyfile={ETCD_CLIENT_KEY}"),
        ] {
            assert!(command.contains(&flag), "{flag}: {command:?}");
        }
        let mounts = &pod["spec"]["containers"][0]["volumeMounts"];
        for file in [ETCD_CA, ETCD_CLIENT_CERT, ETCD_CLIENT_KEY] {
            assert!(
                mounts
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|m| file.starts_with(&format!("{}/", m["mountPath"].as_str().unwrap()))),
                "{file} is in a mounted directory: {mounts}"
            );
        }
    }
}
