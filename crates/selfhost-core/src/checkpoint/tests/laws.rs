//! Laws of the checkpointer over generated nodes: what it never does, whatever the node shows.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

use super::builder::{image, ms};
use super::step_of;
use crate::checkpoint::{
    ActiveCopy, Api, Checkpoint, CheckpointPolicy, CheckpointStep, ComponentOnNode,
    NodeCheckpoints, NodeLeases, OtherProcess, RunningPod, decide, phase, serving_since,
};
use crate::component::Component;
use crate::observation::{
    ContainerState, IdentitySighting, LeaderLease, NodeObservation, NodeReadiness, time,
};

/// Times are generated in milliseconds within a minute, observed at its end, so that soaks and
/// graces of up to 20 s fall on either side of their boundaries.
const NOW: i64 = 60_000;

fn at() -> impl Strategy<Value = i64> {
    prop_oneof![0i64..=NOW, Just(NOW - 10_000), Just(NOW), Just(NOW + 1_000)]
}

fn revision() -> impl Strategy<Value = String> {
    prop_oneof![Just("rev-a".to_string()), Just("rev-b".to_string())]
}

fn process() -> impl Strategy<Value = ContainerState> {
    prop_oneof![
        3 => proptest::option::weighted(0.9, at())
            .prop_map(|started| ContainerState::Running { started_at: started.map(ms) }),
        1 => Just(ContainerState::Unknown),
        1 => Just(ContainerState::Terminated { reason: None, exit_code: 0, finished_at: None }),
        1 => Just(ContainerState::Waiting { reason: None, message: None }),
    ]
}

fn component_on_node() -> impl Strategy<Value = ComponentOnNode> {
    let pod = (revision(), proptest::option::weighted(0.7, at()), process()).prop_map(
        |(revision, since, process)| RunningPod {
            uid: format!("uid-{revision}"),
            image: image(&revision),
            revision,
            ready_since: since.map(ms),
            process,
        },
    );
    let others = proptest::collection::vec(
        process().prop_map(|state| OtherProcess {
            pod: "other".to_string(),
            state,
        }),
        0..3,
    );
    let checkpoint = revision().prop_map(|revision| Checkpoint {
        image: image(&revision),
        revision,
        written_at: ms(0),
    });
    let active = (revision(), at(), any::<bool>(), any::<bool>()).prop_map(
        |(revision, since, serving, mirror_pod)| ActiveCopy {
            revision,
            since: ms(since),
            serving,
            mirror_pod,
        },
    );
    (
        proptest::option::weighted(0.7, pod),
        proptest::option::weighted(0.7, checkpoint),
        proptest::option::weighted(0.3, active),
        any::<bool>(),
        proptest::bool::weighted(0.2),
        others,
    )
        .prop_map(
            |(
                daemonset_pod,
                checkpoint,
                active,
                local_process_serving,
                static_manifest,
                others,
            )| {
                ComponentOnNode {
                    daemonset_pod,
                    checkpoint,
                    active,
                    local_process_serving,
                    static_manifest,
                    other_processes: others,
                }
            },
        )
}

/// Hosts as Lease holders name them: this node, another, and one every node shares.
fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("cp-1".to_string()),
        Just("cp-2".to_string()),
        Just("shared".to_string())
    ]
}

fn leases() -> impl Strategy<Value = NodeLeases> {
    let identity = (host(), 0..3u8, at()).prop_map(|(host, holder, renewed)| IdentitySighting {
        lease: format!("apiserver-{host}"),
        hostname: Some(host),
        holder: format!("holder-{holder}"),
        holder_since: None,
        last_renewed: Some(ms(renewed)),
        first_seen: None,
    });
    let leader = || {
        (host(), at(), at()).prop_map(|(host, acquired, renewed)| LeaderLease {
            name: "leader".to_string(),
            uid: Some("uid".to_string()),
            resource_version: Some("7".to_string()),
            holder: Some(format!("{host}_0f6e")),
            acquire_time: Some(ms(acquired)),
            renew_time: Some(ms(acquired.max(renewed))),
            lease_duration_seconds: Some(15),
            transitions: Some(1),
        })
    };
    let node = |name: &str, ready: bool| NodeObservation {
        name: name.to_string(),
        hostname: Some(name.to_string()),
        ready: if ready {
            NodeReadiness::Ready
        } else {
            NodeReadiness::Unknown
        },
        ready_since: None,
        unschedulable: false,
        labels: BTreeMap::new(),
        taints: Vec::new(),
    };
    (
        proptest::collection::vec(identity, 0..4),
        proptest::option::of(leader()),
        proptest::option::of(leader()),
        any::<bool>(),
        proptest::bool::weighted(0.9),
    )
        .prop_map(move |(identities, manager, scheduler, two_nodes, ready)| {
            let mut control_plane = vec![node("cp-1", ready)];
            if two_nodes {
                control_plane.push(node("cp-2", true));
            }
            let leaders = [
                (Component::ControllerManager, manager),
                (Component::Scheduler, scheduler),
            ]
            .into_iter()
            .filter_map(|(c, lease)| Some((c, lease?)))
            .collect();
            NodeLeases {
                node: "cp-1".to_string(),
                control_plane,
                identities,
                leaders,
            }
        })
}

fn node() -> impl Strategy<Value = NodeCheckpoints> {
    let api = prop_oneof![
        1 => Just(Api::Answers),
        1 => at().prop_map(|since| Api::Unreachable { since: ms(since) }),
    ];
    (
        api,
        proptest::collection::vec(component_on_node(), 3),
        proptest::option::weighted(0.6, leases()),
    )
        .prop_map(|(api, on, leases)| NodeCheckpoints {
            now: ms(NOW),
            api,
            components: Component::ALL
                .into_iter()
                .zip(on)
                .collect::<BTreeMap<_, _>>(),
            leases,
        })
}

fn policy() -> impl Strategy<Value = CheckpointPolicy> {
    prop_oneof![
        Just(CheckpointPolicy::default()),
        (0u64..=20_000, 0u64..=20_000).prop_map(|(soak, grace)| CheckpointPolicy {
            soak: Duration::from_millis(soak),
            api_grace: Duration::from_millis(grace),
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn never_keeps_a_pod_that_has_not_served_for_the_soak(obs in node(), policy in policy()) {
        for (component, step) in decide(&obs, &policy) {
            if let CheckpointStep::Keep { pod_uid, revision, .. } = &step {
                let on = obs.component(component);
                let pod = on.daemonset_pod.as_ref().expect("a pod is kept");
                let since = serving_since(&obs, component).expect("a kept pod serves");
                prop_assert_eq!(pod.ready_since, Some(since));
                prop_assert_eq!(obs.api, Api::Answers);
                prop_assert!(time::age(obs.now, since) >= policy.soak);
                prop_assert_eq!(pod_uid, &pod.uid);
                prop_assert_eq!(revision, &pod.revision);
                prop_assert!(on.checkpoint.as_ref().is_none_or(|c| &c.revision != revision));
                prop_assert!(on.active.is_none());
            }
        }
    }

    #[test]
    fn never_activates_while_the_api_answers_or_the_component_serves_here(
        obs in node(),
        policy in policy(),
    ) {
        for (component, step) in decide(&obs, &policy) {
            if let CheckpointStep::Activate { revision, .. } = &step {
                let on = obs.component(component);
                let gone_for = obs.api_unreachable_for().expect("the API is unreachable");
                prop_assert!(gone_for >= policy.api_grace);
                prop_assert!(!on.local_process_serving);
                prop_assert!(!on.static_manifest);
                prop_assert!(on.active.is_none());
                prop_assert_eq!(
                    Some(revision),
                    on.checkpoint.as_ref().map(|c| &c.revision)
                );
                if component != Component::ApiServer {
                    prop_assert!(obs.apiserver_on_node());
                }
            }
        }
    }

    #[test]
    fn never_retires_unless_the_daemonset_pod_or_kubeadms_static_pod_takes_over(
        obs in node(),
        policy in policy(),
    ) {
        for (component, step) in decide(&obs, &policy) {
            if let CheckpointStep::Retire { revision } = &step {
                let on = obs.component(component);
                if !on.static_manifest {
                    prop_assert_eq!(obs.api, Api::Answers);
                    prop_assert!(serving_since(&obs, component).is_some());
                    if obs.leases.is_some() {
                        prop_assert!(on.active.as_ref().is_some_and(|copy| copy.mirror_pod));
                    }
                }
                prop_assert_eq!(Some(revision), on.active.as_ref().map(|a| &a.revision));
            }
        }
    }

    #[test]
    fn a_wait_rechecks_only_in_the_future_and_each_phase_gives_its_step(
        obs in node(),
        policy in policy(),
    ) {
        for (component, step) in decide(&obs, &policy) {
            let found = phase(&obs, component, &policy);
            prop_assert_eq!(step.name(), step_of(found), "{} in {}", step, found.name());
            if let CheckpointStep::Wait { recheck_at: Some(at), .. } = step {
                prop_assert!(at > obs.now);
            }
        }
    }

    #[test]
    fn hands_a_lease_over_only_once_every_process_here_that_may_hold_it_has_stopped(
        obs in node(),
        policy in policy(),
    ) {
        for (component, step) in decide(&obs, &policy) {
            if let CheckpointStep::HandOver { lease, holder, .. } = &step {
                prop_assert_eq!(obs.api, Api::Answers);
                prop_assert_ne!(component, Component::ApiServer);
                let leases = obs.leases.as_ref().expect("Leases were read");
                let read = &leases.leaders[&component];
                prop_assert_eq!(lease, &read.name);
                prop_assert!(read.is_held_at(obs.now));
                prop_assert!(
                    holder.starts_with("cp-1_") || leases.control_plane.len() == 1,
                    "held from this node: {}",
                    holder
                );
                let acquired = read.acquire_time.expect("acquired");
                let on = obs.component(component);
                prop_assert!(on.active.is_none() && !on.static_manifest);
                let pod = on.daemonset_pod.as_ref().expect("our pod runs here");
                let stopped_or_newer = |state: &ContainerState| match state {
                    ContainerState::Running { started_at } => {
                        started_at.is_some_and(|s| s > acquired)
                    }
                    ContainerState::Unknown => false,
                    _ => true,
                };
                prop_assert!(stopped_or_newer(&pod.process));
                for other in &on.other_processes {
                    prop_assert!(stopped_or_newer(&other.state));
                }
            }
        }
    }

    #[test]
    fn a_kube_apiserver_beside_another_process_serves_only_by_as_many_new_identities(
        obs in node(),
    ) {
        let component = Component::ApiServer;
        let on = obs.component(component);
        let Some(leases) = obs.leases.as_ref() else { return Ok(()) };
        // Where no identity is published, or one tells no node, Ready counts.
        let mut fresh = leases.identities.iter().filter(|s| s.is_fresh(obs.now)).peekable();
        let unplaceable = fresh.peek().is_none()
            || fresh.any(|s| {
                s.hostname.as_deref() == Some("shared") && leases.control_plane.len() > 1
            });
        let running_beside = on
            .other_processes
            .iter()
            .filter(|p| matches!(p.state, ContainerState::Running { .. }))
            .count();
        if serving_since(&obs, component).is_some() && !unplaceable && running_beside > 0 {
            let mut here: Vec<&str> = leases
                .identities
                .iter()
                .filter(|s| s.is_fresh(obs.now))
                // One control-plane node is the host of every identity.
                .filter(|s| {
                    s.hostname.as_deref() == Some("cp-1") || leases.control_plane.len() == 1
                })
                .map(|s| s.holder.as_str())
                .collect();
            here.sort_unstable();
            here.dedup();
            prop_assert!(here.len() > running_beside);
        }
    }
}
