//! The node-local API front's command line (`selfhost front --listen <addr> --backend <addr>
//! …`), read as its own command-line parser reads it: the kubelet needs the address it binds
//! and how long it drains, the hand-over model where it passes connections and how often it
//! checks them. (The simulator does not depend on selfhost, so it reads the flags itself.)

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Container;

use super::duration_text::parse_go_duration;

/// The binary a front runs.
pub const FRONT_BINARY: &str = "selfhost";
/// The subcommand that makes it a front.
pub const FRONT_SUBCOMMAND: &str = "front";
/// How often it checks each backend's `/readyz` when its flags do not say (its own default).
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_millis(200);
/// How long it holds a new connection while no backend is healthy (its own default).
pub const DEFAULT_HOLD: Duration = Duration::from_secs(2);
/// How long it lets open connections finish once told to stop (its own default).
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(25);

/// A front's command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontCommand {
    /// `--listen`: the node's API address, where clients connect.
    pub listen: SocketAddr,
    /// Every `--backend`, in order: the node's kube-apiservers.
    pub backends: Vec<SocketAddr>,
    /// `--check-interval`, when given.
    pub check_interval: Option<Duration>,
    /// `--hold`, when given.
    pub hold: Option<Duration>,
    /// `--drain-timeout`, when given.
    pub drain: Option<Duration>,
}

impl FrontCommand {
    /// The front a container runs: its binary (the base name of `command[0]`) is `selfhost`
    /// and its first argument `front`, with a `--listen` address. `None` for anything else
    /// (a front without a readable `--listen` is not modelled as one).
    pub fn of(container: &Container) -> Option<FrontCommand> {
        let command = container.command.as_ref().filter(|c| !c.is_empty())?;
        let words: Vec<String> = command
            .iter()
            .chain(container.args.iter().flatten())
            .cloned()
            .collect();
        Self::parse(&words)
    }

    /// The front a command line (binary first) runs, as [`FrontCommand::of`] reads it.
    pub fn parse(words: &[String]) -> Option<FrontCommand> {
        let binary = words.first()?.rsplit('/').next()?;
        if binary != FRONT_BINARY || words.get(1).map(String::as_str) != Some(FRONT_SUBCOMMAND) {
            return None;
        }
        let flags = &words[2..];
        let last = |name: &str| values(flags, name).pop();
        let duration = |name: &str| last(name).and_then(|v| parse_go_duration(&v));
        Some(FrontCommand {
            listen: last("listen")?.parse().ok()?,
            backends: values(flags, "backend")
                .iter()
                .filter_map(|v| v.parse().ok())
                .collect(),
            check_interval: duration("check-interval"),
            hold: duration("hold"),
            drain: duration("drain-timeout"),
        })
    }
}

/// Every value of `--name value` or `--name=value`, in order.
fn values(words: &[String], name: &str) -> Vec<String> {
    let long = format!("--{name}");
    let mut out = Vec::new();
    let mut words = words.iter();
    while let Some(word) = words.next() {
        if let Some(value) = word.strip_prefix(&long).and_then(|r| r.strip_prefix('=')) {
            out.push(value.to_string());
        } else if *word == long
            && let Some(value) = words.next()
        {
            out.push(value.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn a_front_is_read_from_its_command_line() {
        let front = FrontCommand::parse(&words(
            "/usr/bin/selfhost front --listen 10.0.0.11:6443 --backend 127.0.0.1:6443 \
             --backend=127.0.0.2:6443 --ca-file /etc/kubernetes/pki/ca.crt \
             --check-server-name kubernetes --check-interval 20ms --hold 200ms \
             --drain-timeout 2500ms",
        ))
        .expect("a front");
        assert_eq!(front.listen, "10.0.0.11:6443".parse().unwrap());
        assert_eq!(
            front.backends,
            [
                "127.0.0.1:6443".parse().unwrap(),
                "127.0.0.2:6443".parse().unwrap()
            ]
        );
        assert_eq!(front.check_interval, Some(Duration::from_millis(20)));
        assert_eq!(front.hold, Some(Duration::from_millis(200)));
        assert_eq!(front.drain, Some(Duration::from_millis(2_500)));

        let defaults =
            FrontCommand::parse(&words("selfhost front --listen=10.0.0.11:6443")).unwrap();
        assert_eq!(
            (defaults.check_interval, defaults.hold, defaults.drain),
            (None, None, None)
        );
        for other in [
            "selfhost checkpoint --node cp-1",
            "selfhost front",
            "selfhost front --listen nowhere",
            "kube-apiserver front --listen 10.0.0.11:6443",
        ] {
            assert_eq!(FrontCommand::parse(&words(other)), None, "{other}");
        }
    }

    #[test]
    fn the_binary_comes_from_the_command_not_the_args() {
        let container = |command: Option<&str>, args: &str| Container {
            name: "front".into(),
            command: command.map(words),
            args: Some(words(args)),
            ..Container::default()
        };
        let listen = "front --listen 10.0.0.11:6443";
        assert!(FrontCommand::of(&container(Some("selfhost"), listen)).is_some());
        assert!(FrontCommand::of(&container(None, &format!("selfhost {listen}"))).is_none());
    }
}
