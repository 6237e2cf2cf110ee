//! Laws of the checkpointer over generated nodes: what it never does, whatever the node shows.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

use super::builder::{image, ms};
use super::step_of;
use crate::checkpoint::{
    ActiveCopy, Api, Checkpoint, CheckpointPolicy, CheckpointStep, ComponentOnNode,
    NodeCheckpoints, RunningPod, decide, phase,
};
use crate::component::Component;
use crate::observation::time;

/// Times are generated in milliseconds within a minute, observed at its end, so that soaks and
/// graces of up to 20 s fall on either side of their boundaries.
const NOW: i64 = 60_000;

fn at() -> impl Strategy<Value = i64> {
    prop_oneof![0i64..=NOW, Just(NOW - 10_000), Just(NOW), Just(NOW + 1_000)]
}

fn revision() -> impl Strategy<Value = String> {
    prop_oneof![Just("rev-a".to_string()), Just("rev-b".to_string())]
}

fn component_on_node() -> impl Strategy<Value = ComponentOnNode> {
    let pod = (revision(), proptest::option::weighted(0.7, at())).prop_map(|(revision, since)| {
        RunningPod {
            uid: format!("uid-{revision}"),
            image: image(&revision),
            revision,
            serving_since: since.map(ms),
        }
    });
    let checkpoint = revision().prop_map(|revision| Checkpoint {
        image: image(&revision),
        revision,
        written_at: ms(0),
    });
    let active =
        (revision(), at(), any::<bool>()).prop_map(|(revision, since, serving)| ActiveCopy {
            revision,
            since: ms(since),
            serving,
        });
    (
        proptest::option::weighted(0.7, pod),
        proptest::option::weighted(0.7, checkpoint),
        proptest::option::weighted(0.3, active),
        any::<bool>(),
        proptest::bool::weighted(0.2),
    )
        .prop_map(
            |(daemonset_pod, checkpoint, active, local_process_serving, static_manifest)| {
                ComponentOnNode {
                    daemonset_pod,
                    checkpoint,
                    active,
                    local_process_serving,
                    static_manifest,
                }
            },
        )
}

fn node() -> impl Strategy<Value = NodeCheckpoints> {
    let api = prop_oneof![
        1 => Just(Api::Answers),
        1 => at().prop_map(|since| Api::Unreachable { since: ms(since) }),
    ];
    (api, proptest::collection::vec(component_on_node(), 3)).prop_map(|(api, on)| NodeCheckpoints {
        now: ms(NOW),
        api,
        components: Component::ALL
            .into_iter()
            .zip(on)
            .collect::<BTreeMap<_, _>>(),
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
                let since = pod.serving_since.expect("a kept pod serves");
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
                    prop_assert!(on.daemonset_pod_serves());
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
}
