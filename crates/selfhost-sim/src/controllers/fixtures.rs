//! Builders for the table tests of every controller (test-only).

// Builders shared by many tables; not every table uses every builder.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, Node, NodeSpec, Pod, PodCondition, PodSpec, PodStatus, Taint,
    Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::clock;

/// Seconds after an arbitrary fixed epoch.
pub fn t(seconds: u64) -> Timestamp {
    clock::after(
        Timestamp::from_second(1_700_000_000).unwrap(),
        Duration::from_secs(seconds),
    )
}

/// Milliseconds after the same epoch.
pub fn t_ms(millis: u64) -> Timestamp {
    clock::after(t(0), Duration::from_millis(millis))
}

pub fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A node builder.
pub struct NodeBuilder(Node);

pub fn node(name: &str) -> NodeBuilder {
    NodeBuilder(Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(format!("uid-node-{name}")),
            labels: Some(map(&[("kubernetes.io/hostname", name)])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        ..Node::default()
    })
}

impl NodeBuilder {
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_default()
            .insert(key.into(), value.into());
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        let spec = self.0.spec.get_or_insert_default();
        spec.taints.get_or_insert_default().push(Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            time_added: None,
        });
        self
    }

    pub fn control_plane(self) -> Self {
        self.label("node-role.kubernetes.io/control-plane", "")
            .taint("node-role.kubernetes.io/control-plane", "", "NoSchedule")
    }

    pub fn cordoned(mut self) -> Self {
        self.0.spec.get_or_insert_default().unschedulable = Some(true);
        self
    }

    pub fn build(self) -> Node {
        self.0
    }
}

/// A pod builder.
pub struct PodBuilder(Pod);

pub fn pod(name: &str) -> PodBuilder {
    PodBuilder(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-pod-{name}")),
            creation_timestamp: Some(Time(t(0))),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("registry.example/app:1".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Pending".into()),
            ..PodStatus::default()
        }),
    })
}

impl PodBuilder {
    pub fn on(mut self, node: &str) -> Self {
        self.spec().node_name = Some(node.into());
        self
    }

    fn spec(&mut self) -> &mut PodSpec {
        self.0.spec.get_or_insert_default()
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_default()
            .insert(key.into(), value.into());
        self
    }

    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.spec()
            .node_selector
            .get_or_insert_default()
            .insert(key.into(), value.into());
        self
    }

    pub fn tolerate(mut self, toleration: Toleration) -> Self {
        self.spec()
            .tolerations
            .get_or_insert_default()
            .push(toleration);
        self
    }

    pub fn host_port(mut self, port: i32) -> Self {
        let container = &mut self.spec().containers[0];
        container.ports.get_or_insert_default().push(ContainerPort {
            container_port: port,
            host_port: Some(port),
            ..ContainerPort::default()
        });
        self
    }

    pub fn created(mut self, at: Timestamp) -> Self {
        self.0.metadata.creation_timestamp = Some(Time(at));
        self
    }

    pub fn phase(mut self, phase: &str) -> Self {
        self.0.status.get_or_insert_default().phase = Some(phase.into());
        self
    }

    /// Running and Ready since `since`.
    pub fn ready_since(mut self, since: Timestamp) -> Self {
        let status = self.0.status.get_or_insert_default();
        status.phase = Some("Running".into());
        status.conditions = Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            last_transition_time: Some(Time(since)),
            ..PodCondition::default()
        }]);
        self
    }

    pub fn terminating(mut self, since: Timestamp) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(since));
        self.0.metadata.deletion_grace_period_seconds = Some(30);
        self
    }

    pub fn build(self) -> Pod {
        self.0
    }
}
