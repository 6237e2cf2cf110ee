//! The leader-election clock of the kube-controller-manager and kube-scheduler templates
//! selfhost writes.
//!
//! A stopped leader does not release its Lease; selfhost hands the Lease over once the
//! holder's process is confirmed gone (see `pivot::leader`), and from then on the role is
//! leaderless until a standby next tries to acquire. client-go's standby waits its retry
//! period plus a jitter of up to 1.2 periods between tries, so with the upstream default
//! (2 s) the hand-over alone can cost 4.4 s. A retry period of 500 ms bounds that wait at
//! 1.1 s, which leaves 1.9 s of [`crate::disruption::HANDED_OVER_GAP`] (3 s) for the kubelet
//! to report the old process gone and the engine to see it.
//!
//! The price is load: the leader renews twice a second instead of every 2 s (one small Lease
//! write each time, per component) and each standby reads the Lease about once a second. The
//! lease duration and renew deadline stay at the upstream defaults, written out so that the
//! three flags are seen together and client-go's rule holds by construction (the lease
//! duration above the renew deadline, which is above 1.2 retry periods): a leader still rides
//! out a 10 s API outage, and a
//! standby still waits 15 s before it takes over from a holder nobody confirmed gone.

use k8s_openapi::api::core::v1::PodSpec;

use crate::command_line;

/// `--leader-elect-lease-duration`: the upstream default.
pub const LEADER_ELECT_LEASE_DURATION: &str = "15s";
/// `--leader-elect-renew-deadline`: the upstream default.
pub const LEADER_ELECT_RENEW_DEADLINE: &str = "10s";
/// `--leader-elect-retry-period`: a quarter of the upstream default (see the module doc).
pub const LEADER_ELECT_RETRY_PERIOD: &str = "500ms";

/// The three flags and their values, in the order they are set.
pub const LEADER_ELECTION_FLAGS: [(&str, &str); 3] = [
    ("leader-elect-lease-duration", LEADER_ELECT_LEASE_DURATION),
    ("leader-elect-renew-deadline", LEADER_ELECT_RENEW_DEADLINE),
    ("leader-elect-retry-period", LEADER_ELECT_RETRY_PERIOD),
];

/// Sets the leader-election clock on the component's container (the first one): in its
/// command when the command carries flags (kubeadm's style), else in its args. Values
/// already there are replaced, wherever they stand: the hand-over's bound depends on them.
pub fn elect_promptly(mut spec: PodSpec) -> PodSpec {
    let Some(container) = spec.containers.first_mut() else {
        return spec;
    };
    let flags_in_command = container
        .command
        .as_ref()
        .is_some_and(|c| c.iter().any(|w| w.starts_with("--")));
    let has_args = container.args.as_ref().is_some_and(|a| !a.is_empty());
    let (set_in, clear_in) = if flags_in_command || !has_args {
        (&mut container.command, &mut container.args)
    } else {
        (&mut container.args, &mut container.command)
    };
    let mut words = set_in.take().unwrap_or_default();
    for (name, value) in LEADER_ELECTION_FLAGS {
        words = command_line::set_flag(&words, name, value);
        if let Some(other) = clear_in.as_mut() {
            *other = command_line::remove_flag(other, name);
        }
    }
    *set_in = Some(words);
    spec
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Container;

    use super::*;
    use crate::component::Component;
    use crate::daemonset::{DaemonSetOptions, self_hosted_pod_spec};

    fn words(line: &[&str]) -> Option<Vec<String>> {
        (!line.is_empty()).then(|| line.iter().map(|w| w.to_string()).collect())
    }

    fn spec(command: &[&str], args: &[&str]) -> PodSpec {
        PodSpec {
            containers: vec![Container {
                name: "kube-scheduler".into(),
                command: words(command),
                args: words(args),
                ..Container::default()
            }],
            ..PodSpec::default()
        }
    }

    const SET: [&str; 3] = [
        "--leader-elect-lease-duration=15s",
        "--leader-elect-renew-deadline=10s",
        "--leader-elect-retry-period=500ms",
    ];

    #[test]
    fn the_clock_goes_where_the_flags_are_and_replaces_any_other() {
        type Line = &'static [&'static str];
        type Lines = (Vec<&'static str>, Vec<&'static str>);
        // (command, args) before → (command, args) after.
        let cases: [((Line, Line), Lines); 5] = [
            (
                (&["kube-scheduler", "--leader-elect=true"], &[]),
                (
                    [&["kube-scheduler"][..], &["--leader-elect=true"], &SET].concat(),
                    vec![],
                ),
            ),
            (
                (
                    &["kube-scheduler"],
                    &["--kubeconfig=/k", "--leader-elect=true"],
                ),
                (
                    vec!["kube-scheduler"],
                    [&["--kubeconfig=/k", "--leader-elect=true"][..], &SET].concat(),
                ),
            ),
            (
                (
                    &[
                        "kube-scheduler",
                        "--leader-elect-retry-period=2s",
                        "--leader-elect-lease-duration=60s",
                    ],
                    &["--leader-elect-renew-deadline=40s"],
                ),
                (
                    vec![
                        "kube-scheduler",
                        "--leader-elect-renew-deadline=10s",
                        "--leader-elect-retry-period=500ms",
                        "--leader-elect-lease-duration=15s",
                    ],
                    vec![],
                ),
            ),
            ((&[], &[]), (SET.to_vec(), vec![])),
            (
                (&["kube-scheduler"], &[]),
                ([&["kube-scheduler"][..], &SET].concat(), vec![]),
            ),
        ];
        for ((command, args), (want_command, want_args)) in cases {
            let out = elect_promptly(spec(command, args));
            let c = &out.containers[0];
            assert_eq!(
                (
                    c.command.clone().unwrap_or_default(),
                    c.args.clone().unwrap_or_default()
                ),
                (
                    want_command.iter().map(|w| w.to_string()).collect(),
                    want_args.iter().map(|w| w.to_string()).collect()
                ),
                "{command:?} {args:?}"
            );
            assert_eq!(elect_promptly(out.clone()), out, "idempotent");
        }
        assert_eq!(elect_promptly(PodSpec::default()), PodSpec::default());
    }

    #[test]
    fn only_the_elected_components_get_the_clock_and_client_go_accepts_it() {
        let seconds = |text: &str| -> f64 {
            text.strip_suffix("ms")
                .map(|ms| ms.parse::<f64>().unwrap() / 1000.0)
                .or_else(|| text.strip_suffix('s').map(|s| s.parse().unwrap()))
                .unwrap()
        };
        let (lease, renew, retry) = (
            seconds(LEADER_ELECT_LEASE_DURATION),
            seconds(LEADER_ELECT_RENEW_DEADLINE),
            seconds(LEADER_ELECT_RETRY_PERIOD),
        );
        assert!(lease > renew && renew > 1.2 * retry, "client-go's rule");
        for component in Component::ALL {
            let spec = spec(&[component.name(), "--leader-elect=true"], &[]);
            let out = self_hosted_pod_spec(component, spec, &DaemonSetOptions::default())
                .expect("no Secrets to mount");
            let line = out.containers[0].command.clone().unwrap_or_default();
            let got: Vec<Option<&str>> = LEADER_ELECTION_FLAGS
                .iter()
                .map(|(name, _)| command_line::flag_value(&line, name))
                .collect();
            let want: Vec<Option<&str>> = match component {
                Component::ApiServer => vec![None; 3],
                _ => LEADER_ELECTION_FLAGS
                    .iter()
                    .map(|(_, v)| Some(*v))
                    .collect(),
            };
            assert_eq!(got, want, "{component}");
        }
    }
}
