//! Releasing a leader Lease whose holder stopped, with the leading component's own
//! credentials.
//!
//! The node's credentials may not write kube-system Leases (NodeRestriction refuses them
//! whatever RBAC says), but Kubernetes' own roles let the controller-manager and the scheduler
//! update their Lease, and a leader that releases on exit writes it back with its holder
//! emptied. The agent does that for a copy that stopped, with the kubeconfig the copy ran
//! with: the file its checkpoint's `--kubeconfig` names, found on the host through the
//! volume it is mounted from.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

use crate::command_line::flag_value;

/// Where the kubeconfig a kept pod's component runs with lies on the host: its `--kubeconfig`
/// flag, through the host path volume of the mount that holds it (the longest mount path that
/// contains it). `None` when the flag is absent or its file comes from no host path.
pub fn kubeconfig_on_host(spec: &PodSpec) -> Option<String> {
    let container = spec.containers.first()?;
    let mut line = container.command.clone().unwrap_or_default();
    line.extend(container.args.clone().unwrap_or_default());
    let path = flag_value(&line, "kubeconfig")?.to_string();
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .filter(|m| {
            let dir = m.mount_path.trim_end_matches('/');
            path == dir || path.starts_with(&format!("{dir}/"))
        })
        .max_by_key(|m| m.mount_path.trim_end_matches('/').len())?;
    let host = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)?
        .host_path
        .as_ref()?
        .path
        .trim_end_matches('/')
        .to_string();
    let rest = &path[mount.mount_path.trim_end_matches('/').len()..];
    Some(format!("{host}{rest}"))
}

/// The Lease as a leader that releases it writes it back: an empty holder, a duration of one
/// second, renewed and acquired `now`, its transitions as they were; its resourceVersion is
/// kept, so that the write fails if the Lease changed since it was read.
pub fn released(lease: &Lease, now: Timestamp) -> Lease {
    let mut released = lease.clone();
    released.metadata.managed_fields = None;
    let spec = released.spec.get_or_insert_with(Default::default);
    // client-go's release writes the empty holder, which every standby reads as free.
    spec.holder_identity = Some(String::new());
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(now));
    spec.acquire_time = Some(MicroTime(now));
    released
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::api::core::v1::{Container, HostPathVolumeSource, Volume, VolumeMount};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn spec(args: &[&str], mounts: &[(&str, &str, Option<&str>)]) -> PodSpec {
        PodSpec {
            containers: vec![Container {
                name: "kube-scheduler".into(),
                command: Some(args.iter().map(|s| s.to_string()).collect()),
                volume_mounts: Some(
                    mounts
                        .iter()
                        .map(|(name, path, _)| VolumeMount {
                            name: name.to_string(),
                            mount_path: path.to_string(),
                            ..VolumeMount::default()
                        })
                        .collect(),
                ),
                ..Container::default()
            }],
            volumes: Some(
                mounts
                    .iter()
                    .map(|(name, _, host)| Volume {
                        name: name.to_string(),
                        host_path: host.map(|h| HostPathVolumeSource {
                            path: h.to_string(),
                            type_: None,
                        }),
                        ..Volume::default()
                    })
                    .collect(),
            ),
            ..PodSpec::default()
        }
    }

    #[test]
    fn the_kubeconfig_is_found_on_the_host_through_its_mount() {
        let cases: &[(&str, PodSpec, Option<&str>)] = &[
            (
                "kubeadm's file mount",
                spec(
                    &[
                        "kube-scheduler",
                        "--kubeconfig=/etc/kubernetes/scheduler.conf",
                    ],
                    &[(
                        "kubeconfig",
                        "/etc/kubernetes/scheduler.conf",
                        Some("/etc/kubernetes/scheduler.conf"),
                    )],
                ),
                Some("/etc/kubernetes/scheduler.conf"),
            ),
            (
                "a directory mounted elsewhere, the longest mount winning",
                spec(
                    &[
                        "kube-scheduler",
                        "--kubeconfig=/etc/k8s/conf/scheduler.conf",
                    ],
                    &[
                        ("root", "/etc/k8s", Some("/srv/k8s")),
                        ("conf", "/etc/k8s/conf/", Some("/var/lib/selfhost/conf")),
                    ],
                ),
                Some("/var/lib/selfhost/conf/scheduler.conf"),
            ),
            (
                "a prefix of a name is no mount of it",
                spec(
                    &[
                        "kube-scheduler",
                        "--kubeconfig=/etc/kubernetes-x/scheduler.conf",
                    ],
                    &[("k", "/etc/kubernetes", Some("/etc/kubernetes"))],
                ),
                None,
            ),
            (
                "mounted from something other than the host",
                spec(
                    &[
                        "kube-scheduler",
                        "--kubeconfig=/etc/kubernetes/scheduler.conf",
                    ],
                    &[("kubeconfig", "/etc/kubernetes", None)],
                ),
                None,
            ),
            (
                "no flag",
                spec(
                    &["kube-scheduler"],
                    &[("k", "/etc/kubernetes", Some("/etc/kubernetes"))],
                ),
                None,
            ),
        ];
        for (case, spec, expected) in cases {
            assert_eq!(kubeconfig_on_host(spec).as_deref(), *expected, "{case}");
        }
    }

    #[test]
    fn a_released_lease_has_no_holder_and_keeps_its_version_and_transitions() {
        let now = Timestamp::from_second(1_800_000_000).expect("time");
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some("kube-scheduler".into()),
                resource_version: Some("42".into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some("cp-1_0f6e".into()),
                lease_duration_seconds: Some(15),
                lease_transitions: Some(3),
                ..LeaseSpec::default()
            }),
        };
        let out = released(&lease, now);
        let spec = out.spec.expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some(""));
        assert_eq!(spec.lease_duration_seconds, Some(1));
        assert_eq!(spec.lease_transitions, Some(3));
        assert_eq!(spec.renew_time, Some(MicroTime(now)));
        assert_eq!(out.metadata.resource_version.as_deref(), Some("42"));
    }
}
