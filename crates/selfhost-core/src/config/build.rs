//! From a version-neutral draft to the validated, defaulted [`ClusterConfig`].
//!
//! Every problem is collected (not just the first), so a user fixes a file in one pass.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::EnvVar;

use super::error::{Position, Problem};
use super::validate;
use super::wire::{Draft, DraftComponent, DraftExternalEtcd, DraftInit, DraftLocalEtcd, Located};
use super::{ClusterConfig, ComponentConfig, Etcd, ExtraArg, HostPathMount, Notice};

/// kubeadm feature gates that change the static pods in ways selfhost does not reproduce.
const GATES_NOT_RENDERED: [&str; 1] = ["RootlessControlPlane"];

#[derive(Default)]
struct Problems(Vec<Problem>);

impl Problems {
    fn push(&mut self, at: Position, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(Problem {
            at: Some(at),
            field: field.into(),
            message: message.into(),
        });
    }

    /// Runs a check on a located value and records its failure under `field`.
    fn check<T, R>(
        &mut self,
        value: &Located<T>,
        field: &str,
        check: impl FnOnce(&T) -> Result<R, String>,
    ) -> Option<R> {
        match check(&value.value) {
            Ok(r) => Some(r),
            Err(message) => {
                self.push(value.at, field, message);
                None
            }
        }
    }
}

/// kubeadm treats an empty string like an absent field (its Go fields are `omitempty`).
fn given(value: Option<Located<String>>) -> Option<Located<String>> {
    value.filter(|v| !v.value.is_empty())
}

/// Removes trailing slashes, as kubeadm's `filepath.Join` would, so flags and mounts agree.
fn clean_dir(path: &str) -> String {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        "/".to_string()
    } else {
        trimmed.to_string()
    }
}

/// Validates `draft` (and the InitConfiguration, if any) and applies kubeadm's defaults.
pub(super) fn build(
    draft: Draft,
    init: Option<DraftInit>,
) -> Result<(ClusterConfig, Vec<Notice>), Vec<Problem>> {
    let mut problems = Problems::default();
    let mut notices = Vec::new();
    let mut config = ClusterConfig::kubeadm_defaults();

    if let Some(v) = given(draft.kubernetes_version) {
        config.kubernetes_version =
            problems.check(&v, "kubernetesVersion", |s| validate::kubernetes_version(s));
    }
    // A value that fails its check is still stored: any problem fails the whole build, and
    // storing keeps every field's handling alike.
    if let Some(v) = given(draft.control_plane_endpoint) {
        problems.check(&v, "controlPlaneEndpoint", |s| validate::host_port(s));
        config.control_plane_endpoint = Some(v.value);
    }
    if let Some(v) = given(draft.image_repository) {
        problems.check(&v, "imageRepository", |s| validate::image_repository(s));
        config.image_repository = v.value;
    }
    if let Some(v) = given(draft.service_subnet) {
        problems.check(&v, "networking.serviceSubnet", |s| validate::cidrs(s));
        config.networking.service_subnet = v.value;
    }
    if let Some(v) = given(draft.pod_subnet) {
        problems.check(&v, "networking.podSubnet", |s| validate::cidrs(s));
        config.networking.pod_subnet = Some(v.value);
    }
    if let Some(v) = given(draft.dns_domain) {
        problems.check(&v, "networking.dnsDomain", |s| validate::dns_subdomain(s));
        config.networking.dns_domain = v.value;
    }
    if let Some(v) = given(draft.certificates_dir) {
        problems.check(&v, "certificatesDir", |s| validate::absolute_path(s));
        config.certificates_dir = clean_dir(&v.value);
    }
    if let Some(etcd) = etcd(draft.etcd_local, draft.etcd_external, &mut problems) {
        config.etcd = etcd;
    }
    config.api_server = component(draft.api_server, "apiServer", &mut problems);
    config.controller_manager =
        component(draft.controller_manager, "controllerManager", &mut problems);
    config.scheduler = component(draft.scheduler, "scheduler", &mut problems);
    config.api_server_cert_sans = draft.cert_sans;
    for gate in GATES_NOT_RENDERED {
        if draft.feature_gates.get(gate) == Some(&true) {
            notices.push(Notice::FeatureGateNotRendered {
                gate: gate.to_string(),
            });
        }
    }
    config.feature_gates = draft.feature_gates;
    if let Some(v) = given(draft.cluster_name) {
        config.cluster_name = v.value;
    }

    let mut timeout = draft
        .health_check_timeout
        .map(|t| (t, "apiServer.timeoutForControlPlane"));
    if let Some(mut init) = init {
        if let Some(t) = init.health_check_timeout.take() {
            timeout = Some((t, "timeouts.controlPlaneComponentHealthCheck"));
        }
        apply_init(init, &mut config, &mut problems);
    }
    if let Some((t, field)) = timeout
        && let Some(d) = problems.check(&t, field, |s| validate::go_duration(s))
    {
        // Round up: a probe budget shorter than what the user asked for would kill a
        // component that is merely slow.
        config.health_check_timeout_seconds = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    }

    if problems.0.is_empty() {
        Ok((config, notices))
    } else {
        // In reading order, so the list can be worked through top to bottom.
        problems.0.sort_by_key(|p| p.at);
        Err(problems.0)
    }
}

fn apply_init(init: DraftInit, config: &mut ClusterConfig, problems: &mut Problems) {
    if let Some(v) = given(init.advertise_address) {
        let ip = problems.check(&v, "localAPIEndpoint.advertiseAddress", |s| {
            s.parse::<IpAddr>().map_err(|_| {
                format!(
                    "{s:?} is not an IP address; the API server advertises an IP, e.g. 10.0.0.10"
                )
            })
        });
        // kubeadm replaces an unspecified address with the node's own; so does the caller's
        // node context.
        config.local_api_endpoint.advertise_address = ip.filter(|ip| !ip.is_unspecified());
    }
    if let Some(v) = init.bind_port
        && v.value != 0
        && let Some(port) = problems.check(&v, "localAPIEndpoint.bindPort", |n| validate::port(*n))
    {
        config.local_api_endpoint.bind_port = port;
    }
    if let Some(v) = given(init.node_name) {
        problems.check(&v, "nodeRegistration.name", |s| validate::dns_subdomain(s));
        config.node_name = Some(v.value);
    }
}

fn etcd(
    local: Option<DraftLocalEtcd>,
    external: Option<DraftExternalEtcd>,
    problems: &mut Problems,
) -> Option<Etcd> {
    match (local, external) {
        (Some(_), Some(external)) => {
            problems.push(
                external.at,
                "etcd",
                "etcd.local and etcd.external are mutually exclusive; keep the one the cluster uses",
            );
            None
        }
        (Some(local), None) => {
            let data_dir = match given(local.data_dir) {
                Some(v) => {
                    problems.check(&v, "etcd.local.dataDir", |s| validate::absolute_path(s));
                    clean_dir(&v.value)
                }
                None => super::DEFAULT_ETCD_DATA_DIR.to_string(),
            };
            Some(Etcd::Local {
                data_dir,
                extra_args: extra_args(local.extra_args, "etcd.local.extraArgs", problems),
            })
        }
        (None, Some(external)) => Some(external_etcd(external, problems)),
        (None, None) => None,
    }
}

fn external_etcd(external: DraftExternalEtcd, problems: &mut Problems) -> Etcd {
    let files = [
        ("etcd.external.caFile", given(external.ca_file)),
        ("etcd.external.certFile", given(external.cert_file)),
        ("etcd.external.keyFile", given(external.key_file)),
    ];
    // kubeadm's rule: once any client TLS file is given, all three are needed and the
    // endpoints must use https.
    let tls = files.iter().any(|(_, f)| f.is_some());
    if tls {
        for (field, file) in &files {
            match file {
                Some(f) => {
                    problems.check(f, field, |s| validate::absolute_path(s));
                }
                None => problems.push(
                    external.at,
                    *field,
                    "missing; once caFile, certFile or keyFile is set, all three are needed",
                ),
            }
        }
    }
    let endpoints = external.endpoints.map(|e| (e.at, e.value));
    match &endpoints {
        Some((at, list)) if !list.is_empty() => {
            for url in list {
                if let Err(message) = validate::etcd_url(url, tls) {
                    problems.push(*at, "etcd.external.endpoints", message);
                }
            }
        }
        _ => problems.push(
            endpoints.as_ref().map_or(external.at, |(at, _)| *at),
            "etcd.external.endpoints",
            "external etcd needs at least one client URL, e.g. https://10.0.0.5:2379",
        ),
    }
    let [(_, ca_file), (_, cert_file), (_, key_file)] = files;
    Etcd::External {
        endpoints: endpoints.map(|(_, list)| list).unwrap_or_default(),
        ca_file: ca_file.map(|f| f.value),
        cert_file: cert_file.map(|f| f.value),
        key_file: key_file.map(|f| f.value),
    }
}

fn extra_args(args: Vec<Located<ExtraArg>>, field: &str, problems: &mut Problems) -> Vec<ExtraArg> {
    args.into_iter()
        .map(|arg| {
            problems.check(&arg, field, |a| validate::flag_name(&a.name));
            arg.value
        })
        .collect()
}

fn component(draft: DraftComponent, field: &str, problems: &mut Problems) -> ComponentConfig {
    let extra_args = extra_args(draft.extra_args, &format!("{field}.extraArgs"), problems);
    let extra_volumes = draft
        .extra_volumes
        .into_iter()
        .map(|v| volume(v, &format!("{field}.extraVolumes"), problems))
        .collect();
    let extra_envs = draft
        .extra_envs
        .into_iter()
        .map(|env| {
            problems.check(&env, &format!("{field}.extraEnvs"), |e: &EnvVar| {
                if e.name.is_empty() {
                    Err("an environment variable has no name".to_string())
                } else {
                    Ok(())
                }
            });
            env.value
        })
        .collect();
    ComponentConfig {
        extra_args,
        extra_volumes,
        extra_envs,
    }
}

fn volume(
    v: Located<super::wire::HostPathMount>,
    field: &str,
    problems: &mut Problems,
) -> HostPathMount {
    let at = v.at;
    let wire = v.value;
    let name = wire.name.unwrap_or_default();
    let mut check = |sub: &str, result: Result<(), String>| {
        if let Err(message) = result {
            problems.push(at, format!("{field}[{name}].{sub}"), message);
        }
    };
    check("name", validate::dns_label(&name));
    let host_path = wire.host_path.unwrap_or_default();
    check("hostPath", validate::absolute_path(&host_path));
    let mount_path = wire.mount_path.unwrap_or_default();
    check("mountPath", validate::absolute_path(&mount_path));
    let path_type = wire.path_type.unwrap_or_default();
    if !validate::PATH_TYPES.contains(&path_type.as_str()) {
        check(
            "pathType",
            Err(format!(
                "{path_type:?} is not a hostPath type; use one of {}",
                validate::PATH_TYPES[1..].join(", ")
            )),
        );
    }
    HostPathMount {
        name,
        host_path,
        mount_path,
        read_only: wire.read_only.unwrap_or(false),
        path_type: Some(path_type).filter(|t| !t.is_empty()),
    }
}
