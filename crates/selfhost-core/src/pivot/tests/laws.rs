//! Laws of `next_step` over generated clusters.

use proptest::prelude::*;

use super::builder::{Pod, World, front_target, t, target, version};
use super::decide;
use super::phase::steps_of;
use crate::backup::{BackupError, BackupOrigin, BackupRecord};
use crate::component::Component;
use crate::observation::{HostPlacement, Observation, time};
use crate::pivot::{BACKUP_DRAIN_STEP_AT, Step, Target, phase, pod_serves, template_applied};

/// What one node looks like in a generated cluster.
#[derive(Debug, Clone, Copy)]
enum RealPod {
    Old,
    OldTerminating(i64),
    Gone,
    New(Pod),
}

#[derive(Debug, Clone, Copy)]
enum BackupPod {
    Absent,
    Present(Pod),
    Terminating(Pod),
}

fn pod_state() -> impl Strategy<Value = Pod> {
    // Serving pods are the interesting case for the laws: weigh them up.
    prop_oneof![
        4 => (0i64..120).prop_map(|started| Pod::Serving { started }),
        1 => (0i64..120).prop_map(|started| Pod::ReadyNoIdentity { started }),
        1 => (0i64..120).prop_map(|started| Pod::Starting { started }),
        1 => Just(Pod::ImagePull),
        1 => (0i32..5).prop_map(|restarts| Pod::CrashLoop { restarts }),
        1 => Just(Pod::Creating),
    ]
}

fn real_pod() -> impl Strategy<Value = RealPod> {
    prop_oneof![
        2 => Just(RealPod::Old),
        1 => prop_oneof![Just(5i64), Just(30i64)].prop_map(RealPod::OldTerminating),
        1 => Just(RealPod::Gone),
        3 => pod_state().prop_map(RealPod::New),
    ]
}

fn backup_pod() -> impl Strategy<Value = BackupPod> {
    prop_oneof![
        1 => Just(BackupPod::Absent),
        4 => pod_state().prop_map(BackupPod::Present),
        1 => pod_state().prop_map(BackupPod::Terminating),
    ]
}

/// A generated cluster somewhere in a pivot of `component`.
#[derive(Debug, Clone)]
struct Scenario {
    component: Component,
    nodes: Vec<(RealPod, BackupPod)>,
    backup: bool,
    updated: bool,
    rolled_back: bool,
    /// selfhost's update held the rollout (`OnDelete`, see `hold.rs`).
    held: bool,
    deleting: bool,
    identities: bool,
    /// Every process sees one machine hostname that is no node's name.
    shared_hostname: bool,
    /// When the controller-manager or scheduler leader acquired its Lease (on cp-1).
    leader_acquired: i64,
    now: i64,
    /// The kube-apiservers listen behind each node's API front (`front.rs`).
    front: bool,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop_oneof![
            Just(Component::ApiServer),
            Just(Component::ControllerManager),
            Just(Component::Scheduler)
        ],
        proptest::collection::vec((real_pod(), backup_pod()), 1..=3),
        any::<[bool; 8]>(),
        0i64..400,
        prop_oneof![Just(-3000i64), 0i64..150],
    )
        .prop_map(|(component, nodes, flags, now, leader_acquired)| Scenario {
            component,
            nodes,
            backup: flags[0],
            updated: flags[1],
            rolled_back: flags[1] && flags[2],
            held: flags[1] && flags[5],
            deleting: flags[0] && flags[3],
            identities: flags[4],
            shared_hostname: flags[6],
            leader_acquired,
            now,
            front: flags[7],
        })
}

impl Scenario {
    /// Behind a front (the kube-apiserver only: the front fronts nothing else).
    fn behind_front(&self) -> bool {
        self.front && self.component == Component::ApiServer
    }

    /// The run's target: behind the front where the cluster is.
    fn target(&self) -> Target {
        if self.behind_front() {
            front_target(self.component)
        } else {
            target(self.component)
        }
    }

    fn build(&self) -> Observation {
        let mut world = World::steady(self.component, self.nodes.len());
        world = if self.identities {
            world.old_identities_known()
        } else {
            world.without_identity_leases()
        };
        if self.behind_front() {
            world = world.behind_front();
        }
        if self.backup {
            world = world.backup();
        }
        if self.updated {
            world = world.updated();
        }
        if self.held {
            world = world.held();
        }
        if self.rolled_back {
            world = world.rolled_back(200);
        }
        for (i, (real, backup)) in self.nodes.iter().enumerate() {
            let node = format!("cp-{}", i + 1);
            world = match real {
                RealPod::Old => world,
                RealPod::OldTerminating(grace) => world.old_terminating(&node, *grace),
                RealPod::Gone => world.real_pods_gone(&node),
                RealPod::New(state) => world.new_pod(&node, *state),
            };
            if self.backup {
                world = match backup {
                    BackupPod::Absent => world,
                    BackupPod::Present(state) => world.backup_pod(&node, *state),
                    BackupPod::Terminating(state) => world
                        .backup_pod(&node, *state)
                        .backup_pod_terminating(&node, 30),
                };
            }
        }
        if self.deleting {
            world = world.backup_deleting(150);
        }
        if self.shared_hostname {
            world = world.machine_hostname("bed");
        }
        world
            .at(self.now)
            .leader("cp-1", self.leader_acquired)
            .build()
    }
}

/// What may be true besides a pivot of this run's: a backup someone else made, a removal
/// begun, the real DaemonSet gone.
#[derive(Debug, Clone, Copy)]
enum Twist {
    None,
    RealGone,
    Kubeadm,
    Unreadable,
    OtherTarget,
    DrainBegun,
}

fn twist() -> impl Strategy<Value = Twist> {
    prop_oneof![
        5 => Just(Twist::None),
        1 => Just(Twist::RealGone),
        1 => Just(Twist::Kubeadm),
        1 => Just(Twist::Unreadable),
        1 => Just(Twist::OtherTarget),
        1 => Just(Twist::DrainBegun),
    ]
}

impl Twist {
    fn apply(self, mut obs: Observation) -> Observation {
        if let Twist::RealGone = self {
            obs.real = None;
        }
        let Some(backup) = obs.backup.as_mut() else {
            return obs;
        };
        let original = match &backup.record {
            Ok(record) => record.original_template.clone(),
            Err(_) => backup.daemonset.template.clone(),
        };
        match self {
            Twist::None | Twist::RealGone => {}
            Twist::Kubeadm => {
                backup.record = Ok(BackupRecord {
                    origin: BackupOrigin::Kubeadm,
                    original_template: original,
                });
            }
            Twist::Unreadable => {
                backup.record = Err(BackupError::CorruptAnnotation {
                    name: backup.daemonset.name.clone(),
                    annotation: "selfhost.dev/original-template",
                    reason: "expected value at line 1 column 1".into(),
                });
            }
            Twist::OtherTarget => {
                backup.record = Ok(BackupRecord {
                    origin: BackupOrigin::Selfhost {
                        target: version("v1.33.0"),
                    },
                    original_template: original,
                });
            }
            Twist::DrainBegun => {
                backup
                    .daemonset
                    .annotations
                    .insert(BACKUP_DRAIN_STEP_AT.into(), time::format(t(140)));
            }
        }
        obs
    }
}

/// The pods that serve, by the engine's own definition.
fn serving(obs: &Observation, target: &Target) -> Vec<String> {
    obs.all_pods()
        .filter(|pod| pod_serves(obs, target, pod).is_ok())
        .map(|pod| pod.name.clone())
        .collect()
}

/// The pods a step can take away.
fn affected(step: &Step, obs: &Observation) -> Vec<String> {
    let real = obs.real.as_ref();
    match step {
        // An update replaces every pod not already on its template: all of them, to be safe.
        Step::UpdateReal(update) => match real {
            Some(real) if !template_applied(real, &update.template) => {
                real.pods.iter().map(|p| p.name.clone()).collect()
            }
            _ => Vec::new(),
        },
        // A rollback replaces the pods on the target template; the others already run the
        // original revision, which the DaemonSet controller reuses.
        Step::RollBack { update, .. } => match real {
            Some(real) if !template_applied(real, &update.template) => real
                .pods
                .iter()
                .filter(|p| real.is_current(p))
                .map(|p| p.name.clone())
                .collect(),
            _ => Vec::new(),
        },
        Step::RemoveBackup { .. } => obs
            .backup
            .iter()
            .flat_map(|b| b.daemonset.pods.iter().map(|p| p.name.clone()))
            .collect(),
        Step::DeleteOldPod { pod, .. } | Step::StopPossibleLeaseHolder { pod, .. } => {
            vec![pod.clone()]
        }
        _ => Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(768))]

    /// Never delete or update anything while the only serving apiservers would be lost.
    #[test]
    fn no_step_takes_away_the_last_serving_apiserver(scenario in scenario()) {
        let scenario = Scenario { component: Component::ApiServer, ..scenario };
        let target = scenario.target();
        let obs = scenario.build();
        let step = decide(&obs, &target);
        let serving = serving(&obs, &target);
        let affected = affected(&step, &obs);
        let survivors: Vec<&String> = serving.iter().filter(|p| !affected.contains(p)).collect();
        prop_assert!(
            serving.is_empty() || !survivors.is_empty(),
            "{} takes away every serving apiserver {:?}", step.description(), serving
        );
    }

    /// Before the real DaemonSet is changed, the backup serves on every node it runs on.
    #[test]
    fn the_real_daemonset_is_updated_only_when_the_backup_covers_every_node(scenario in scenario()) {
        let target = scenario.target();
        let obs = scenario.build();
        if let Step::UpdateReal(_) = decide(&obs, &target) {
            let real = obs.real.as_ref().expect("real");
            let backup = obs.backup.as_ref().expect("an update needs a backup");
            for node in real.nodes() {
                prop_assert!(
                    backup.daemonset.pods_on(node).any(|p| pod_serves(&obs, &target, p).is_ok()),
                    "{node} is not covered"
                );
            }
        }
    }

    /// A held rollout replaces an old pod only when every new pod on another node serves and
    /// the backup serves on the pod's own node: at most one node at a time runs a new
    /// kube-apiserver not proven to serve.
    #[test]
    fn a_held_rollout_replaces_one_node_at_a_time(scenario in scenario()) {
        let scenario = Scenario { component: Component::ApiServer, held: scenario.updated, ..scenario };
        let target = scenario.target();
        let obs = scenario.build();
        if let Step::DeleteOldPod { pod, node, .. } = decide(&obs, &target) {
            let real = obs.real.as_ref().expect("real");
            let Some(deleted) = real.pods.iter().find(|p| p.name == pod) else {
                // An old backup pod lingering Terminating, deleted with a shorter grace.
                return Ok(());
            };
            if deleted.is_terminating() {
                return Ok(());
            }
            for other in real.pods.iter().filter(|p| p.node.as_deref() != Some(node.as_str())) {
                if real.is_current(other) && !other.is_terminating() {
                    prop_assert!(
                        pod_serves(&obs, &target, other).is_ok(),
                        "{pod} deleted while {} does not serve", other.name
                    );
                }
            }
            let backup = obs.backup.as_ref().expect("a held rollout has a backup");
            prop_assert!(
                backup.daemonset.pods_on(&node).any(|p| pod_serves(&obs, &target, p).is_ok()),
                "{node} is not covered"
            );
        }
    }

    /// A leader Lease is handed over only when no process that could hold it still runs on
    /// its holder's node (on any node, when its host names none), or when only one process of
    /// the component can run at all (it alone can hold the Lease after the hand-over).
    #[test]
    fn a_lease_is_never_taken_from_a_holder_that_may_be_alive(scenario in scenario()) {
        let component = if scenario.component == Component::Scheduler {
            Component::Scheduler
        } else {
            Component::ControllerManager
        };
        let scenario = Scenario { component, ..scenario };
        let obs = scenario.build();
        if let Step::HandOverLease { .. } = decide(&obs, &target(component)) {
            let lease = obs.leader_lease.as_ref().expect("lease");
            let acquired = lease.acquire_time.expect("acquired");
            let host = lease.holder_hostname().expect("holder");
            // Every node where the holder may run: the one its host names, or all of them.
            let hosts: Vec<&str> = match obs.place_host(host) {
                HostPlacement::Node(node) => vec![node.name.as_str()],
                HostPlacement::AnyNode => obs.nodes.iter().map(|n| n.name.as_str()).collect(),
            };
            let name = component.name();
            let may_run = obs
                .all_pods()
                .filter(|p| {
                    let stopped = p.is_terminating() && !p.is_running(name)
                        && p.main_container(name).is_some_and(|c| {
                            !matches!(c.state, crate::observation::ContainerState::Unknown)
                        });
                    let current = p.node.as_deref().is_some_and(|n| obs.node_is_ready(n));
                    !(stopped && current)
                })
                .count();
            if may_run <= 1 {
                return Ok(());
            }
            for pod in obs
                .all_pods()
                .filter(|p| p.node.as_deref().is_some_and(|n| hosts.contains(&n)))
            {
                let node = pod.node.as_deref().unwrap_or_default();
                // The earliest its process can have started: the kubelet's whole-second start,
                // or our own write for a pod that write created (the generator may give such
                // a pod an impossible earlier start; the bound itself is tested in
                // `attribution`).
                let started = crate::pivot::serving::started_no_earlier_than(&obs, pod);
                prop_assert!(
                    started.is_none_or(|s| s > acquired),
                    "{} on {node} runs since {started:?}, before the acquisition at {acquired}",
                    pod.name
                );
                prop_assert!(
                    pod.is_running(component.name())
                        == pod.process_started_at(component.name()).is_some()
                );
            }
        }
    }

    /// A controller-manager or scheduler pod is deleted only while another process of the
    /// role runs on, Ready and not being deleted, on a Ready node: one to lead, and to have
    /// the deleted pod recreated (its DaemonSet controller, its scheduler).
    #[test]
    fn a_controller_pod_is_deleted_only_while_another_runs_on(scenario in scenario()) {
        let component = if scenario.component == Component::Scheduler {
            Component::Scheduler
        } else {
            Component::ControllerManager
        };
        let scenario = Scenario { component, ..scenario };
        let obs = scenario.build();
        if let Step::DeleteOldPod { pod, .. } | Step::StopPossibleLeaseHolder { pod, .. } =
            decide(&obs, &target(component))
        {
            let name = component.name();
            prop_assert!(
                obs.all_pods().any(|p| p.name != pod
                    && p.is_running(name)
                    && p.ready
                    && !p.is_terminating()
                    && p.node.as_deref().is_some_and(|n| obs.node_is_ready(n))),
                "{pod} deleted with no other process running"
            );
        }
    }

    /// The same observation always gives the same step.
    #[test]
    fn next_step_is_deterministic(scenario in scenario()) {
        let target = scenario.target();
        let obs = scenario.build();
        prop_assert_eq!(decide(&obs, &target), decide(&obs.clone(), &target.clone()));
    }

    /// Done does not depend on the operator's options or on when the run started.
    #[test]
    fn done_stays_done(scenario in scenario(), force: bool, no_rollback: bool, earlier in 0i64..10_000) {
        let target = scenario.target();
        let obs = scenario.build();
        if let Step::Done { .. } = decide(&obs, &target) {
            let mut other = target.clone();
            other.options.force = force;
            other.options.no_rollback = no_rollback;
            other.run_started_at = super::builder::t(-earlier);
            let again = decide(&obs, &other);
            prop_assert!(matches!(again, Step::Done { .. }), "became {}", again.description());
        }
    }

    /// Every wait can end: it has a deadline, and is re-checked no later than it.
    #[test]
    fn every_wait_has_a_deadline(scenario in scenario()) {
        let target = scenario.target();
        let obs = scenario.build();
        let step = decide(&obs, &target);
        if let Some(wait) = step.wait() {
            let deadline = wait.deadline.expect("a deadline");
            let recheck = wait.recheck_at.expect("a recheck time");
            prop_assert!(recheck <= deadline);
            prop_assert!(!wait.pending.is_empty(), "{} waits for nothing", step.name());
            prop_assert!(!wait.watch.is_empty());
        }
    }

    /// Every step comes from the decision of the phase the observation is in, whatever the
    /// backup, the options or the pods.
    #[test]
    fn every_step_belongs_to_the_phase_it_is_in(scenario in scenario(), twist in twist(), force: bool) {
        let mut target = scenario.target();
        target.options.force = force;
        let obs = twist.apply(scenario.build());
        let phase = phase(&obs, &target);
        let step = decide(&obs, &target);
        prop_assert!(
            steps_of(phase).contains(&step.name()),
            "{} is not a step of {}: {}",
            step.name(),
            phase.name(),
            step.description()
        );
    }
}
