//! Laws of the pivot behind each node's API front, over generated layouts and listening
//! addresses.

use std::net::IpAddr;

use proptest::prelude::*;

use super::builder::{OLD, Pod, World, front_target, front_target_with, on_front, template};
use super::decide;
use crate::component::Component::ApiServer;
use crate::front::{FrontLayout, bound_address, readiness_probed_at};
use crate::pivot::{Serving, Step, pod_serves};

fn layout() -> impl Strategy<Value = FrontLayout> {
    (any::<[u8; 4]>(), any::<[u8; 4]>()).prop_filter_map("two specific addresses", |(a, b)| {
        FrontLayout::new(IpAddr::from(a), IpAddr::from(b)).ok()
    })
}

/// Where a generated pod listens: the DaemonSet's address, the backup's, or every address.
#[derive(Debug, Clone, Copy)]
enum Listen {
    Backend,
    Backup,
    Everywhere,
}

fn listen() -> impl Strategy<Value = Listen> {
    prop_oneof![
        Just(Listen::Backend),
        Just(Listen::Backup),
        Just(Listen::Everywhere)
    ]
}

proptest! {
    /// Behind a front, a backup never binds the real pods' address: it listens, and is
    /// probed, on the layout's backup address, whatever the layout and the cluster's size.
    #[test]
    fn behind_a_front_a_backup_never_binds_the_reals_address(
        layout in layout(),
        nodes in 1usize..4,
        port_sharing in any::<bool>(),
    ) {
        let mut world = World::steady(ApiServer, nodes).behind_front_with(layout);
        if !port_sharing {
            world = world.live_without_port_sharing();
        }
        let obs = world.at(1).build();
        let step = decide(&obs, &front_target_with(ApiServer, layout));
        let Step::CreateBackup { daemonset } = step else {
            return Err(TestCaseError::fail(format!("expected create-backup: {}", step.description())));
        };
        let spec = daemonset.spec.and_then(|s| s.template.spec).expect("a pod spec");
        let real = obs.real.as_ref().and_then(|r| r.template.spec.as_ref()).expect("real");
        prop_assert_eq!(bound_address(&spec), Some(layout.backup));
        prop_assert_eq!(readiness_probed_at(&spec), Some(layout.backup));
        prop_assert_ne!(bound_address(&spec), bound_address(real));
    }

    /// A Ready kube-apiserver counts as serving by its own address exactly when it listens
    /// on a specific address, probed there, that the other process of its node does not
    /// listen on.
    #[test]
    fn own_address_is_trusted_only_where_no_other_process_may_answer(
        backup in listen(),
        real in listen(),
    ) {
        let layout = FrontLayout::default();
        let address = |l: Listen| match l {
            Listen::Backend => Some(layout.backend),
            Listen::Backup => Some(layout.backup),
            Listen::Everywhere => None,
        };
        let place = |l: Listen| {
            let plain = template(ApiServer, OLD, true);
            match address(l) {
                Some(a) => on_front(plain, a),
                None => plain,
            }
        };
        let mut world = World::steady(ApiServer, 1);
        world.real_mut().template = place(real);
        let mut world = world
            .backup()
            .backup_pod("cp-1", Pod::ReadyNoIdentity { started: 5 });
        world.backup_mut().daemonset.template.spec = place(backup).spec;
        let obs = world.at(6).build();
        let pod = obs.backup.as_ref().expect("backup").daemonset.pods[0].clone();
        let own = matches!(
            pod_serves(&obs, &front_target(ApiServer), &pod),
            Ok(Serving::OwnAddress { .. })
        );
        let expected = matches!((address(backup), address(real)), (Some(b), Some(r)) if b != r);
        prop_assert_eq!(own, expected, "backup {:?}, real {:?}", backup, real);
    }
}
