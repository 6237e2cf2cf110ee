//! kubectl against a simulator that enforces RBAC: `kubectl apply -f deploy/rbac.yaml` as
//! the administrator creates every object (and a second apply changes nothing), and
//! `kubectl auth can-i` as the shipped service accounts answers as those roles say.

use std::path::PathBuf;

use selfhost_sim::auth::UserInfo;
use selfhost_sim::{SimServer, SimServerOptions};

use super::{Kubectl, kubectl_on_path, path_arg};

/// The manifest selfhost ships.
const RBAC_YAML: &str = include_str!("../../../../../deploy/rbac.yaml");

/// kubectl authenticating as `user` (a kubeconfig with a token minted for it).
fn kubectl_as(sim: &SimServer, user: UserInfo) -> Option<Kubectl> {
    let program = kubectl_on_path()?;
    let home = tempfile::tempdir().expect("a temporary HOME for kubectl");
    let kubeconfig: PathBuf = home.path().join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig_for(user).expect("kubeconfig"))
        .expect("write the kubeconfig");
    Some(Kubectl {
        program,
        kubeconfig,
        home,
    })
}

#[tokio::test]
async fn kubectl_applies_the_shipped_rbac_and_can_i_answers_as_its_roles() {
    // kubectl did not present the token to a plain-HTTP endpoint (401 on /openapi/v3);
    // real clusters serve TLS, and so does this one.
    let sim = SimServer::start(SimServerOptions {
        rbac: true,
        tls: true,
        ..SimServerOptions::default()
    })
    .await
    .expect("the simulator starts");
    let Some(admin) = Kubectl::for_sim(&sim, "kubectl_applies_the_shipped_rbac") else {
        return;
    };
    let manifest = admin.file("rbac.yaml", RBAC_YAML);
    let created = admin.ok(&["apply", "-f", path_arg(&manifest)]).await;
    for object in [
        "serviceaccount/selfhost-viewer created",
        "clusterrole.rbac.authorization.k8s.io/selfhost-viewer created",
        "role.rbac.authorization.k8s.io/selfhost-upgrader created",
        "rolebinding.rbac.authorization.k8s.io/selfhost-upgrader created",
        "clusterrolebinding.rbac.authorization.k8s.io/selfhost-viewer created",
    ] {
        assert!(created.contains(object), "{object} in:\n{created}");
    }
    let again = admin.ok(&["apply", "-f", path_arg(&manifest)]).await;
    assert!(
        again.lines().all(|l| l.ends_with(" unchanged")),
        "a second apply changes nothing:\n{again}"
    );

    let viewer = kubectl_as(
        &sim,
        UserInfo::service_account("kube-system", "selfhost-viewer"),
    )
    .expect("kubectl is on the PATH");
    let upgrader = kubectl_as(
        &sim,
        UserInfo::service_account("kube-system", "selfhost-upgrader"),
    )
    .expect("kubectl is on the PATH");
    let cases: &[(&Kubectl, &[&str], bool)] = &[
        (
            &viewer,
            &["watch", "daemonsets.apps", "-n", "kube-system"],
            true,
        ),
        (&viewer, &["list", "nodes"], true),
        (
            &viewer,
            &["get", "configmaps/kubeadm-config", "-n", "kube-system"],
            true,
        ),
        (
            &viewer,
            &["get", "configmaps/other", "-n", "kube-system"],
            false,
        ),
        (
            &viewer,
            &["create", "daemonsets.apps", "-n", "kube-system"],
            false,
        ),
        (&viewer, &["list", "pods", "-n", "default"], false),
        (
            &upgrader,
            &["create", "daemonsets.apps", "-n", "kube-system"],
            true,
        ),
        (
            &upgrader,
            &[
                "update",
                "daemonsets.apps/self-hosted-kube-apiserver",
                "-n",
                "kube-system",
            ],
            true,
        ),
        (
            &upgrader,
            &["update", "daemonsets.apps/kube-proxy", "-n", "kube-system"],
            false,
        ),
        (
            &upgrader,
            &[
                "delete",
                "leases.coordination.k8s.io/kube-scheduler",
                "-n",
                "kube-system",
            ],
            true,
        ),
        (&upgrader, &["delete", "nodes"], false),
    ];
    for (kubectl, question, want) in cases {
        let mut args = vec!["auth", "can-i"];
        args.extend_from_slice(question);
        let answer = kubectl.run(&args).await;
        let said = answer.stdout.trim();
        assert_eq!(
            said,
            if *want { "yes" } else { "no" },
            "can-i {question:?}: {answer:?}"
        );
    }
}
