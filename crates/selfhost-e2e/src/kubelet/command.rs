//! The command line and environment of a container's process.
//!
//! Kubernetes semantics first: `command` replaces the image's entrypoint, `args` follow it, and
//! `$(VAR)` refers to the container's environment (`$$` escapes). Then, because processes share
//! the machine's filesystem instead of living in mount namespaces, every path under a volume's
//! mount path is rewritten to where the volume really is: a whole argument, the value of a
//! `--flag=value`, or an element of a comma-separated list.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Container;

use super::images::ImageTarget;

/// `PATH` of every container process.
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The pause container: a shell that exits 0 on SIGTERM or SIGINT, as `/pause` does.
const PAUSE_SCRIPT: &str = "trap 'exit 0' TERM INT; sleep infinity & wait";

/// One volume mount as the process sees it: paths under `mount_path` are under `source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    /// The path in the container.
    pub mount_path: String,
    /// Where that is on this machine.
    pub source: PathBuf,
}

/// The path `path` of the container on this machine, if it is under a mount (the longest
/// mount path wins).
pub(crate) fn rewrite_path(path: &str, mounts: &[Mount]) -> Option<String> {
    if !path.starts_with('/') {
        return None;
    }
    mounts
        .iter()
        .filter_map(|m| {
            let base = m.mount_path.trim_end_matches('/');
            let rest = if path == base {
                ""
            } else {
                path.strip_prefix(base)
                    .filter(|rest| rest.starts_with('/'))?
            };
            Some((base.len(), format!("{}{rest}", m.source.display())))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, rewritten)| rewritten)
}

fn rewrite_list(value: &str, mounts: &[Mount]) -> String {
    value
        .split(',')
        .map(|part| rewrite_path(part, mounts).unwrap_or_else(|| part.to_string()))
        .collect::<Vec<_>>()
        .join(",")
}

/// One argument with its paths rewritten: the whole argument, or the value of `--flag=value`,
/// each element of a comma-separated list on its own.
pub(crate) fn rewrite_arg(arg: &str, mounts: &[Mount]) -> String {
    if arg.starts_with('-')
        && let Some((flag, value)) = arg.split_once('=')
    {
        return format!("{flag}={}", rewrite_list(value, mounts));
    }
    rewrite_list(arg, mounts)
}

/// Expands `$(VAR)` references from `vars` as Kubernetes does: an unknown reference stays as
/// written, `$$` is a literal `$`.
pub(crate) fn expand(input: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if after.is_empty() {
            out.push('$');
            rest = after;
        } else if let Some(escaped) = after.strip_prefix('$') {
            out.push('$');
            rest = escaped;
        } else if let Some(reference) = after.strip_prefix('(') {
            match reference.find(')') {
                Some(close) => {
                    let name = &reference[..close];
                    match vars.get(name) {
                        Some(value) => out.push_str(value),
                        None => out.push_str(&format!("$({name})")),
                    }
                    rest = &reference[close + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = reference;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// What `fieldRef`s and a process's identity resolve to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PodFields {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub node_name: String,
    pub node_ip: String,
    pub service_account: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

impl PodFields {
    /// The value of a `fieldRef` path, if it is one the kubelet knows.
    pub(crate) fn field(&self, path: &str) -> Option<String> {
        let keyed = |prefix: &str, map: &BTreeMap<String, String>| {
            let key = path.strip_prefix(prefix)?.strip_suffix("']")?.to_string();
            Some(map.get(&key).cloned().unwrap_or_default())
        };
        match path {
            "metadata.name" => Some(self.name.clone()),
            "metadata.namespace" => Some(self.namespace.clone()),
            "metadata.uid" => Some(self.uid.clone()),
            "spec.nodeName" => Some(self.node_name.clone()),
            "spec.serviceAccountName" => Some(self.service_account.clone()),
            // Every pod shares the node's network.
            "status.hostIP" | "status.podIP" | "status.podIPs" | "status.hostIPs" => {
                Some(self.node_ip.clone())
            }
            _ => keyed("metadata.labels['", &self.labels)
                .or_else(|| keyed("metadata.annotations['", &self.annotations)),
        }
    }
}

/// The container's own environment (`env`), in order, each value expanded from the ones
/// before it. Variables from Secrets or ConfigMaps are not supported and stay empty.
pub(crate) fn container_env(container: &Container, fields: &PodFields) -> Vec<(String, String)> {
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    let mut ordered = Vec::new();
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (Some(value), _) => expand(value, &vars),
            (None, Some(source)) => source
                .field_ref
                .as_ref()
                .and_then(|f| fields.field(&f.field_path))
                .unwrap_or_default(),
            (None, None) => String::new(),
        };
        vars.insert(var.name.clone(), value.clone());
        ordered.retain(|(name, _): &(String, String)| *name != var.name);
        ordered.push((var.name.clone(), value));
    }
    ordered
}

/// How to start one container's process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launch {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments (without argv\[0\]).
    pub args: Vec<String>,
    /// Its whole environment.
    pub env: Vec<(String, String)>,
    /// Its working directory.
    pub cwd: PathBuf,
}

/// The executable and arguments for a command line `argv` run in an image: a first word naming
/// the image's component (`kube-apiserver`, or a path ending in it) is the image's executable;
/// any other first word is a program of this machine (`sh`).
pub(crate) fn program_for(target: &ImageTarget, argv: &[String]) -> Option<(PathBuf, Vec<String>)> {
    let ImageTarget::Executable { path, component } = target else {
        return None;
    };
    match argv.split_first() {
        None => Some((path.clone(), Vec::new())),
        Some((first, rest)) => {
            let base = first.rsplit('/').next().unwrap_or(first);
            let program = if base == component {
                path.clone()
            } else {
                PathBuf::from(first)
            };
            Some((program, rest.to_vec()))
        }
    }
}

/// How to start `container` from `target`, with volumes at `mounts`, in `cwd`.
pub(crate) fn launch(
    container: &Container,
    target: &ImageTarget,
    fields: &PodFields,
    mounts: &[Mount],
    cwd: PathBuf,
) -> Launch {
    let own_env = container_env(container, fields);
    let vars: BTreeMap<String, String> = own_env.iter().cloned().collect();
    let mut env = vec![
        ("PATH".to_string(), PATH.to_string()),
        ("HOME".to_string(), cwd.display().to_string()),
        ("HOSTNAME".to_string(), fields.node_name.clone()),
    ];
    for (name, value) in own_env {
        env.retain(|(n, _)| *n != name);
        env.push((name, rewrite_arg(&value, mounts)));
    }
    let expanded = |words: &Option<Vec<String>>| -> Vec<String> {
        words
            .iter()
            .flatten()
            .map(|w| rewrite_arg(&expand(w, &vars), mounts))
            .collect()
    };
    let command = expanded(&container.command);
    let args = expanded(&container.args);
    let (program, mut all_args) = match target {
        ImageTarget::Pause => (
            PathBuf::from("/bin/sh"),
            vec!["-c".to_string(), PAUSE_SCRIPT.to_string()],
        ),
        ImageTarget::Executable { .. } => {
            program_for(target, &command).unwrap_or_else(|| (PathBuf::new(), Vec::new()))
        }
    };
    if matches!(target, ImageTarget::Executable { .. }) {
        all_args.extend(args);
    }
    let cwd = container
        .working_dir
        .as_deref()
        .and_then(|dir| rewrite_path(dir, mounts))
        .map_or(cwd, PathBuf::from);
    Launch {
        program,
        args: all_args,
        env,
        cwd,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector};

    fn mounts() -> Vec<Mount> {
        vec![
            Mount {
                mount_path: "/etc/kubernetes/pki".into(),
                source: "/n1/etc/kubernetes/pki".into(),
            },
            Mount {
                mount_path: "/etc/kubernetes/pki/etcd/".into(),
                source: "/n1/secrets/etcd".into(),
            },
            Mount {
                mount_path: "/etc/kubernetes/scheduler.conf".into(),
                source: "/n1/etc/kubernetes/scheduler.conf".into(),
            },
        ]
    }

    #[test]
    fn paths_under_mounts_are_rewritten() {
        let cases = [
            (
                "--client-ca-file=/etc/kubernetes/pki/ca.crt",
                "--client-ca-file=/n1/etc/kubernetes/pki/ca.crt",
            ),
            (
                "--etcd-cafile=/etc/kubernetes/pki/etcd/ca.crt",
                "--etcd-cafile=/n1/secrets/etcd/ca.crt",
            ),
            ("/etc/kubernetes/pki", "/n1/etc/kubernetes/pki"),
            (
                "--kubeconfig=/etc/kubernetes/scheduler.conf",
                "--kubeconfig=/n1/etc/kubernetes/scheduler.conf",
            ),
            (
                "--tls-sni=/etc/kubernetes/pki/a.crt,/etc/other,/etc/kubernetes/pki/etcd/b",
                "--tls-sni=/n1/etc/kubernetes/pki/a.crt,/etc/other,/n1/secrets/etcd/b",
            ),
            // Only whole path components match.
            ("--x=/etc/kubernetes/pkix/a", "--x=/etc/kubernetes/pkix/a"),
            (
                "--etcd-servers=https://127.0.0.1:2379",
                "--etcd-servers=https://127.0.0.1:2379",
            ),
            ("relative/etc/kubernetes/pki", "relative/etc/kubernetes/pki"),
            ("--v=2", "--v=2"),
            ("-f=/etc/kubernetes/pki/x", "-f=/n1/etc/kubernetes/pki/x"),
        ];
        for (arg, expected) in cases {
            assert_eq!(rewrite_arg(arg, &mounts()), expected, "{arg}");
        }
        let root = [Mount {
            mount_path: "/".into(),
            source: "/n1".into(),
        }];
        assert_eq!(rewrite_path("/a/b", &root).as_deref(), Some("/n1/a/b"));
    }

    #[test]
    fn references_expand_like_kubernetes() {
        let vars: BTreeMap<String, String> =
            [("HOST_IP".to_string(), "10.0.0.1".to_string())].into();
        let cases = [
            (
                "--advertise-address=$(HOST_IP)",
                "--advertise-address=10.0.0.1",
            ),
            ("$(MISSING)", "$(MISSING)"),
            ("$$(HOST_IP)", "$(HOST_IP)"),
            ("a$b", "a$b"),
            ("end$", "end$"),
            ("$(HOST_IP", "$(HOST_IP"),
            ("$(HOST_IP)$(HOST_IP)", "10.0.0.110.0.0.1"),
        ];
        for (input, expected) in cases {
            assert_eq!(expand(input, &vars), expected, "{input}");
        }
    }

    fn fields() -> PodFields {
        PodFields {
            name: "kube-apiserver-n1".into(),
            namespace: "kube-system".into(),
            uid: "u1".into(),
            node_name: "n1".into(),
            node_ip: "127.0.1.1".into(),
            labels: [("component".to_string(), "kube-apiserver".to_string())].into(),
            ..PodFields::default()
        }
    }

    #[test]
    fn a_component_command_runs_the_image_executable_with_env_and_paths() {
        let field_ref = |path: &str| EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                api_version: None,
            }),
            ..EnvVarSource::default()
        };
        let container = Container {
            name: "kube-apiserver".into(),
            command: Some(vec![
                "kube-apiserver".into(),
                "--advertise-address=$(HOST_IP)".into(),
                "--client-ca-file=/etc/kubernetes/pki/ca.crt".into(),
            ]),
            args: Some(vec!["--v=$(LEVEL)".into()]),
            env: Some(vec![
                EnvVar {
                    name: "HOST_IP".into(),
                    value_from: Some(field_ref("status.hostIP")),
                    value: None,
                },
                EnvVar {
                    name: "LEVEL".into(),
                    value: Some("2".into()),
                    value_from: None,
                },
                EnvVar {
                    name: "WHO".into(),
                    value_from: Some(field_ref("metadata.labels['component']")),
                    value: None,
                },
                EnvVar {
                    name: "CA".into(),
                    value: Some("/etc/kubernetes/pki/ca.crt".into()),
                    value_from: None,
                },
            ]),
            ..Container::default()
        };
        let target = ImageTarget::Executable {
            path: "/images/v1.20.2/kube-apiserver".into(),
            component: "kube-apiserver".into(),
        };
        let launch = launch(&container, &target, &fields(), &mounts(), "/n1/pod".into());
        assert_eq!(
            launch.program,
            PathBuf::from("/images/v1.20.2/kube-apiserver")
        );
        assert_eq!(
            launch.args,
            [
                "--advertise-address=127.0.1.1",
                "--client-ca-file=/n1/etc/kubernetes/pki/ca.crt",
                "--v=2"
            ]
        );
        let env: BTreeMap<_, _> = launch.env.into_iter().collect();
        assert_eq!(env["HOST_IP"], "127.0.1.1");
        assert_eq!(env["WHO"], "kube-apiserver");
        assert_eq!(env["CA"], "/n1/etc/kubernetes/pki/ca.crt");
        assert_eq!(env["HOSTNAME"], "n1");
        assert_eq!(launch.cwd, PathBuf::from("/n1/pod"));
    }

    #[test]
    fn other_commands_run_from_the_machine_and_pause_waits() {
        let target = ImageTarget::Executable {
            path: "/images/v1/kube-apiserver".into(),
            component: "kube-apiserver".into(),
        };
        let argv = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        let cases = [
            (
                argv(&["/usr/local/bin/kube-apiserver", "--version"]),
                "/images/v1/kube-apiserver",
                argv(&["--version"]),
            ),
            (argv(&["sh", "-c", "exit 3"]), "sh", argv(&["-c", "exit 3"])),
            (argv(&[]), "/images/v1/kube-apiserver", argv(&[])),
        ];
        for (command, program, args) in cases {
            assert_eq!(
                program_for(&target, &command),
                Some((PathBuf::from(program), args)),
                "{command:?}"
            );
        }
        let pause = launch(
            &Container {
                name: "pause".into(),
                args: Some(vec!["ignored".into()]),
                ..Container::default()
            },
            &ImageTarget::Pause,
            &fields(),
            &[],
            "/n1/pod".into(),
        );
        assert_eq!(pause.program, PathBuf::from("/bin/sh"));
        assert_eq!(pause.args, ["-c", PAUSE_SCRIPT]);
    }
}
