//! Editing a control-plane container's command line.
//!
//! Control-plane components take their configuration as `--name=value` flags. kubeadm's old
//! `ReplaceArgument` rebuilt the command from a map (random order, so every rebuild was a
//! rollout) and silently dropped arguments without `=`. These helpers edit the list in place:
//! everything they do not touch keeps its position, so the result is deterministic.

use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};

/// The name of a `--name=value` or `--name` argument, without the dashes.
fn flag_name(arg: &str) -> Option<&str> {
    let rest = arg.strip_prefix("--")?;
    Some(rest.split_once('=').map_or(rest, |(name, _)| name))
}

/// The value of the last `--name=value` occurrence (the one the program honours), if any.
/// A bare `--name` counts as the value `true`, as Go's flag package reads booleans.
pub fn flag_value<'a>(command: &'a [String], name: &str) -> Option<&'a str> {
    command.iter().rev().find_map(|arg| {
        if flag_name(arg) != Some(name) {
            return None;
        }
        Some(arg.split_once('=').map_or("true", |(_, value)| value))
    })
}

/// The value of `--name` on the command line (command, then args) of the container named
/// `container` in a template's pod spec, else of its first container.
pub fn template_flag(template: &PodTemplateSpec, container: &str, name: &str) -> Option<String> {
    flag_value(&template_command_line(template, container), name).map(str::to_string)
}

/// The command line (command, then args) of the container named `container` in a template's
/// pod spec, else of its first container; empty without either.
pub fn template_command_line(template: &PodTemplateSpec, container: &str) -> Vec<String> {
    let Some(main) = template
        .spec
        .as_ref()
        .and_then(|spec| main_container(spec, container))
    else {
        return Vec::new();
    };
    let mut line = main.command.clone().unwrap_or_default();
    line.extend(main.args.clone().unwrap_or_default());
    line
}

/// The container named `container` in a pod spec, else its first: a control-plane pod's
/// component runs in the one named after it.
pub fn main_container<'a>(spec: &'a PodSpec, container: &str) -> Option<&'a Container> {
    spec.containers
        .iter()
        .find(|c| c.name == container)
        .or_else(|| spec.containers.first())
}

/// The names of every `--name=value` or `--name` argument, without the dashes, in order.
pub fn flag_names(command: &[String]) -> impl Iterator<Item = &str> {
    command.iter().filter_map(|arg| flag_name(arg))
}

/// The values of every occurrence of `--name=value`, in order (a flag such as `--feature-gates`
/// that merges its occurrences honours them all).
pub fn flag_values<'a>(command: &'a [String], name: &'a str) -> impl Iterator<Item = &'a str> {
    command.iter().filter_map(move |arg| {
        (flag_name(arg) == Some(name))
            .then(|| arg.split_once('=').map(|(_, value)| value))
            .flatten()
    })
}

/// Sets `--name=value`: the first occurrence is rewritten where it stands and any later
/// duplicates are removed; a missing flag is inserted before the first flag that sorts after
/// it, which keeps an already sorted command sorted.
pub fn set_flag(command: &[String], name: &str, value: &str) -> Vec<String> {
    let wanted = format!("--{name}={value}");
    let mut out = Vec::with_capacity(command.len() + 1);
    let mut placed = false;
    for arg in command {
        if flag_name(arg) == Some(name) {
            if !placed {
                out.push(wanted.clone());
                placed = true;
            }
        } else {
            out.push(arg.clone());
        }
    }
    if !placed {
        let at = out
            .iter()
            .position(|arg| flag_name(arg).is_some_and(|other| other > name))
            .unwrap_or(out.len());
        out.insert(at, wanted);
    }
    out
}

/// Removes every occurrence of `--name` / `--name=value`.
pub fn remove_flag(command: &[String], name: &str) -> Vec<String> {
    command
        .iter()
        .filter(|arg| flag_name(arg) != Some(name))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn set_flag_table() {
        let base = cmd(&[
            "kube-scheduler",
            "--bind-address=127.0.0.1",
            "--leader-elect=true",
        ]);
        let rows: &[(&str, &str, &[&str])] = &[
            // rewritten in place
            (
                "leader-elect",
                "false",
                &[
                    "kube-scheduler",
                    "--bind-address=127.0.0.1",
                    "--leader-elect=false",
                ],
            ),
            // inserted in sorted position
            (
                "kubeconfig",
                "/k",
                &[
                    "kube-scheduler",
                    "--bind-address=127.0.0.1",
                    "--kubeconfig=/k",
                    "--leader-elect=true",
                ],
            ),
            // sorts before everything: goes right after the binary
            (
                "a",
                "1",
                &[
                    "kube-scheduler",
                    "--a=1",
                    "--bind-address=127.0.0.1",
                    "--leader-elect=true",
                ],
            ),
            // sorts after everything: appended
            (
                "v",
                "2",
                &[
                    "kube-scheduler",
                    "--bind-address=127.0.0.1",
                    "--leader-elect=true",
                    "--v=2",
                ],
            ),
        ];
        for (name, value, want) in rows {
            assert_eq!(
                set_flag(&base, name, value),
                cmd(want),
                "set --{name}={value}"
            );
        }
    }

    #[test]
    fn set_flag_collapses_duplicates_and_keeps_bare_arguments() {
        let base = cmd(&["kube-apiserver", "--v=2", "positional", "--v=4", "--x"]);
        assert_eq!(
            set_flag(&base, "v", "3"),
            cmd(&["kube-apiserver", "--v=3", "positional", "--x"])
        );
    }

    #[test]
    fn flag_value_reads_the_last_occurrence_and_bare_booleans() {
        let base = cmd(&["kube-apiserver", "--v=2", "--v=4", "--permit-port-sharing"]);
        assert_eq!(flag_value(&base, "v"), Some("4"));
        assert_eq!(flag_value(&base, "permit-port-sharing"), Some("true"));
        assert_eq!(flag_value(&base, "missing"), None);
        // a flag whose name merely starts with another's is a different flag
        assert_eq!(flag_value(&cmd(&["--vmodule=x"]), "v"), None);
    }

    #[test]
    fn remove_flag_removes_all_forms() {
        let base = cmd(&["k", "--a=1", "--a", "--b=2"]);
        assert_eq!(remove_flag(&base, "a"), cmd(&["k", "--b=2"]));
    }
}
