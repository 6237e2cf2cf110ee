//! The live-template path: a cluster with no kubeadm configuration (no `--config`, no
//! `kube-system/kubeadm-config`), whose DaemonSets lack `--permit-port-sharing`. The targets
//! are the live templates with the images moved and the flag added, and the plan says so; where
//! the hand-over still cannot share the port (one node), the refusal says what to do, and it
//! is something an operator of this cluster can do.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::DeleteParams;
use selfhost::TemplateSource;
use selfhost::{ApplyOptions, RunOutcome};
use selfhost_core::Component;
use selfhost_core::command_line::template_flag;
use selfhost_core::preflight::{CheckId, Verdict};
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::{SimCluster, SimTimings};

use crate::upgrade::{FROM, TO, images, on};

/// A self-hosted cluster of `nodes` control-plane nodes without port sharing and without the
/// ConfigMap `kube-system/kubeadm-config`.
async fn without_configuration(nodes: usize) -> SimCluster {
    let sim = SimCluster::builder()
        .control_plane_nodes(nodes)
        .version(FROM)
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(false)
        .timings(SimTimings::scaled(100))
        .start()
        .await
        .expect("cluster starts");
    let maps: Api<ConfigMap> = Api::namespaced(sim.client(), "kube-system");
    let delete = DeleteParams::default();
    crate::read_again("delete kubeadm-config", || {
        maps.delete("kubeadm-config", &delete)
    })
    .await;
    sim
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_target_of_a_live_template_without_port_sharing_shares_the_port_and_the_plan_says_so() {
    let sim = without_configuration(3).await;
    let (_, _, plan, targets) = crate::plan_for(&sim, TO).await;
    assert_eq!(plan.template_source, TemplateSource::LiveTemplates);
    assert!(
        plan.template_source_description
            .contains("--permit-port-sharing=true added where they lack it"),
        "{}",
        plan.template_source_description
    );
    assert!(plan.proceeds, "{:#?}", plan.preflight);
    for component in Component::ALL {
        let template = &targets.templates[&component];
        assert_eq!(
            template_flag(template, component.name(), "permit-port-sharing").as_deref(),
            Some("true"),
            "{component}"
        );
        let planned = plan
            .components
            .iter()
            .find(|c| c.component == component)
            .expect("planned");
        assert!(
            planned.diff.contains("+") && planned.diff.contains("--permit-port-sharing=true"),
            "{component}: {}",
            planned.diff
        );
        let explanation = planned.expected.explanation.join(" ");
        assert!(
            explanation.contains("selfhost adds it where the live template lacks it"),
            "{component}: {explanation}"
        );
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_node_the_refusal_asks_for_accept_downtime_not_a_target_the_operator_cannot_render()
{
    let sim = without_configuration(1).await;
    let (_, _, plan, targets) = crate::plan_for(&sim, TO).await;
    assert_eq!(plan.template_source, TemplateSource::LiveTemplates);
    assert!(!plan.proceeds);
    for component in Component::ALL {
        assert_eq!(
            template_flag(
                &targets.templates[&component],
                component.name(),
                "permit-port-sharing"
            )
            .as_deref(),
            Some("true"),
            "{component}"
        );
        let check = plan
            .preflight
            .checks
            .iter()
            .find(|c| c.id == CheckId::ExpectedDisruption && c.component == Some(component))
            .expect("the disruption check");
        assert_eq!(check.verdict, Verdict::Fail, "{component}: {check:?}");
        let fix = check.fix.clone().unwrap_or_default();
        assert!(
            fix.contains("re-run with --accept-downtime")
                && fix.contains(&format!("kube-system/{}", component.daemonset_name())),
            "{component}: {fix}"
        );
        assert!(!fix.contains("render the target"), "{component}: {fix}");
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_from_live_templates_without_port_sharing_leaves_every_daemonset_sharing_it() {
    // A whole upgrade of three nodes: not beside the other whole upgrades on a two-core
    // machine, where a kubelet late for its node Lease turns its node NotReady (and its pods
    // with it) for reasons of load alone.
    let _one = crate::upgrade::ONE_PROBED_UPGRADE_AT_A_TIME.lock().await;
    let sim = without_configuration(3).await;
    let (report, _) = crate::upgrade::upgrade(&sim, TO, ApplyOptions::default()).await;
    assert_eq!(report.outcome, RunOutcome::Done);
    assert_eq!(images(&sim).await, (on(TO), false));
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    for component in Component::ALL {
        let name = component.daemonset_name();
        let ds = crate::read_again("get a DaemonSet", || daemonsets.get(&name)).await;
        let template = ds.spec.map(|s| s.template).unwrap_or_default();
        assert_eq!(
            template_flag(&template, component.name(), "permit-port-sharing").as_deref(),
            Some("true"),
            "{name}"
        );
    }
    sim.shutdown().await;
}
