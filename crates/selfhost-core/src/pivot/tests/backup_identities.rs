//! A run resumed after a kill during the apiserver's rollout proves the backup serves from
//! the record the update left, and from nothing weaker.
//!
//! Three nodes, each with one identity Lease its processes share. The first run created the
//! backup at `t(1)`, saw each backup process take its host's Lease over at `t(3)`, and updated
//! the real DaemonSet at [`UPDATE_AT`]. The target never serves, but a probe on the shared port
//! reports its pods Ready. The re-run starts at `t(350)`, after the rollout's deadline, and has
//! seen no hand-over: on each host the backup's holder alone renews the Lease.

use super::builder::{Pod, UPDATE_AT, World, t, target};
use super::{check, decide, row};
use crate::component::Component::ApiServer;
use crate::observation::{IdentitySighting, Observation};
use crate::pivot::{BACKUP_IDENTITIES, RecordedIdentity, Step};

const NODES: [&str; 3] = ["cp-1", "cp-2", "cp-3"];

fn lease(node: &str) -> String {
    format!("apiserver-{node}-hash")
}

fn holder(node: &str, process: &str) -> String {
    format!("{}_{process}", lease(node))
}

/// What the first run saw of the backup's holders.
#[derive(Clone, Copy)]
enum Seen {
    /// Each taking its host's Lease over from the old pod's holder.
    TakingOver,
    /// Only renewing beside the old pod's holder, which the engine saw before it created the
    /// backup (processes started in the same second: the start times order nothing).
    AfterTheOldOnes,
    /// Only renewing, beside holders first seen no earlier (or at unknown times).
    Renewing,
}

/// The first run, at `t(10)`: backup pods Ready on every node (created at `t(1)`), their
/// holders seen as `seen` says.
fn first_run(seen: Seen) -> Observation {
    let mut world = World::steady(ApiServer, 3).backup();
    for node in NODES {
        world = world.backup_pod(node, Pod::ReadyNoIdentity { started: 2 });
    }
    let mut world = world.at(10);
    world.obs.identity_leases = NODES
        .iter()
        .flat_map(|node| {
            let mut old = sighting(node, "old", None, 9);
            let mut backup = sighting(node, "backup", None, 9);
            match seen {
                Seen::TakingOver => backup.holder_since = Some(t(3)),
                Seen::AfterTheOldOnes => {
                    old.first_seen = Some(t(0));
                    backup.first_seen = Some(t(3));
                }
                Seen::Renewing => {}
            }
            [old, backup]
        })
        .collect();
    world.build()
}

fn sighting(
    node: &str,
    process: &str,
    since: Option<k8s_openapi::jiff::Timestamp>,
    renewed: i64,
) -> IdentitySighting {
    IdentitySighting {
        lease: lease(node),
        hostname: Some(node.to_string()),
        holder: holder(node, process),
        holder_since: since,
        last_renewed: Some(t(renewed)),
        first_seen: None,
    }
}

/// What the first run's update records, as the annotation's value (`None`: removed).
fn recorded(obs: &Observation) -> Option<String> {
    match decide(obs, &target(ApiServer)) {
        Step::UpdateReal(update) => {
            let value = update.set_annotations.get(BACKUP_IDENTITIES).cloned();
            assert_eq!(
                value.is_none(),
                update
                    .remove_annotations
                    .iter()
                    .any(|k| k == BACKUP_IDENTITIES),
                "the record is either written or removed"
            );
            value
        }
        other => panic!("expected update-real, got {}", other.description()),
    }
}

/// The re-run at `t(350)`: the real DaemonSet on the target, its never-serving pods started at
/// `t(31)` and reported Ready; each backup holder renewed at `t(348)`, never seen taking over.
/// `edit` changes the world before the record goes on, `record` is the annotation's value.
fn resumed(record: Option<String>, edit: impl FnOnce(World) -> World) -> Observation {
    let mut world = World::steady(ApiServer, 3).backup();
    for node in NODES {
        world = world.backup_pod(node, Pod::ReadyNoIdentity { started: 2 });
    }
    world = world.updated();
    for node in NODES {
        world = world.new_pod(
            node,
            Pod::ReadyNoIdentity {
                started: UPDATE_AT + 1,
            },
        );
    }
    let mut world = edit(world.at(350));
    if let Some(record) = record {
        world
            .real_mut()
            .annotations
            .insert(BACKUP_IDENTITIES.into(), record);
    }
    if world
        .obs
        .identity_leases
        .iter()
        .all(|s| s.holder.contains("-old"))
    {
        world.obs.identity_leases = NODES
            .iter()
            .map(|node| sighting(node, "backup", None, 348))
            .collect();
    }
    world.build()
}

/// The record with each entry changed by `edit`.
fn edited(record: &str, edit: impl Fn(&mut RecordedIdentity)) -> String {
    let mut entries: Vec<RecordedIdentity> = serde_json::from_str(record).expect("a record");
    entries.iter_mut().for_each(edit);
    serde_json::to_string(&entries).expect("serialises")
}

#[test]
fn the_update_records_the_holder_attributed_to_each_backup_pod() {
    let record = recorded(&first_run(Seen::TakingOver)).expect("a record");
    let entries: Vec<RecordedIdentity> = serde_json::from_str(&record).expect("JSON");
    assert_eq!(entries.len(), 3, "{entries:?}");
    for node in NODES {
        let entry = entries
            .iter()
            .find(|e| e.node == node)
            .expect("one per node");
        assert_eq!(entry.holder, holder(node, "backup"), "not the old pod's");
        assert_eq!(entry.lease, lease(node));
        assert_eq!(
            entry.pod_uid,
            format!("uid-temp-upgrade-self-hosted-kube-apiserver-{node}")
        );
        assert_eq!(entry.restarts, 0);
    }
}

#[test]
fn a_backup_proven_only_by_counting_is_not_recorded() {
    // Two holders for two processes on each host prove both serve, but say nothing about
    // which holder is the backup's: the record would be a guess.
    assert_eq!(recorded(&first_run(Seen::Renewing)), None);
}

#[test]
fn a_holder_left_once_the_old_ones_are_eliminated_is_the_backups() {
    // The old pods' holders were seen before the backup existed, so they are not a backup
    // process's; with two processes and two holders per host, the other holder is.
    let record = recorded(&first_run(Seen::AfterTheOldOnes)).expect("a record");
    let entries: Vec<RecordedIdentity> = serde_json::from_str(&record).expect("JSON");
    assert_eq!(entries.len(), 3, "{entries:?}");
    assert!(
        entries
            .iter()
            .all(|e| e.holder == holder(&e.node, "backup")),
        "{entries:?}"
    );
    // Not for a backup adopted long after it was created: its pods may predate the adoption.
    let mut adopted = first_run(Seen::AfterTheOldOnes);
    let backup = adopted.backup.as_mut().expect("backup");
    backup.daemonset.created = Some(t(-600));
    assert_eq!(recorded(&adopted), None);
    // Nor with a third process on a host (one more holder first seen after the backup).
    let mut crowded = first_run(Seen::AfterTheOldOnes);
    crowded
        .identity_leases
        .push(sighting("cp-1", "stranger", None, 9));
    let record = recorded(&crowded).expect("the other nodes are recorded");
    let entries: Vec<RecordedIdentity> = serde_json::from_str(&record).expect("JSON");
    assert!(entries.iter().all(|e| e.node != "cp-1"), "{entries:?}");
}

#[test]
fn a_resumed_run_proves_the_backup_by_the_record_and_rolls_back() {
    let record = recorded(&first_run(Seen::TakingOver)).expect("a record");
    let restarted = |mut w: World| {
        for pod in &mut w.backup_mut().daemonset.pods {
            if pod.node.as_deref() == Some("cp-2") {
                pod.containers[0].restart_count = 1;
            }
        }
        w
    };
    check(vec![
        row(
            "the record holds on every node: roll back while the backup serves",
            resumed(Some(record.clone()), |w| w),
            target(ApiServer),
            "roll-back",
            &["not complete 300s after"],
        ),
        row(
            "no record (a run before this fix, or a backup proven by counting): the re-run \
             cannot tell the backup's holder from the new pod's",
            resumed(None, |w| w),
            target(ApiServer),
            "failed",
            &["rolling back is not safe", "no identity Lease of its own"],
        ),
        row(
            "a record that cannot be read proves nothing",
            resumed(Some("{not json".into()), |w| w),
            target(ApiServer),
            "failed",
            &["rolling back is not safe"],
        ),
        row(
            "one backup container restarted since (a new process): the other records hold, \
             and no new pod serves, so rolling back is safe",
            resumed(Some(record.clone()), restarted),
            target(ApiServer),
            "roll-back",
            &[],
        ),
        row(
            "a record of another process start is not this process",
            resumed(
                Some(edited(&record, |e| {
                    e.process_started_at = "2027-01-01T00:00:03Z".into()
                })),
                |w| w,
            ),
            target(ApiServer),
            "failed",
            &["rolling back is not safe"],
        ),
        row(
            "a record of pods of another backup names no pod here",
            resumed(
                Some(edited(&record, |e| e.pod_uid.push_str("-earlier"))),
                |w| w,
            ),
            target(ApiServer),
            "failed",
            &["rolling back is not safe"],
        ),
        row(
            "a recorded holder on another host's Lease vouches for nothing here",
            resumed(
                Some(edited(&record, |e| {
                    let other = if e.node == "cp-1" { "cp-2" } else { "cp-1" };
                    e.holder = holder(other, "backup");
                    e.lease = lease(other);
                })),
                |w| w,
            ),
            target(ApiServer),
            "failed",
            &["rolling back is not safe"],
        ),
    ]);
}

#[test]
fn a_record_holds_only_for_the_same_process_while_its_holder_renews() {
    // cp-2's backup container restarted since the record (a new process, a new holder);
    // cp-3's recorded holder was last renewed 50 s ago (its process stopped serving).
    let record = recorded(&first_run(Seen::TakingOver)).expect("a record");
    let obs = resumed(Some(record), |mut w| {
        for pod in &mut w.backup_mut().daemonset.pods {
            if pod.node.as_deref() == Some("cp-2") {
                pod.containers[0].restart_count = 1;
            }
        }
        w.obs.identity_leases = vec![
            sighting("cp-1", "backup", None, 348),
            sighting("cp-2", "backup", None, 348),
            sighting("cp-3", "backup", None, 300),
        ];
        w
    });
    let backup = obs.backup.as_ref().expect("backup");
    let serving: Vec<&str> = backup
        .daemonset
        .pods
        .iter()
        .filter(|p| crate::pivot::pod_serves(&obs, &target(ApiServer), p).is_ok())
        .filter_map(|p| p.node.as_deref())
        .collect();
    assert_eq!(serving, ["cp-1"]);
}

#[test]
fn a_record_never_makes_a_pod_of_the_real_daemonset_serve() {
    let record = recorded(&first_run(Seen::TakingOver)).expect("a record");
    let obs = resumed(Some(record), |w| w);
    let real = obs.real.as_ref().expect("real");
    for pod in &real.pods {
        assert!(
            crate::pivot::pod_serves(&obs, &target(ApiServer), pod).is_err(),
            "{} is Ready by a probe the backup answered, and publishes nothing",
            pod.name
        );
    }
}
