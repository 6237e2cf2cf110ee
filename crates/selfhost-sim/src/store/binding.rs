//! `pods/binding`: how a scheduler assigns a pending pod to a node. A pod update may never
//! change `spec.nodeName`, so binding is a write of its own, as in the real registry: it sets
//! the node once, records `PodScheduled=True`, and refuses pods that are bound or being deleted.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Store, meta};
use crate::error::ApiError;
use crate::resources::PODS;

impl Store {
    /// Binds the pod `namespace/name` to `node`. `uid`, when given, must be the pod's (a pod
    /// recreated under the same name is not bound by mistake).
    ///
    /// # Errors
    /// 404 for a missing pod; 409 for another uid, a pod being deleted or already bound.
    pub fn bind_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
        node: &str,
    ) -> Result<Arc<Value>, ApiError> {
        self.mutate(|s| {
            let current = s
                .get(&PODS, namespace, name)
                .cloned()
                .ok_or_else(|| ApiError::not_found(&PODS, name))?;
            if let Some(uid) = uid
                && uid != meta::uid(&current)
            {
                let why = format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta::uid(&current)
                );
                return Err(ApiError::conflict(&PODS, name, &why));
            }
            if meta::deletion_timestamp(&current).is_some() {
                let why = format!("pod {name} is being deleted, cannot be assigned to a host");
                return Err(ApiError::conflict(&PODS, name, &why));
            }
            let bound = current["spec"]["nodeName"].as_str().unwrap_or_default();
            if !bound.is_empty() {
                let why = format!("pod {name} is already assigned to node \"{bound}\"");
                return Err(ApiError::conflict(&PODS, name, &why));
            }
            let mut pod = (*current).clone();
            pod["spec"]["nodeName"] = json!(node);
            let scheduled = json!({
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": null,
                "lastTransitionTime": meta::now(),
            });
            let status = pod
                .as_object_mut()
                .map(|o| o.entry("status").or_insert_with(|| json!({})));
            if let Some(status) = status {
                if !status.is_object() {
                    *status = json!({});
                }
                let conditions = &mut status["conditions"];
                if !conditions.is_array() {
                    *conditions = json!([]);
                }
                if let Some(list) = conditions.as_array_mut() {
                    list.retain(|c| c["type"] != "PodScheduled");
                    list.insert(0, scheduled);
                }
            }
            Ok(s.commit(PODS, namespace, name, Some(pod)).object.clone())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{StoreOptions, WriteOptions};

    fn store_with_pod() -> (Store, String) {
        let store = Store::new(StoreOptions::default());
        let pod = json!({
            "metadata": { "name": "p" },
            "spec": { "containers": [{ "name": "c", "image": "registry.k8s.io/pause:3.10" }] },
        });
        let created = store
            .create(&PODS, "default", pod, &WriteOptions::default())
            .unwrap();
        (store, meta::uid(&created).to_string())
    }

    #[test]
    fn binding_sets_the_node_once_and_marks_the_pod_scheduled() {
        let (store, uid) = store_with_pod();
        let bound = store.bind_pod("default", "p", Some(&uid), "cp-1").unwrap();
        assert_eq!(bound["spec"]["nodeName"], "cp-1");
        assert_eq!(bound["status"]["conditions"][0]["type"], "PodScheduled");
        assert_eq!(bound["status"]["conditions"][0]["status"], "True");
        let again = store.bind_pod("default", "p", None, "cp-2").unwrap_err();
        assert_eq!(again.code, 409);
        assert!(again.message.contains("already assigned to node \"cp-1\""));
    }

    #[test]
    fn binding_checks_the_uid_and_existence() {
        let (store, _) = store_with_pod();
        assert_eq!(
            store
                .bind_pod("default", "p", Some("other"), "cp-1")
                .unwrap_err()
                .code,
            409
        );
        assert_eq!(
            store
                .bind_pod("default", "nope", None, "cp-1")
                .unwrap_err()
                .code,
            404
        );
    }
}
