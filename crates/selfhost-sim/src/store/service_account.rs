//! The ServiceAccount admission of a real API server, for pods it creates: a pod that names no
//! service account gets `default`, and unless it opts out (`automountServiceAccountToken:
//! false`) its containers get the account's token, a projected volume `kube-api-access-…`
//! mounted at `/var/run/secrets/kubernetes.io/serviceaccount`, as v1.22 and later add it.
//! Mirror pods (a kubelet's static pods) get nothing: a static pod may not use a service
//! account.

use serde_json::{Value, json};

use super::meta;

/// Where the token is mounted in every container.
pub(crate) const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The annotation a kubelet puts on the mirror pod of a static pod.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Admits a new pod as the ServiceAccount admission does.
pub(crate) fn admit_pod(pod: &mut Value) {
    if pod["metadata"]["annotations"][MIRROR_ANNOTATION].is_string() {
        return;
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let account = match spec.get("serviceAccountName").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => "default".to_string(),
    };
    spec.insert("serviceAccountName".into(), json!(account));
    spec.insert("serviceAccount".into(), json!(account));
    if spec.get("automountServiceAccountToken") == Some(&json!(false)) {
        return;
    }
    let name = format!("kube-api-access-{}", meta::generated_suffix());
    let volume = json!({
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    });
    let mut mounted = false;
    for list in ["containers", "initContainers"] {
        for container in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let mounts = container
                .as_object_mut()
                .map(|c| c.entry("volumeMounts").or_insert_with(|| json!([])));
            let Some(mounts) = mounts.and_then(Value::as_array_mut) else {
                continue;
            };
            // A container that mounts something at the token's path keeps its own.
            if mounts.iter().any(|m| m["mountPath"] == TOKEN_MOUNT_PATH) {
                continue;
            }
            mounts.push(json!({"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH}));
            mounted = true;
        }
    }
    if mounted {
        let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
        if let Some(volumes) = volumes.as_array_mut() {
            volumes.push(volume);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_gets_the_default_account_and_its_token_a_mirror_pod_nothing() {
        let mut pod = json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c"}, {"name": "d", "volumeMounts": []}]},
        });
        admit_pod(&mut pod);
        assert_eq!(pod["spec"]["serviceAccountName"], "default");
        let volume = &pod["spec"]["volumes"][0];
        let name = volume["name"].as_str().unwrap_or_default();
        assert!(name.starts_with("kube-api-access-"), "{volume}");
        for container in pod["spec"]["containers"].as_array().into_iter().flatten() {
            assert_eq!(container["volumeMounts"][0]["name"], name);
            assert_eq!(container["volumeMounts"][0]["mountPath"], TOKEN_MOUNT_PATH);
        }

        let mut opted_out =
            json!({"spec": {"automountServiceAccountToken": false, "containers": [{"name": "c"}]}});
        admit_pod(&mut opted_out);
        assert!(opted_out["spec"]["volumes"].is_null());

        let mut mirror = json!({
            "metadata": {"annotations": {MIRROR_ANNOTATION: "abc"}},
            "spec": {"containers": [{"name": "c"}]},
        });
        let before = mirror.clone();
        admit_pod(&mut mirror);
        assert_eq!(mirror, before);
    }
}
