use super::*;

#[test]
fn nodes_are_named_and_addressed_by_role() {
    let nodes = node_specs(2, 1);
    let names: Vec<_> = nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["cp-1", "cp-2", "worker-1"]);
    let cp = node_object(&nodes[0], "v1.33.1", "2026-01-01T00:00:00Z");
    assert_eq!(
        cp["metadata"]["labels"]["node-role.kubernetes.io/control-plane"],
        ""
    );
    assert_eq!(
        cp["spec"]["taints"][0]["key"],
        "node-role.kubernetes.io/control-plane"
    );
    assert_eq!(cp["status"]["nodeInfo"]["kubeletVersion"], "v1.33.1");
    let worker = node_object(&nodes[2], "v1.33.1", "2026-01-01T00:00:00Z");
    assert!(
        worker["metadata"]["labels"]
            .get("node-role.kubernetes.io/control-plane")
            .is_none()
    );
    assert_eq!(worker["status"]["addresses"][0]["address"], "10.1.0.11");
    let many = node_specs(1, 300);
    assert_eq!(many[300].name, "worker-300");
    assert_eq!(
        many[300].ip, "10.1.1.54",
        "addresses stay valid past 255 nodes"
    );
}

#[test]
fn static_pods_name_their_node_and_daemonsets_use_the_downward_api() {
    let pod = static_pod("kube-apiserver", "v1.33.1", "10.0.0.11", true);
    let command: Vec<&str> = pod["spec"]["containers"][0]["command"]
        .as_array()
        .expect("command")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(command.contains(&"--advertise-address=10.0.0.11"));
    assert!(command.contains(&"--permit-port-sharing=true"));
    let mut sorted = command[1..].to_vec();
    sorted.sort();
    assert_eq!(
        sorted,
        command[1..],
        "flags are sorted, as kubeadm writes them"
    );

    let ds = daemonset("kube-apiserver", "v1.33.1", false);
    let ds_command = ds["spec"]["template"]["spec"]["containers"][0]["command"].to_string();
    assert!(ds_command.contains("--advertise-address=$(HOST_IP)"));
    assert!(!ds_command.contains("permit-port-sharing"));
    assert_eq!(
        ds["spec"]["selector"]["matchLabels"]["k8s-app"],
        "self-hosted-kube-apiserver"
    );
}

#[test]
fn modes_parse_from_their_command_line_names() {
    assert_eq!("static".parse(), Ok(BootstrapMode::Static));
    assert_eq!("self-hosted".parse(), Ok(BootstrapMode::SelfHosted));
    assert!(
        "hosted"
            .parse::<BootstrapMode>()
            .unwrap_err()
            .contains("static or self-hosted")
    );
}
