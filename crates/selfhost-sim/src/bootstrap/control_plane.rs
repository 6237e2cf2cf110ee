//! kubeadm-like control-plane templates, written for the simulator alone.

use serde_json::{Value, json};

/// The control-plane components, in kubeadm's order.
pub const COMPONENTS: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

const PKI: &str = "/etc/kubernetes/pki";

/// The secure port a component serves on (its `--secure-port` default).
pub fn secure_port(component: &str) -> u16 {
    match component {
        "kube-apiserver" => 6443,
        "kube-controller-manager" => 10257,
        _ => 10259,
    }
}

/// Name of the mirror pod a kubelet publishes for a static pod.
pub fn mirror_name(component: &str, node: &str) -> String {
    format!("{component}-{node}")
}

fn flags(component: &str, advertise: &str, port_sharing: bool) -> Vec<String> {
    let cm_conf = "/etc/kubernetes/controller-manager.conf";
    let sched_conf = "/etc/kubernetes/scheduler.conf";
    let mut flags: Vec<String> = match component {
        "kube-apiserver" => vec![
            format!("advertise-address={advertise}"),
            "allow-privileged=true".into(),
            "authorization-mode=Node,RBAC".into(),
            format!("client-ca-file={PKI}/ca.crt"),
            "enable-admission-plugins=NodeRestriction".into(),
            "enable-bootstrap-token-auth=true".into(),
            format!("etcd-cafile={PKI}/etcd/ca.crt"),
            format!("etcd-certfile={PKI}/apiserver-etcd-client.crt"),
            format!("etcd-keyfile={PKI}/apiserver-etcd-client.key"),
            "etcd-servers=https://127.0.0.1:2379".into(),
            format!("kubelet-client-certificate={PKI}/apiserver-kubelet-client.crt"),
            format!("kubelet-client-key={PKI}/apiserver-kubelet-client.key"),
            "kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname".into(),
            format!("proxy-client-cert-file={PKI}/front-proxy-client.crt"),
            format!("proxy-client-key-file={PKI}/front-proxy-client.key"),
            "requestheader-allowed-names=front-proxy-client".into(),
            format!("requestheader-client-ca-file={PKI}/front-proxy-ca.crt"),
            "requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
            "requestheader-group-headers=X-Remote-Group".into(),
            "requestheader-username-headers=X-Remote-User".into(),
            "secure-port=6443".into(),
            "service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("service-account-key-file={PKI}/sa.pub"),
            format!("service-account-signing-key-file={PKI}/sa.key"),
            "service-cluster-ip-range=10.96.0.0/12".into(),
            format!("tls-cert-file={PKI}/apiserver.crt"),
            format!("tls-private-key-file={PKI}/apiserver.key"),
        ],
        "kube-controller-manager" => vec![
            format!("authentication-kubeconfig={cm_conf}"),
            format!("authorization-kubeconfig={cm_conf}"),
            "bind-address=127.0.0.1".into(),
            format!("client-ca-file={PKI}/ca.crt"),
            "cluster-name=kubernetes".into(),
            format!("cluster-signing-cert-file={PKI}/ca.crt"),
            format!("cluster-signing-key-file={PKI}/ca.key"),
            "controllers=*,bootstrapsigner,tokencleaner".into(),
            format!("kubeconfig={cm_conf}"),
            "leader-elect=true".into(),
            format!("requestheader-client-ca-file={PKI}/front-proxy-ca.crt"),
            format!("root-ca-file={PKI}/ca.crt"),
            format!("service-account-private-key-file={PKI}/sa.key"),
            "use-service-account-credentials=true".into(),
        ],
        _ => vec![
            format!("authentication-kubeconfig={sched_conf}"),
            format!("authorization-kubeconfig={sched_conf}"),
            "bind-address=127.0.0.1".into(),
            format!("kubeconfig={sched_conf}"),
            "leader-elect=true".into(),
        ],
    };
    if port_sharing {
        flags.push("permit-port-sharing=true".into());
    }
    flags.sort();
    std::iter::once(component.to_string())
        .chain(flags.into_iter().map(|f| format!("--{f}")))
        .collect()
}

/// (name, host path, type, read-only) of each host-path volume, sorted by name.
fn volumes(component: &str) -> Vec<(&'static str, &'static str, &'static str, bool)> {
    let trust = [
        ("ca-certs", "/etc/ssl/certs", "DirectoryOrCreate", true),
        (
            "etc-ca-certificates",
            "/etc/ca-certificates",
            "DirectoryOrCreate",
            true,
        ),
        (
            "usr-local-share-ca-certificates",
            "/usr/local/share/ca-certificates",
            "DirectoryOrCreate",
            true,
        ),
        (
            "usr-share-ca-certificates",
            "/usr/share/ca-certificates",
            "DirectoryOrCreate",
            true,
        ),
    ];
    let certs = ("k8s-certs", PKI, "DirectoryOrCreate", true);
    let mut out = match component {
        "kube-apiserver" => [trust.as_slice(), &[certs]].concat(),
        "kube-controller-manager" => [
            trust.as_slice(),
            &[
                certs,
                (
                    "flexvolume-dir",
                    "/usr/libexec/kubernetes/kubelet-plugins/volume/exec",
                    "DirectoryOrCreate",
                    false,
                ),
                (
                    "kubeconfig",
                    "/etc/kubernetes/controller-manager.conf",
                    "FileOrCreate",
                    true,
                ),
            ],
        ]
        .concat(),
        _ => vec![(
            "kubeconfig",
            "/etc/kubernetes/scheduler.conf",
            "FileOrCreate",
            true,
        )],
    };
    out.sort_by_key(|v| v.0);
    out
}

fn probe(
    component: &str,
    path: &str,
    host: &str,
    period: u32,
    failures: u32,
    delay: Option<u32>,
) -> Value {
    let mut probe = json!({
        "failureThreshold": failures,
        "httpGet": { "host": host, "path": path, "port": secure_port(component), "scheme": "HTTPS" },
        "periodSeconds": period,
        "timeoutSeconds": 15,
    });
    if let Some(delay) = delay {
        probe["initialDelaySeconds"] = json!(delay);
    }
    probe
}

fn pod_spec(
    component: &str,
    version: &str,
    repository: &str,
    advertise: &str,
    probe_host: &str,
    port_sharing: bool,
) -> Value {
    let vols = volumes(component);
    let (health, cpu) = match component {
        "kube-apiserver" => ("/livez", "250m"),
        "kube-controller-manager" => ("/healthz", "200m"),
        _ => ("/healthz", "100m"),
    };
    let mut container = json!({
        "name": component,
        "image": format!("{repository}/{component}:{version}"),
        "imagePullPolicy": "IfNotPresent",
        "command": flags(component, advertise, port_sharing),
        "livenessProbe": probe(component, health, probe_host, 10, 8, Some(10)),
        "startupProbe": probe(component, health, probe_host, 10, 24, Some(10)),
        "resources": { "requests": { "cpu": cpu } },
        "volumeMounts": vols.iter().map(|(name, path, _, ro)| {
            let mut m = json!({ "mountPath": path, "name": name });
            if *ro { m["readOnly"] = json!(true); }
            m
        }).collect::<Vec<_>>(),
    });
    if component == "kube-apiserver" {
        container["readinessProbe"] = probe(component, "/readyz", probe_host, 1, 3, None);
    }
    json!({
        "containers": [container],
        "hostNetwork": true,
        "priorityClassName": "system-node-critical",
        "securityContext": { "seccompProfile": { "type": "RuntimeDefault" } },
        "volumes": vols.iter().map(|(name, path, kind, _)| json!({
            "hostPath": { "path": path, "type": kind }, "name": name,
        })).collect::<Vec<_>>(),
    })
}

/// The static pod kubeadm writes to `/etc/kubernetes/manifests/<component>.yaml` on the node
/// with IP `node_ip`, for image tag `version` (e.g. `v1.33.1`).
pub fn static_pod(component: &str, version: &str, node_ip: &str, port_sharing: bool) -> Value {
    let probe_host = if component == "kube-apiserver" {
        node_ip
    } else {
        "127.0.0.1"
    };
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": component,
            "namespace": "kube-system",
            "labels": { "component": component, "tier": "control-plane" },
        },
        "spec": pod_spec(component, version, "registry.k8s.io", node_ip, probe_host, port_sharing),
    });
    if component == "kube-apiserver" {
        pod["metadata"]["annotations"] = json!({ "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint": format!("{node_ip}:6443") });
    }
    pod
}

/// The `self-hosted-<component>` DaemonSet, as `selfhost manifests --as daemonsets` renders it
/// for a default kubeadm configuration.
pub fn daemonset(component: &str, version: &str, port_sharing: bool) -> Value {
    let app = format!("self-hosted-{component}");
    let mut spec = pod_spec(
        component,
        version,
        "registry.k8s.io",
        "$(HOST_IP)",
        "127.0.0.1",
        port_sharing,
    );
    if component == "kube-apiserver" {
        // selfhost's apiservers leave gracefully: serving for 5 s with /readyz failing, then
        // answering 429 with Retry-After while they drain (see selfhost's daemonset mutators).
        if let Some(command) = spec["containers"][0]["command"].as_array_mut() {
            command.push(json!("--shutdown-delay-duration=5s"));
            command.push(json!("--shutdown-send-retry-after=true"));
            let binary = command.remove(0);
            command.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            command.insert(0, binary);
        }
        spec["terminationGracePeriodSeconds"] = json!(30);
        spec["containers"][0]["env"] = json!([{
            "name": "HOST_IP",
            "valueFrom": { "fieldRef": { "apiVersion": "v1", "fieldPath": "status.hostIP" } },
        }]);
    }
    if component == "kube-controller-manager" || component == "kube-scheduler" {
        // selfhost's leaders hand over promptly: a standby retries every 500 ms (see
        // selfhost's leader-election mutator); Lease and renew deadline stay at the defaults.
        if let Some(command) = spec["containers"][0]["command"].as_array_mut() {
            command.push(json!("--leader-elect-lease-duration=15s"));
            command.push(json!("--leader-elect-renew-deadline=10s"));
            command.push(json!("--leader-elect-retry-period=500ms"));
            let binary = command.remove(0);
            // By flag name, as selfhost orders them (`--leader-elect` before its siblings).
            let name = |w: &Value| {
                w.as_str()
                    .map(|w| w.split('=').next().unwrap_or(w).to_owned())
            };
            command.sort_by_key(name);
            command.insert(0, binary);
        }
    }
    spec["dnsPolicy"] = json!("ClusterFirstWithHostNet");
    spec["nodeSelector"] = json!({ "node-role.kubernetes.io/control-plane": "" });
    spec["tolerations"] = json!([
        { "effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane", "operator": "Exists" },
        { "effect": "NoSchedule", "key": "node-role.kubernetes.io/master", "operator": "Exists" },
    ]);
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": { "name": app, "namespace": "kube-system", "labels": { "k8s-app": app } },
        "spec": {
            "revisionHistoryLimit": 10,
            "selector": { "matchLabels": { "k8s-app": app } },
            "template": {
                "metadata": { "labels": { "component": component, "k8s-app": app, "tier": "control-plane" } },
                "spec": spec,
            },
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": { "maxSurge": 0, "maxUnavailable": 1 },
            },
        },
    })
}

/// `kube-system/kubeadm-config`, as `kubeadm init` uploads it.
pub fn kubeadm_config_map(version: &str) -> Value {
    let config = format!(
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: {version}\n\
         clusterName: kubernetes\ncertificatesDir: /etc/kubernetes/pki\nimageRepository: registry.k8s.io\n\
         networking:\n  dnsDomain: cluster.local\n  serviceSubnet: 10.96.0.0/12\n\
         etcd:\n  local:\n    dataDir: /var/lib/etcd\n"
    );
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": "kubeadm-config", "namespace": "kube-system" },
        "data": { "ClusterConfiguration": config },
    })
}
