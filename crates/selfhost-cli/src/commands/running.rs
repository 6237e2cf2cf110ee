//! What every command that changes the cluster does around the engine's run, `apply` and
//! `convert` alike: a stop signal asks for the next safe point (a second one abandons the
//! run, exit 4); the engine's events go to stdout as JSON lines for programs, or to the
//! progress display on stderr for people.

use std::collections::HashMap;

use selfhost::{Component, Event, Events, Stamped};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::exit::Outcome;
use crate::progress::Progress;
use crate::ui;

/// How many of a wait's pending items a plain line shows; the rest are counted.
const PENDING_SHOWN: usize = 3;
/// A parenthesis in a step's description longer than this explains the mechanism; shorter
/// ones (`(grace 10s)`) are part of what the step does.
const SHORT_ASIDE: usize = 40;

/// A run in progress: the token a stop signal cancels, and the progress display.
pub struct Running {
    /// Cancelled by the first SIGINT or SIGTERM: the engine stops at its next safe point.
    pub cancel: CancellationToken,
    /// The progress display on stderr.
    pub progress: Progress,
    signals: JoinHandle<()>,
}

impl Running {
    /// Starts listening for stop signals. Must be called inside a tokio runtime.
    pub fn start() -> Running {
        let cancel = CancellationToken::new();
        let progress = Progress::stderr();
        let (signal_cancel, signal_progress) = (cancel.clone(), progress.clone());
        let mut stops = super::signals::StopSignals::listen();
        let signals = tokio::spawn(async move {
            let stop = stops.next().await;
            signal_progress.line(&format!(
                "{stop}: stopping at the next safe point (signal again to abandon the run at once)..."
            ));
            signal_cancel.cancel();
            stops.next().await;
            signal_progress.finish();
            std::process::exit(i32::from(Outcome::NotRestored.code()));
        });
        Running {
            cancel,
            progress,
            signals,
        }
    }

    /// The engine's events, shown as `show` says from now on; [`Printer::finish`] returns
    /// every event once the run is over.
    pub fn printer(&self, show: Show) -> Printer {
        let (sender, mut receiver) = mpsc::unbounded_channel::<Stamped>();
        let progress = self.progress.clone();
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut lines = StepLines::default();
            while let Some(event) = receiver.recv().await {
                if show.json {
                    let _ = ui::json_line(&event);
                } else {
                    progress.event(&event, lines.render(&event, &show));
                }
                seen.push(event);
            }
            progress.finish();
            seen
        });
        Printer {
            events: Events::to(sender),
            task,
        }
    }

    /// Stops listening for signals: the run is over.
    pub fn end(self) {
        self.signals.abort();
        self.progress.finish();
    }
}

/// Where the engine's events go during a run.
pub struct Printer {
    /// What the engine reports to.
    pub events: Events,
    task: JoinHandle<Vec<Stamped>>,
}

impl Printer {
    /// Waits until every event is shown; returns them all.
    pub async fn finish(self) -> Vec<Stamped> {
        drop(self.events);
        self.task.await.unwrap_or_default()
    }
}

/// How events are shown.
#[derive(Debug, Clone)]
pub struct Show {
    /// `-o json`: every event as a JSON line on stdout.
    pub json: bool,
    /// What a component's work is called when it starts (`upgrading`, `converting`).
    pub verb: &'static str,
    /// A dry run: waits are described, not waited for, and each write's acceptance by the
    /// API server's dry run is the step's result.
    pub dry_run: bool,
    /// `-v`: each write's details under its step.
    pub verbose: bool,
}

/// What a wait still waits for, in a few words: up to [`PENDING_SHOWN`] items, the rest
/// counted.
fn pending_words(pending: &[String]) -> String {
    let shown: Vec<&str> = pending
        .iter()
        .take(PENDING_SHOWN)
        .map(|p| p.strip_prefix("waiting for ").unwrap_or(p))
        .collect();
    let more = pending.len().saturating_sub(PENDING_SHOWN);
    let mut words = shown.join("; ");
    if more > 0 {
        words.push_str(&format!(" (+{more} more)"));
    }
    words
}

/// What a step does without why: its description without long parentheses and up to the
/// first `; ` outside them, which explain the mechanism (`-v` shows them).
fn brief(description: &str) -> String {
    let mut out = String::with_capacity(description.len());
    let mut rest = description;
    while let Some(open) = rest.find(" (") {
        // The matching parenthesis, nested ones included; none: the text is kept as it is.
        let mut depth = 0;
        let close = rest[open + 1..].char_indices().find_map(|(i, c)| {
            depth += match c {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            (depth == 0).then_some(open + 1 + i)
        });
        let Some(close) = close else {
            break;
        };
        let aside = &rest[open + 2..close];
        out.push_str(&rest[..open]);
        if aside.chars().count() <= SHORT_ASIDE && !aside.contains(':') {
            out.push_str(&rest[open..=close]);
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    match out.find("; ") {
        Some(end) => out[..end].to_string(),
        None => out,
    }
}

/// The permanent lines of a run as [`render`] makes them, less a wait step that only resumes
/// the wait its component showed last: after a step of the same wait (a Lease handed over
/// while a rollout waits, the next node's old pod deleted), the wait goes on unsaid, and the
/// live line shows what it still waits for.
#[derive(Debug, Default)]
pub struct StepLines {
    /// Per component, the step and brief description of the last wait it showed.
    last_wait: HashMap<Component, (String, String)>,
}

impl StepLines {
    /// The line for `event`, if it has one and it is no repeat.
    pub fn render(&mut self, event: &Stamped, show: &Show) -> Option<String> {
        match &event.event {
            Event::ComponentStarted { component } | Event::ComponentFinished { component, .. } => {
                self.last_wait.remove(component);
            }
            Event::Step {
                component,
                step,
                description,
            } if description.starts_with(WAIT) => {
                // Compared as shown: a wait's explanation may change while what it waits
                // for does not.
                let wait = (step.clone(), brief(description));
                if self.last_wait.get(component) == Some(&wait) {
                    return None;
                }
                self.last_wait.insert(*component, wait);
            }
            _ => {}
        }
        render(event, show)
    }
}

/// How a waiting step's description begins.
const WAIT: &str = "wait: ";

/// An event as a permanent line for people (`None`: it has none): one line per step as it
/// begins; what a wait still waits for (on the live line of a terminal, and off one at most
/// once a second); what each write did only in a dry run (where it is the result) or with
/// `-v`.
pub fn render(event: &Stamped, show: &Show) -> Option<String> {
    let at = format!("[{:>6.1}s]", event.at);
    Some(match &event.event {
        Event::ComponentStarted { component } => format!("{at} {component}: {}", show.verb),
        Event::Step { step, .. } if step == "done" || step == "wait" => return None,
        Event::Step {
            component,
            step,
            description,
        } if show.verbose => format!("{at} {component}: {step}: {description}"),
        Event::Step {
            component,
            step,
            description,
        } => {
            // The step's name already says it waits.
            let what = brief(description);
            format!(
                "{at} {component}: {step}: {}",
                what.strip_prefix(WAIT).unwrap_or(&what)
            )
        }
        Event::Waiting {
            component,
            condition,
            ..
        } if show.dry_run => format!("{at} {component}:   would wait for {condition} (dry run)"),
        Event::Waiting {
            component, pending, ..
        } if !pending.is_empty() => {
            format!("{at} {component}:   waiting for {}", pending_words(pending))
        }
        Event::Waiting { .. } => return None,
        Event::Action { dry_run: false, .. } if !show.verbose => return None,
        Event::Action {
            component,
            detail,
            dry_run,
            ..
        } => format!(
            "{at} {component}:   {}{detail}",
            // A conversion's dry-run actions say so themselves.
            if *dry_run && !detail.contains("dry run") {
                "(dry run) "
            } else {
                ""
            }
        ),
        Event::ComponentFinished {
            component,
            outcome,
            message,
            elapsed_seconds,
        } => format!("{at} {component}: {outcome} after {elapsed_seconds:.1}s: {message}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show() -> Show {
        Show {
            json: false,
            verb: "upgrading",
            dry_run: false,
            verbose: false,
        }
    }

    fn at(event: Event) -> Stamped {
        Stamped { at: 1.25, event }
    }

    #[test]
    fn a_wait_says_what_it_waits_for_without_doubled_words() {
        let waiting = at(Event::Waiting {
            component: Component::Scheduler,
            step: "wait-for-rollout".into(),
            condition: "every pod Ready".into(),
            pending: vec![
                "waiting for the DaemonSet controller to observe generation 3".into(),
                "a".into(),
                "b".into(),
                "c".into(),
            ],
        });
        assert_eq!(
            render(&waiting, &show()).as_deref(),
            Some(
                "[   1.2s] kube-scheduler:   waiting for the DaemonSet controller to observe \
                 generation 3; a; b (+1 more)"
            )
        );
    }

    #[test]
    fn a_conversions_dry_run_action_is_not_marked_twice() {
        let action = at(Event::Action {
            component: Component::ApiServer,
            step: "create-daemonset".into(),
            detail: "accepted by the API server's dry run: created DaemonSet d".into(),
            dry_run: true,
        });
        assert_eq!(
            render(&action, &show()).as_deref(),
            Some(
                "[   1.2s] kube-apiserver:   accepted by the API server's dry run: created \
                 DaemonSet d"
            )
        );
    }

    #[test]
    fn a_write_is_one_line_with_its_step_and_its_details_only_with_verbose() {
        let step = at(Event::Step {
            component: Component::ApiServer,
            step: "create-backup".into(),
            description: "create backup DaemonSet kube-system/kube-apiserver-backup".into(),
        });
        let action = at(Event::Action {
            component: Component::ApiServer,
            step: "create-backup".into(),
            detail: "created DaemonSet kube-system/kube-apiserver-backup".into(),
            dry_run: false,
        });
        assert_eq!(
            render(&step, &show()).as_deref(),
            Some(
                "[   1.2s] kube-apiserver: create-backup: create backup DaemonSet \
                 kube-system/kube-apiserver-backup"
            )
        );
        assert_eq!(render(&action, &show()), None);
        let verbose = Show {
            verbose: true,
            ..show()
        };
        assert_eq!(
            render(&action, &verbose).as_deref(),
            Some("[   1.2s] kube-apiserver:   created DaemonSet kube-system/kube-apiserver-backup")
        );
    }

    #[test]
    fn a_step_line_says_what_the_step_does_and_leaves_why_to_verbose() {
        let rows = [
            (
                "create backup DaemonSet temp-upgrade-self-hosted-kube-apiserver (record only, \
                 no pods: on several nodes the other nodes serve while one is replaced; a \
                 backup process (one more) would catch connections before it serves)",
                "create backup DaemonSet temp-upgrade-self-hosted-kube-apiserver",
            ),
            (
                "restore the update strategy RollingUpdate (maxUnavailable 1, maxSurge 0): \
                 every node runs a new pod that serves",
                "restore the update strategy RollingUpdate (maxUnavailable 1, maxSurge 0): \
                 every node runs a new pod that serves",
            ),
            (
                "update self-hosted-kube-apiserver to the target template, holding its rollout \
                 (update strategy OnDelete: selfhost replaces the old pods one node at a time)",
                "update self-hosted-kube-apiserver to the target template, holding its rollout",
            ),
            (
                "delete old pod self-hosted-kube-apiserver-6dxjx on cp-1 (grace 10s)",
                "delete old pod self-hosted-kube-apiserver-6dxjx on cp-1 (grace 10s)",
            ),
            (
                "wait: every pod of self-hosted-kube-apiserver on the target template, Ready \
                 and serving; selfhost replaces the old pods one node at a time",
                "wait: every pod of self-hosted-kube-apiserver on the target template, Ready \
                 and serving",
            ),
            ("an unclosed (parenthesis", "an unclosed (parenthesis"),
            ("", ""),
        ];
        for (description, expected) in rows {
            assert_eq!(brief(description), expected, "{description}");
        }
    }

    #[test]
    fn a_terminal_step_has_no_line_of_its_own() {
        let done = at(Event::Step {
            component: Component::Scheduler,
            step: "done".into(),
            description: "kube-scheduler runs v1.34.0".into(),
        });
        assert_eq!(render(&done, &show()), None);
    }

    #[test]
    fn a_wait_resumed_after_a_step_of_its_own_is_not_said_again() {
        let step = |component, step: &str, description: &str| {
            at(Event::Step {
                component,
                step: step.into(),
                description: description.into(),
            })
        };
        let rollout = "wait: every pod of self-hosted-kube-apiserver on the target template";
        let events = [
            at(Event::ComponentStarted {
                component: Component::ApiServer,
            }),
            step(
                Component::ApiServer,
                "delete-old-pod",
                "delete old pod a on cp-1",
            ),
            step(Component::ApiServer, "wait-for-rollout", rollout),
            step(
                Component::ApiServer,
                "delete-old-pod",
                "delete old pod b on cp-2",
            ),
            step(
                Component::ApiServer,
                "wait-for-rollout",
                &format!("{rollout}; now that every node runs a new pod"),
            ),
            step(Component::Scheduler, "wait-for-rollout", rollout),
            step(
                Component::ApiServer,
                "remove-backup",
                "remove backup DaemonSet t",
            ),
            step(
                Component::ApiServer,
                "wait-for-backup-gone",
                "wait: backup t gone",
            ),
            at(Event::ComponentFinished {
                component: Component::ApiServer,
                outcome: "done".into(),
                message: "runs v1.34.0".into(),
                elapsed_seconds: 3.0,
            }),
            at(Event::ComponentStarted {
                component: Component::ApiServer,
            }),
            step(Component::ApiServer, "wait-for-rollout", rollout),
        ];
        let mut lines = StepLines::default();
        let shown: Vec<String> = events
            .iter()
            .filter_map(|e| lines.render(e, &show()))
            .map(|l| l.trim_start_matches("[   1.2s] ").to_string())
            .collect();
        assert_eq!(
            shown,
            [
                "kube-apiserver: upgrading",
                "kube-apiserver: delete-old-pod: delete old pod a on cp-1",
                "kube-apiserver: wait-for-rollout: every pod of self-hosted-kube-apiserver on \
                 the target template",
                "kube-apiserver: delete-old-pod: delete old pod b on cp-2",
                "kube-scheduler: wait-for-rollout: every pod of self-hosted-kube-apiserver on \
                 the target template",
                "kube-apiserver: remove-backup: remove backup DaemonSet t",
                "kube-apiserver: wait-for-backup-gone: backup t gone",
                "kube-apiserver: done after 3.0s: runs v1.34.0",
                "kube-apiserver: upgrading",
                "kube-apiserver: wait-for-rollout: every pod of self-hosted-kube-apiserver on \
                 the target template",
            ]
        );
    }
}
