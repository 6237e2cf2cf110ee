//! The manifests both ways (tables and the round-trip law) and the decisions of one node.

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use proptest::prelude::*;

use super::decide::{ConvertStep, Direction, LeaseHandOver, Mode, NodeComponent, next_step};
use super::*;
use crate::command_line;
use crate::config::{ClusterConfig, ExtraArg};
use crate::control_plane::{NodeContext, static_pod};
use crate::daemonset::DaemonSetOptions;
use crate::version::KubeVersion;

fn kubeadm_pod(component: Component, minor: u32, extra: Vec<ExtraArg>) -> Pod {
    let version = KubeVersion::parse(&format!("v1.{minor}.2")).expect("version");
    let mut config = ClusterConfig::default_for(&version);
    match component {
        Component::ApiServer => config.api_server.extra_args = extra,
        Component::ControllerManager => config.controller_manager.extra_args = extra,
        Component::Scheduler => config.scheduler.extra_args = extra,
    }
    let node = NodeContext::for_node("10.0.0.11".parse().expect("ip"));
    static_pod(component, &config, &node, &version)
}

fn spec(pod: &Pod) -> &PodSpec {
    pod.spec.as_ref().expect("spec")
}

fn command(pod: &Pod) -> Vec<String> {
    spec(pod).containers[0].command.clone().unwrap_or_default()
}

/// Flags the DaemonSet changes on purpose and the static pod written back keeps.
const NORMALISED_FLAGS: [&str; 7] = [
    "permit-port-sharing",
    "advertise-address",
    "shutdown-delay-duration",
    "shutdown-send-retry-after",
    "leader-elect-lease-duration",
    "leader-elect-renew-deadline",
    "leader-elect-retry-period",
];

fn without_normalised(command: &[String]) -> Vec<String> {
    NORMALISED_FLAGS.iter().fold(command.to_vec(), |c, flag| {
        command_line::remove_flag(&c, flag)
    })
}

fn round_trip(component: Component, pod: &Pod, certs_in_secrets: bool) -> (Pod, Pod) {
    let options = DaemonSetOptions { certs_in_secrets };
    let ds = self_hosted_daemonset(component, pod, &options).expect("to DaemonSet");
    let template = ds.spec.expect("spec").template;
    let back = static_pod_from_template(component, &template).expect("to static");
    let again = self_hosted_daemonset(component, &back, &options).expect("to DaemonSet again");
    let again = static_pod_from_template(component, &again.spec.expect("spec").template)
        .expect("to static again");
    (back, again)
}

/// static → DaemonSet → static keeps the image, every volume and mount (host paths and their
/// types, also when certificates came from Secrets), the labels and every flag except the
/// documented seven; and a second round trip changes nothing.
fn check_round_trip(component: Component, pod: &Pod, certs_in_secrets: bool) {
    let (back, again) = round_trip(component, pod, certs_in_secrets);
    assert_eq!(
        back, again,
        "{component}: a second round trip changed the pod"
    );
    let (before, after) = (spec(pod), spec(&back));
    assert_eq!(after.containers[0].image, before.containers[0].image);
    assert_eq!(after.volumes, before.volumes, "{component} volumes");
    assert_eq!(
        after.containers[0].volume_mounts, before.containers[0].volume_mounts,
        "{component} mounts"
    );
    assert_eq!(
        without_normalised(&command(&back)),
        without_normalised(&command(pod)),
        "{component} flags"
    );
    assert_eq!(
        command_line::flag_value(&command(&back), "permit-port-sharing"),
        Some("true")
    );
    assert_eq!(back.metadata.labels, pod.metadata.labels);
    assert_eq!(back.metadata.name.as_deref(), Some(component.name()));
    assert_eq!(after.node_selector, None);
    assert_eq!(after.tolerations, None);
    assert_eq!(after.dns_policy, None);
    assert_eq!(after.host_network, Some(true));
}

#[test]
fn static_to_daemonset_to_static_keeps_what_matters() {
    for component in Component::ALL {
        for certs_in_secrets in [false, true] {
            for minor in [31, 33, 34] {
                check_round_trip(
                    component,
                    &kubeadm_pod(component, minor, vec![]),
                    certs_in_secrets,
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn round_trip_law_holds_for_any_extra_flags(
        component in prop::sample::select(Component::ALL.to_vec()),
        minor in 30u32..=34,
        certs_in_secrets in any::<bool>(),
        flags in prop::collection::btree_map("[a-z]{1,8}(-[a-z]{1,6})?", "[a-z0-9.]{0,8}", 0..4),
    ) {
        let extra = flags
            .into_iter()
            .filter(|(name, _)| !NORMALISED_FLAGS.contains(&name.as_str()))
            .map(|(n, v)| ExtraArg::new(n, v))
            .collect();
        check_round_trip(component, &kubeadm_pod(component, minor, extra), certs_in_secrets);
    }
}

#[test]
fn the_daemonset_is_gated_and_shares_its_port() {
    let no_sharing = vec![ExtraArg::new("permit-port-sharing", "false")];
    for component in Component::ALL {
        let pod = kubeadm_pod(component, 33, no_sharing.clone());
        assert!(!permits_port_sharing(spec(&pod)), "{component}");
        let ds = self_hosted_daemonset(component, &pod, &DaemonSetOptions::default()).expect("ds");
        let template = ds.spec.as_ref().expect("spec").template.spec.as_ref();
        assert!(is_gated(component, template), "{component}");
        assert!(permits_port_sharing(template.expect("spec")), "{component}");
        let strategy = ds.spec.as_ref().and_then(|s| s.update_strategy.clone());
        assert_eq!(
            strategy.and_then(|s| s.type_).as_deref(),
            Some("RollingUpdate"),
            "a new DaemonSet keeps kubeadm's strategy"
        );
    }
}

#[test]
fn gating_a_live_daemonset_stops_it_rolling_by_itself() {
    let pod = kubeadm_pod(Component::ApiServer, 33, vec![]);
    let mut ds = crate::daemonset::build_daemonset(Component::ApiServer, &pod, &Default::default())
        .expect("ds");
    ds.metadata.resource_version = Some("42".into());
    assert!(!is_gated(
        Component::ApiServer,
        ds.spec.as_ref().and_then(|s| s.template.spec.as_ref())
    ));
    let gated = gate_daemonset(Component::ApiServer, ds);
    let spec = gated.spec.expect("spec");
    assert!(is_gated(Component::ApiServer, spec.template.spec.as_ref()));
    assert_eq!(
        spec.update_strategy.and_then(|s| s.type_).as_deref(),
        Some("OnDelete")
    );
}

#[test]
fn manifests_that_cannot_be_converted_say_why() {
    let mut wrong = kubeadm_pod(Component::Scheduler, 33, vec![]);
    let err = self_hosted_daemonset(Component::ApiServer, &wrong, &Default::default())
        .expect_err("a scheduler is not an apiserver");
    assert!(err.to_string().contains("runs \"kube-scheduler\""), "{err}");
    wrong.spec.as_mut().expect("spec").containers.clear();
    let err = self_hosted_daemonset(Component::Scheduler, &wrong, &Default::default())
        .expect_err("no container");
    assert!(err.to_string().contains("no container"), "{err}");
}

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

// --- decisions -------------------------------------------------------------------------

mod decisions {
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::observation::{
        ContainerObservation, ContainerState, DaemonSetCounters, DaemonSetObservation,
        PodObservation,
    };

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).expect("ts")
    }

    fn pod(name: &str, state: ContainerState, restarts: i32) -> PodObservation {
        PodObservation {
            name: name.into(),
            uid: None,
            node: Some("cp-1".into()),
            template_generation: None,
            revision_hash: None,
            phase: None,
            ready: false,
            ready_since: None,
            created: None,
            start_time: None,
            deleting_since: None,
            deletion_grace_seconds: None,
            termination_grace_seconds: None,
            containers: vec![ContainerObservation {
                name: "kube-apiserver".into(),
                image: "registry.k8s.io/kube-apiserver:v1.33.1".into(),
                ready: false,
                restart_count: restarts,
                state,
                last_termination: None,
                last_exit_at: None,
            }],
        }
    }

    fn waiting(reason: &str) -> ContainerState {
        ContainerState::Waiting {
            reason: Some(reason.into()),
            message: None,
        }
    }

    fn daemonset(pods: Vec<PodObservation>) -> DaemonSetObservation {
        DaemonSetObservation {
            name: "self-hosted-kube-apiserver".into(),
            uid: Some("u".into()),
            resource_version: Some("1".into()),
            generation: Some(1),
            template_generation: Some(1),
            current_revision_hash: None,
            annotations: Default::default(),
            labels: Default::default(),
            selector: Default::default(),
            created: None,
            deleting_since: None,
            template: Default::default(),
            update_strategy: None,
            min_ready_seconds: None,
            revision_history_limit: None,
            status: DaemonSetCounters::default(),
            pods,
        }
    }

    /// A static node with port sharing, nothing done yet.
    fn fresh() -> NodeComponent {
        NodeComponent {
            component: Component::ApiServer,
            node: "cp-1".into(),
            now: at(0),
            deadline: at(100),
            manifest_on_disk: true,
            manifest_in_backup: false,
            static_permits_port_sharing: true,
            static_port_sharing_added: false,
            mirror_permits_port_sharing: true,
            daemonset: None,
            daemonset_gated: false,
            gated_nodes: vec![],
            mirror: Some(pod(
                "kube-apiserver-cp-1",
                ContainerState::Running { started_at: None },
                0,
            )),
            mirror_serving: Ok(()),
            daemonset_pod_serving: Err("no pod".into()),
            lease_hand_over: None,
            leader: Ok(()),
        }
    }

    mod leadership;

    fn running() -> ContainerState {
        ContainerState::Running {
            started_at: Some(at(1)),
        }
    }

    fn step(direction: Direction, obs: &NodeComponent) -> String {
        next_step(direction, &Mode::Forward, obs).name().to_string()
    }

    #[test]
    fn to_self_hosted_table() {
        let with = |f: &dyn Fn(&mut NodeComponent)| {
            let mut obs = fresh();
            f(&mut obs);
            obs
        };
        let ds_here = |state: ContainerState, restarts: i32| {
            move |o: &mut NodeComponent| {
                o.daemonset = Some(daemonset(vec![pod("ds-pod", state.clone(), restarts)]));
                o.daemonset_gated = true;
                o.gated_nodes = vec!["cp-1".into()];
            }
        };
        let rows: Vec<(&str, NodeComponent, &str)> = vec![
            (
                "nothing done: create the DaemonSet",
                fresh(),
                "create-daemonset",
            ),
            (
                "a DaemonSet someone else made is gated first",
                with(&|o| o.daemonset = Some(daemonset(vec![]))),
                "gate-daemonset",
            ),
            (
                "gated DaemonSet, node not labelled",
                with(&|o| {
                    o.daemonset = Some(daemonset(vec![]));
                    o.daemonset_gated = true;
                }),
                "label-node",
            ),
            (
                "pod Ready but not serving by identity: wait",
                with(&ds_here(running(), 0)),
                "wait",
            ),
            (
                "pod serves beside the static pod: move the manifest",
                with(&|o| {
                    ds_here(running(), 0)(o);
                    o.daemonset_pod_serving = Ok(());
                }),
                "move-manifest-aside",
            ),
            (
                "without port sharing a pod that has not started waits",
                with(&|o| {
                    ds_here(waiting("ContainerCreating"), 0)(o);
                    o.static_permits_port_sharing = false;
                }),
                "wait",
            ),
            (
                "without port sharing a crash-looping pod has its image: the static pod \
                 restarts with port sharing",
                with(&|o| {
                    ds_here(waiting("CrashLoopBackOff"), 1)(o);
                    o.static_permits_port_sharing = false;
                    o.mirror_permits_port_sharing = false;
                }),
                "add-port-sharing",
            ),
            (
                "port sharing added, the old static pod still runs: wait",
                with(&|o| {
                    ds_here(waiting("CrashLoopBackOff"), 1)(o);
                    o.static_port_sharing_added = true;
                    o.mirror_permits_port_sharing = false;
                }),
                "wait",
            ),
            (
                "port sharing added and the DaemonSet pod serves beside: move",
                with(&|o| {
                    ds_here(running(), 1)(o);
                    o.static_port_sharing_added = true;
                    o.daemonset_pod_serving = Ok(());
                }),
                "move-manifest-aside",
            ),
            (
                "an image that cannot be pulled fails before the hand-over",
                with(&ds_here(waiting("ImagePullBackOff"), 0)),
                "fail",
            ),
            (
                "a wait past the deadline fails",
                with(&|o| {
                    ds_here(running(), 0)(o);
                    o.now = at(101);
                }),
                "fail",
            ),
            (
                "handed over, mirror pod still there: wait",
                with(&|o| {
                    ds_here(running(), 0)(o);
                    o.manifest_on_disk = false;
                    o.manifest_in_backup = true;
                    o.daemonset_pod_serving = Ok(());
                }),
                "wait",
            ),
            (
                "handed over and serving alone: done",
                with(&|o| {
                    ds_here(running(), 0)(o);
                    o.manifest_on_disk = false;
                    o.manifest_in_backup = true;
                    o.mirror = None;
                    o.daemonset_pod_serving = Ok(());
                }),
                "done",
            ),
            (
                "neither on disk nor in the cluster: refuse",
                with(&|o| {
                    o.manifest_on_disk = false;
                    o.mirror = None;
                }),
                "refuse",
            ),
        ];
        for (case, obs, expected) in rows {
            assert_eq!(step(Direction::ToSelfHosted, &obs), expected, "{case}");
        }
    }

    #[test]
    fn a_failed_hand_over_is_undone_in_order() {
        let reason = Mode::Restore {
            reason: "boom".into(),
        };
        let mut obs = fresh();
        obs.daemonset = Some(daemonset(vec![pod(
            "ds-pod",
            waiting("CrashLoopBackOff"),
            3,
        )]));
        obs.daemonset_gated = true;
        obs.gated_nodes = vec!["cp-1".into()];
        obs.manifest_on_disk = false;
        obs.manifest_in_backup = true;
        obs.mirror = None;
        obs.mirror_serving = Err("no mirror pod".into());
        let mut seen = Vec::new();
        for _ in 0..6 {
            let step = next_step(Direction::ToSelfHosted, &reason, &obs);
            seen.push(step.name());
            match step {
                ConvertStep::RestoreManifest => obs.manifest_on_disk = true,
                ConvertStep::UnlabelNode { .. } => obs.gated_nodes.clear(),
                ConvertStep::Wait { .. } => {
                    // The DaemonSet controller retires the pod, the kubelet restarts the
                    // static pod.
                    obs.daemonset = Some(daemonset(vec![]));
                    obs.mirror_serving = Ok(());
                }
                ConvertStep::DeleteDaemonSet => obs.daemonset = None,
                ConvertStep::RolledBack { .. } => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(
            seen,
            [
                "restore-manifest",
                "unlabel-node",
                "wait",
                "delete-daemonset",
                "rolled-back"
            ]
        );
    }

    /// Undoing a hand-over whose static pod did not share its port: the port-sharing rewrite
    /// first (written again if the manifest was moved aside), so that the static pod serves
    /// beside the DaemonSet pod; the original back only once that pod has gone.
    #[test]
    fn a_hand_over_without_port_sharing_is_undone_without_a_second_gap_first() {
        let reason = Mode::Restore {
            reason: "boom".into(),
        };
        for moved_aside in [true, false] {
            let mut obs = fresh();
            obs.daemonset = Some(daemonset(vec![pod("ds-pod", running(), 1)]));
            obs.daemonset_gated = true;
            obs.gated_nodes = vec!["cp-1".into()];
            obs.manifest_in_backup = true;
            if moved_aside {
                obs.manifest_on_disk = false;
                obs.static_permits_port_sharing = false;
                obs.mirror = None;
                obs.mirror_serving = Err("no mirror pod".into());
            } else {
                obs.static_port_sharing_added = true;
            }
            let mut seen = Vec::new();
            for _ in 0..10 {
                let step = next_step(Direction::ToSelfHosted, &reason, &obs);
                seen.push(step.name());
                match step {
                    ConvertStep::AddPortSharing => {
                        obs.manifest_on_disk = true;
                        obs.static_permits_port_sharing = true;
                        obs.static_port_sharing_added = true;
                    }
                    ConvertStep::RestoreManifest => {
                        obs.static_permits_port_sharing = false;
                        obs.static_port_sharing_added = false;
                        obs.mirror_serving = Err("restarting".into());
                    }
                    ConvertStep::UnlabelNode { .. } => obs.gated_nodes.clear(),
                    ConvertStep::Wait { .. } => {
                        // The DaemonSet controller retires the pod, the kubelet (re)starts the
                        // static pod.
                        if let Some(ds) = obs.daemonset.as_mut() {
                            ds.pods.clear();
                        }
                        obs.mirror_serving = Ok(());
                    }
                    ConvertStep::DeleteDaemonSet => obs.daemonset = None,
                    ConvertStep::RolledBack { .. } => break,
                    other => panic!("unexpected {other:?}"),
                }
            }
            let mut expected = vec![
                "unlabel-node",
                "wait",
                "delete-daemonset",
                "restore-manifest",
                "wait",
                "rolled-back",
            ];
            if moved_aside {
                expected.insert(0, "add-port-sharing");
            }
            assert_eq!(seen, expected, "moved aside: {moved_aside}");
        }
    }

    /// A node where a direction leads, waiting only for the cluster, is told apart from one
    /// still on its way (whose waits need this tool's next steps).
    #[test]
    fn a_node_at_the_end_awaits_only_the_cluster() {
        fn self_hosted(o: &mut NodeComponent) {
            o.manifest_on_disk = false;
            o.manifest_in_backup = true;
            o.daemonset = Some(daemonset(vec![pod("ds-pod", running(), 0)]));
            o.daemonset_gated = true;
            o.gated_nodes = vec!["cp-1".into()];
        }
        /// A case: its name, the direction, what differs from [`fresh`], and the answer.
        type Row = (&'static str, Direction, fn(&mut NodeComponent), bool);
        let rows: Vec<Row> = vec![
            (
                "static, no DaemonSet: to static is there",
                Direction::ToStatic,
                |_| {},
                true,
            ),
            (
                "static, leader not elected yet: still there",
                Direction::ToStatic,
                |o| o.leader = Err("no leader".into()),
                true,
            ),
            (
                "static pod that cannot start: not there",
                Direction::ToStatic,
                |o| {
                    o.mirror = Some(pod("kube-apiserver-cp-1", waiting("ErrImagePull"), 0));
                },
                false,
            ),
            (
                "static: to self-hosted is not there",
                Direction::ToSelfHosted,
                |_| {},
                false,
            ),
            (
                "self-hosted, mirror pod still going: to self-hosted is there",
                Direction::ToSelfHosted,
                |o| self_hosted(o),
                true,
            ),
            (
                "self-hosted: to static is not there",
                Direction::ToStatic,
                |o| self_hosted(o),
                false,
            ),
            (
                "manifest moved aside but the node unlabelled: not there",
                Direction::ToSelfHosted,
                |o| {
                    self_hosted(o);
                    o.gated_nodes.clear();
                },
                false,
            ),
        ];
        for (case, direction, change, expected) in rows {
            let mut obs = fresh();
            change(&mut obs);
            assert_eq!(
                crate::conversion::decide::awaits_only_the_cluster(direction, &obs),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn to_static_table() {
        let self_hosted = || {
            let mut o = fresh();
            o.manifest_on_disk = false;
            o.mirror = None;
            o.mirror_serving = Err("no mirror pod".into());
            o.daemonset = Some(daemonset(vec![pod("ds-pod", running(), 0)]));
            o.daemonset_gated = true;
            o.gated_nodes = vec!["cp-1".into()];
            o.daemonset_pod_serving = Ok(());
            o
        };
        let with = |f: &dyn Fn(&mut NodeComponent)| {
            let mut obs = self_hosted();
            f(&mut obs);
            obs
        };
        let rows: Vec<(&str, NodeComponent, &str)> = vec![
            (
                "self-hosted: write the manifest",
                self_hosted(),
                "write-manifest",
            ),
            (
                "an ungated DaemonSet: label its nodes first",
                with(&|o| {
                    o.daemonset_gated = false;
                    o.gated_nodes.clear();
                }),
                "label-node",
            ),
            (
                "an ungated DaemonSet whose nodes are labelled: gate it",
                with(&|o| o.daemonset_gated = false),
                "gate-daemonset",
            ),
            (
                "static pod starting: wait",
                with(&|o| o.manifest_on_disk = true),
                "wait",
            ),
            (
                "static pod serves: retire the DaemonSet pod",
                with(&|o| {
                    o.manifest_on_disk = true;
                    o.mirror_serving = Ok(());
                }),
                "unlabel-node",
            ),
            (
                "last node, no pod left: delete the DaemonSet",
                with(&|o| {
                    o.manifest_on_disk = true;
                    o.mirror_serving = Ok(());
                    o.gated_nodes.clear();
                    o.daemonset = Some(daemonset(vec![]));
                }),
                "delete-daemonset",
            ),
            (
                "other nodes still self-hosted: done here",
                with(&|o| {
                    o.manifest_on_disk = true;
                    o.mirror_serving = Ok(());
                    o.gated_nodes = vec!["cp-2".into()];
                    let mut other = pod("ds-pod-2", running(), 0);
                    other.node = Some("cp-2".into());
                    o.daemonset = Some(daemonset(vec![other]));
                }),
                "done",
            ),
            (
                "no DaemonSet and the static pod serves: done (skipped)",
                with(&|o| {
                    o.manifest_on_disk = true;
                    o.mirror_serving = Ok(());
                    o.daemonset = None;
                }),
                "done",
            ),
        ];
        for (case, obs, expected) in rows {
            assert_eq!(step(Direction::ToStatic, &obs), expected, "{case}");
        }
    }
}

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
