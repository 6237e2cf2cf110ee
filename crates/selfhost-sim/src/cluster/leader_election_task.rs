//! Leader election for the whole cluster, as a task: every kube-controller-manager and
//! kube-scheduler process the kubelets run (static pods, DaemonSet pods, backups alike) runs a
//! [`Candidate`] against the real Leases `kube-system/kube-controller-manager` and
//! `kube-system/kube-scheduler`, read and written through the API like any other client's —
//! so nothing happens while the API is down, and a test or the engine can read, clear or
//! delete the Leases over HTTP.
//!
//! A process takes part from the moment it has opened its ports (kube-controller-manager and
//! kube-scheduler serve their health port before they elect) until it is told to stop
//! (SIGTERM: a stopping process leads no more, and releases its Lease only if the
//! [`LeaseRelease`] policy says its version does) or is gone (crashed, killed, its machine
//! off: the Lease stays with it until it expires). A holder that cannot renew within the
//! renew deadline exits with `leaderelection lost`, and its kubelet restarts it under the
//! crash-loop back-off. A process that starts while the API is unreachable exits at once
//! (switchable): before electing, both components read
//! `kube-system/extension-apiserver-authentication` for their delegated authentication and
//! give up when they cannot — so an outage longer than the renew deadline becomes a crash
//! loop whose back-off outlasts the outage (the measured 38–92 s without a leader).
//!
//! The candidates' moments are processed in time order, each at the instant it was due, so a
//! busy machine delays the whole election rather than reordering it: a late task never makes
//! a healthy leader miss its deadline or a standby see a renewed Lease as expired, and what
//! was due before a process stopped is done before its stop is taken in.
//!
//! The acting process of each role is published through [`LeaseHolder`], the self-hosting
//! model's leader policy: it is whichever process believes it leads (the one the Lease names,
//! if two do), as long as that process still runs and is not stopping.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::api::{CallError, ClusterApi, typed};
use super::leader_election::{
    Candidate, Due, LEADER_LEASE_NAMESPACE, LeaderElectionTimings, LeaderRecord, LeaseRelease,
    leader_lease_name,
};
use super::leader_gated_loop::sleep_until;
use super::model::{ControlPlaneSnapshot, LeaderPolicy, Leadership, ProcessRef, Role};
use super::node_agent::NodeInput;
use super::process_table::ProcessTable;
use crate::controllers::kubelet::NodeState;
use crate::error::ApiError;
use crate::resources::LEASES;
use crate::store::{Subresource, meta};

/// The exit code of `klog.Fatalf`, which both components call when they lose their Lease.
const LOST_EXIT_CODE: i32 = 255;
/// The exit code of a Go panic: `leaderelection.RunOrDie` panics on a clock client-go rejects.
const BAD_CONFIG_EXIT_CODE: i32 = 2;

/// What a starting component says when its delegated authentication cannot read
/// `kube-system/extension-apiserver-authentication`.
const NO_API_AT_START: &str = "unable to load configmap based request-header-client-ca-file: \
     the API server is unreachable";

/// The roles, in a fixed order.
const ROLES: [Role; 2] = [Role::ControllerManager, Role::Scheduler];

/// The acting process of each role, as leader election last decided (shared by the task and
/// the policy).
#[derive(Debug, Default)]
pub(crate) struct Holders {
    by_role: Mutex<BTreeMap<Role, ProcessRef>>,
}

impl Holders {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<Role, ProcessRef>> {
        self.by_role.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The leader policy of Lease-based election: the process leader election named acts, while
/// its kubelet still shows it running and not stopping (decided the moment the kubelet
/// publishes, so a leader that just exited never acts again).
#[derive(Debug, Clone)]
pub(crate) struct LeaseHolder {
    holders: Arc<Holders>,
}

impl LeaseHolder {
    pub(crate) fn new(holders: Arc<Holders>) -> Self {
        LeaseHolder { holders }
    }
}

impl LeaderPolicy for LeaseHolder {
    fn leader(
        &self,
        role: Role,
        snapshot: &ControlPlaneSnapshot,
        _current: &Leadership,
    ) -> Leadership {
        let Some(holder) = self.holders.lock().get(&role).cloned() else {
            return Leadership::Vacant;
        };
        let runs = snapshot.nodes.get(&holder.node).is_some_and(|n| {
            n.containers.iter().any(|c| {
                c.process.is_some()
                    && c.process == holder.process
                    && c.identity == holder.identity
                    && !c.stopping
            })
        });
        if runs {
            Leadership::Held(holder)
        } else {
            Leadership::Vacant
        }
    }
}

/// One electing process.
struct Member {
    role: Role,
    process: ProcessRef,
    image: Option<String>,
    client: Candidate,
    /// Its election clock, from its flags.
    timings: LeaderElectionTimings,
}

/// Whether a process that no longer elects was told to stop, rather than crashed or killed
/// with its machine: its pod is stopping, or already gone from a node that is up (the task
/// may look only after the process exited).
fn was_stopped(snapshot: &ControlPlaneSnapshot, process: &ProcessRef) -> bool {
    let Some(node) = snapshot.nodes.get(&process.node) else {
        return false;
    };
    if node.state == NodeState::Down {
        return false;
    }
    let mut pod = node
        .containers
        .iter()
        .filter(|c| c.pod.uid == process.pod.uid)
        .peekable();
    pod.peek().is_none() || pod.any(|c| c.terminating)
}

/// When a failed attempt due at `at` counts: a standby's at once, a holder's when the task
/// actually made it. A late task catches up on what was due, but what it finds now (an API
/// that just went down) says nothing about the moments it missed; counting a holder's
/// failure from now keeps a busy machine from shortening its renew deadline.
fn failure_time(client: &Candidate, at: Instant) -> Instant {
    if client.leading_since().is_some() {
        Instant::now().max(at)
    } else {
        at
    }
}

/// The election task.
pub(crate) struct LeaderElection {
    pub api: ClusterApi,
    pub process_table: Arc<ProcessTable>,
    pub holders: Arc<Holders>,
    /// Each node's kubelet, to make a process that lost its Lease exit.
    pub inputs: HashMap<String, mpsc::UnboundedSender<NodeInput>>,
    /// The election clock of a process that passes no election flag.
    pub timings: LeaderElectionTimings,
    pub release: LeaseRelease,
    /// A process that starts while the API is unreachable exits at once.
    pub start_needs_api: bool,
}

/// The task's memory.
#[derive(Default)]
struct Electorate {
    /// By holder identity (unique per process).
    members: BTreeMap<String, Member>,
    /// The holder each Lease named when last read or written.
    lease_holders: BTreeMap<Role, String>,
    /// Processes that lost their Lease and are exiting: they elect no more.
    lost: BTreeSet<String>,
}

impl LeaderElection {
    /// Runs until shutdown.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let mut changes = self.process_table.subscribe();
        let mut electorate = Electorate::default();
        loop {
            // What was due happened before the processes changed: a late task must not
            // skip the renewals of a leader that stopped meanwhile.
            self.run_due(&mut electorate, Instant::now());
            changes.borrow_and_update();
            let snapshot = self.process_table.snapshot();
            self.sync(&mut electorate, &snapshot, Instant::now());
            self.run_due(&mut electorate, Instant::now());
            self.publish(&electorate);
            let wake_at = electorate.members.values().map(|m| m.client.next_at).min();
            tokio::select! {
                _ = shutdown.cancelled() => return,
                r = changes.changed() => if r.is_err() { return },
                _ = sleep_until(wake_at) => {}
            }
        }
    }

    /// Takes in the processes that started electing and lets go of those that stopped or are
    /// gone.
    fn sync(&self, e: &mut Electorate, snapshot: &ControlPlaneSnapshot, now: Instant) {
        let mut running = BTreeMap::new();
        for (node, containers) in &snapshot.nodes {
            for c in &containers.containers {
                let role = ROLES
                    .into_iter()
                    .find(|r| c.binary.as_deref() == Some(r.binary()));
                let (Some(role), Some(identity), Some(process)) = (role, &c.identity, c.process)
                else {
                    continue;
                };
                if c.stopping || c.listening_since.is_none() {
                    continue;
                }
                let member = Member {
                    role,
                    process: ProcessRef {
                        node: node.clone(),
                        pod: c.pod.clone(),
                        container: c.container.clone(),
                        process: Some(process),
                        identity: Some(identity.clone()),
                    },
                    image: c.image.clone(),
                    client: Candidate::new(identity, now),
                    timings: self.timings,
                };
                running.insert(identity.clone(), (member, c.command_line.clone()));
            }
        }
        let gone: Vec<String> = e
            .members
            .keys()
            .filter(|identity| !running.contains_key(*identity))
            .cloned()
            .collect();
        for identity in gone {
            let Some(member) = e.members.remove(&identity) else {
                continue;
            };
            if was_stopped(snapshot, &member.process) {
                self.release(e, &member);
            }
        }
        e.lost.retain(|identity| running.contains_key(identity));
        for (identity, (mut member, command_line)) in running {
            if e.lost.contains(&identity) || e.members.contains_key(&identity) {
                continue;
            }
            match self.timings.for_command_line(&command_line) {
                Ok(own) => member.timings = own,
                Err(refusal) => {
                    // client-go's `RunOrDie` panics on a configuration it rejects.
                    self.exit(&member, BAD_CONFIG_EXIT_CODE, &refusal);
                    e.lost.insert(identity);
                    continue;
                }
            }
            if self.start_needs_api && !self.api.is_up() {
                self.exit(&member, 1, NO_API_AT_START);
                e.lost.insert(identity);
                continue;
            }
            e.members.insert(identity, member);
        }
    }

    /// A stopping process releases its Lease if its version does and it leads.
    fn release(&self, e: &mut Electorate, member: &Member) {
        if !self.release.releases(member.role, member.image.as_deref()) {
            return;
        }
        let Some(record) = member.client.release(Timestamp::now()) else {
            return;
        };
        let name = leader_lease_name(member.role);
        let Ok(current) = self.api.get(&LEASES, LEADER_LEASE_NAMESPACE, name) else {
            return;
        };
        let still_mine = typed::<Lease>(&current)
            .is_some_and(|l| LeaderRecord::of(&l).holder == member.client.identity());
        if still_mine && self.update(member.role, &current, &record).is_ok() {
            e.lease_holders.insert(member.role, String::new());
        }
    }

    /// Processes every moment due by `now`, earliest first, each at the instant it was due.
    fn run_due(&self, e: &mut Electorate, now: Instant) {
        loop {
            let due = e
                .members
                .iter()
                .filter(|(_, m)| m.client.next_at <= now)
                .min_by_key(|(identity, m)| (m.client.next_at, identity.as_str()))
                .map(|(identity, _)| identity.clone());
            let Some(identity) = due else { return };
            let Some(mut member) = e.members.remove(&identity) else {
                return;
            };
            let at = member.client.next_at;
            match member.client.due() {
                Due::Lost => {
                    self.lose(&member);
                    e.lost.insert(identity);
                }
                Due::Try => {
                    self.try_acquire_or_renew(e, &mut member, at);
                    e.members.insert(identity, member);
                }
            }
        }
    }

    /// client-go's `tryAcquireOrRenew`, at `at`.
    fn try_acquire_or_renew(&self, e: &mut Electorate, member: &mut Member, at: Instant) {
        let timings = member.timings;
        let t = &timings;
        let name = leader_lease_name(member.role);
        let current = match self.api.get(&LEASES, LEADER_LEASE_NAMESPACE, name) {
            Ok(obj) => Some(obj),
            Err(err) if err.is_not_found() => None,
            Err(_) => {
                member.client.failed(failure_time(&member.client, at), t);
                return;
            }
        };
        let record = current
            .as_deref()
            .and_then(typed::<Lease>)
            .map(|l| LeaderRecord::of(&l));
        if let Some(r) = &record {
            e.lease_holders.insert(member.role, r.holder.clone());
        }
        let Some(wanted) = member
            .client
            .desired(record.as_ref(), at, Timestamp::now(), t)
        else {
            member.client.failed(failure_time(&member.client, at), t);
            return;
        };
        let written = match &current {
            None => self.create(member.role, &wanted),
            Some(obj) => self.update(member.role, obj, &wanted),
        };
        match written {
            Ok(()) => {
                e.lease_holders.insert(member.role, wanted.holder.clone());
                member.client.succeeded(wanted, at, t);
            }
            Err(_) => member.client.failed(failure_time(&member.client, at), t),
        }
    }

    fn create(&self, role: Role, record: &LeaderRecord) -> Result<(), CallError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(leader_lease_name(role).to_string()),
                namespace: Some(LEADER_LEASE_NAMESPACE.to_string()),
                ..ObjectMeta::default()
            },
            spec: Some(record.spec()),
        };
        let body = serde_json::to_value(&lease).unwrap_or(Value::Null);
        self.api
            .create(&LEASES, LEADER_LEASE_NAMESPACE, body, role.binary())
            .map(|_| ())
    }

    /// Replaces the record, provided the Lease is still the version that was read.
    fn update(&self, role: Role, read: &Value, record: &LeaderRecord) -> Result<(), CallError> {
        let version = meta::resource_version(read).map(str::to_string);
        let spec = serde_json::to_value(record.spec()).unwrap_or(Value::Null);
        let name = leader_lease_name(role);
        self.api
            .modify(
                &LEASES,
                LEADER_LEASE_NAMESPACE,
                name,
                Subresource::Main,
                role.binary(),
                |cur| {
                    if meta::resource_version(cur).map(str::to_string) != version {
                        return Err(ApiError::conflict(
                            &LEASES,
                            name,
                            "the object has been modified; please apply your changes to the latest version and try again",
                        ));
                    }
                    let mut new = cur.clone();
                    new["spec"] = spec;
                    Ok(new)
                },
            )
            .map(|_| ())
    }

    /// The holder missed its renew deadline: the process exits (`leaderelection lost`).
    fn lose(&self, member: &Member) {
        self.exit(member, LOST_EXIT_CODE, "leaderelection lost");
    }

    /// Tells the member's kubelet that its process exits.
    fn exit(&self, member: &Member, code: i32, message: &str) {
        let Some(process) = member.process.process else {
            return;
        };
        tracing::info!(
            identity = member.client.identity(),
            role = member.role.binary(),
            code,
            message,
            "control-plane process exits"
        );
        if let Some(tx) = self.inputs.get(&member.process.node) {
            // The kubelet task only stops at shutdown, and then nobody needs the exit.
            let _ = tx.send(NodeInput::ExitProcess {
                process,
                code,
                message: message.to_string(),
            });
        }
    }

    /// Hands the acting process of each role to the model, if it changed.
    fn publish(&self, e: &Electorate) {
        let mut acting = BTreeMap::new();
        for role in ROLES {
            let leaders: Vec<&Member> = e
                .members
                .values()
                .filter(|m| m.role == role && m.client.leading_since().is_some())
                .collect();
            let named = e.lease_holders.get(&role);
            let chosen = leaders
                .iter()
                .find(|m| Some(&m.client.identity().to_string()) == named)
                .or_else(|| leaders.iter().max_by_key(|m| m.client.leading_since()));
            if let Some(m) = chosen {
                acting.insert(role, m.process.clone());
            }
        }
        let changed = {
            let mut holders = self.holders.lock();
            let changed = *holders != acting;
            *holders = acting;
            changed
        };
        if changed {
            self.process_table.redecide();
        }
    }
}
