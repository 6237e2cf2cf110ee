//! Progress on stderr: a spinner line when stderr is a terminal, plain lines otherwise.
//!
//! On a terminal, finished things (a step begun, a write made, a component done) print as
//! permanent lines above one live line that shows the current step, what it still waits for
//! and how long it has taken; the live line is redrawn ten times a second and erased at the
//! end. Anywhere else (a pipe, a file, CI logs) there is no live line: every step is a line,
//! and "waiting for" lines come at most once a second. Colour only on a terminal, and never
//! with `NO_COLOR` set (https://no-color.org) or `TERM=dumb`.
//!
//! The drawing is a pure function of what is shown ([`live_line`]) so that it is tested
//! without a terminal.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use selfhost::{Event, Stamped};

/// Frames of the spinner (braille dots, as most terminals' fonts have them).
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/// How often the live line is redrawn.
const TICK: Duration = Duration::from_millis(100);
/// Plain output's "waiting for" lines come at most this often.
const PLAIN_WAIT_INTERVAL: f64 = 1.0;
/// The fewest columns worth showing of a pending item cut to fit the live line.
const MIN_CUT_ITEM: usize = 16;
/// Width assumed when the terminal does not say.
const DEFAULT_WIDTH: usize = 80;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// One line per step; for pipes and files.
    Plain,
    /// Permanent lines above a live spinner line; for terminals.
    Live {
        /// Whether to colour it.
        color: bool,
    },
}

impl Style {
    /// The style for stderr as it is: live on a terminal (coloured unless `NO_COLOR` or
    /// `TERM=dumb`), plain otherwise. A dumb terminal cannot erase a line, so it gets plain
    /// lines too.
    pub fn for_stderr() -> Style {
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        if !std::io::stderr().is_terminal() || dumb {
            return Style::Plain;
        }
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Style::Live { color: !no_color }
    }
}

/// What the live line shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// The current step, e.g. `kube-apiserver: wait-for-rollout`.
    pub current: String,
    /// What it still waits for.
    pub pending: Vec<String>,
}

/// The live line: spinner, current step, elapsed time, and as much of the pending list as
/// fits in `width` columns (the rest counted). Never wider than `width`.
pub fn live_line(
    frame: usize,
    status: &Status,
    elapsed: Duration,
    width: usize,
    color: bool,
) -> String {
    let spinner = FRAMES[frame % FRAMES.len()];
    let time = format!("{:.1}s", elapsed.as_secs_f64());
    // Columns: spinner, space, current, " (", time, ")".
    let fixed = 2 + 2 + time.chars().count() + 1;
    let current = truncate(&status.current, width.saturating_sub(fixed));
    let mut used = fixed + current.chars().count();
    let mut waiting = String::new();
    if !status.pending.is_empty() {
        let prefix = " · waiting for ";
        let mut shown = 0;
        for (i, item) in status.pending.iter().enumerate() {
            let rest = status.pending.len() - i - 1;
            let more = if rest > 0 {
                format!(" (+{rest} more)")
            } else {
                String::new()
            };
            let sep = if shown == 0 { prefix } else { "; " };
            let cost = sep.chars().count() + item.chars().count();
            // Keep room for the "(+N more)" that would follow if this is the last one shown.
            let room = width.saturating_sub(used + sep.chars().count() + more.chars().count());
            if used + cost + more.chars().count() > width {
                // A first item too long for the line is shown cut, where enough of it fits to
                // be read; a count alone says nothing of what is waited for.
                if shown == 0 && room >= MIN_CUT_ITEM {
                    let cut = truncate(item, room);
                    waiting.push_str(sep);
                    used += sep.chars().count() + cut.chars().count();
                    waiting.push_str(&cut);
                    shown = 1;
                }
                break;
            }
            waiting.push_str(sep);
            waiting.push_str(item);
            used += cost;
            shown += 1;
        }
        let hidden = status.pending.len() - shown;
        if hidden > 0 {
            let note = if shown == 0 {
                format!(" · waiting for {hidden} thing(s)")
            } else {
                format!(" (+{hidden} more)")
            };
            if used + note.chars().count() <= width {
                waiting.push_str(&note);
            }
        }
    }
    if color {
        format!("\x1b[36m{spinner}\x1b[0m {current}\x1b[2m{waiting} ({time})\x1b[0m")
    } else {
        format!("{spinner} {current}{waiting} ({time})")
    }
}

/// `text` cut to `width` columns, with an ellipsis when cut.
fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A permanent line, coloured by what it reports on a coloured terminal.
pub fn permanent_line(event: Option<&Event>, text: &str, color: bool) -> String {
    let code = match event {
        Some(Event::ComponentFinished { outcome, .. }) if color => match outcome.as_str() {
            "done" | "dry-run" => Some("32"),
            "interrupted" => Some("33"),
            _ => Some("31"),
        },
        _ => None,
    };
    match code {
        Some(code) => format!("\x1b[{code}m{text}\x1b[0m"),
        None => text.to_string(),
    }
}

struct State {
    status: Option<Status>,
    step_started: Instant,
    frame: usize,
    /// When the last plain "waiting for" line was printed (event time, seconds).
    last_wait: Option<f64>,
    finished: bool,
}

/// Progress on stderr (cheap to clone; clones share the display).
#[derive(Clone)]
pub struct Progress {
    style: Style,
    state: Arc<Mutex<State>>,
}

impl Progress {
    /// Progress for stderr as it is; on a terminal a task redraws the live line until
    /// [`Progress::finish`]. Must be called inside a tokio runtime.
    pub fn stderr() -> Progress {
        Progress::with_style(Style::for_stderr())
    }

    /// Progress in a given style.
    pub fn with_style(style: Style) -> Progress {
        let progress = Progress {
            style,
            state: Arc::new(Mutex::new(State {
                status: None,
                step_started: Instant::now(),
                frame: 0,
                last_wait: None,
                finished: false,
            })),
        };
        if let Style::Live { .. } = style {
            let ticker = progress.clone();
            tokio::spawn(async move {
                let mut interval = tokio::time::interval(TICK);
                loop {
                    interval.tick().await;
                    if !ticker.tick() {
                        break;
                    }
                }
            });
        }
        progress
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while drawing leaves nothing inconsistent worth refusing to draw again.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Redraws the live line; false once finished.
    fn tick(&self) -> bool {
        let mut state = self.lock();
        if state.finished {
            return false;
        }
        state.frame = state.frame.wrapping_add(1);
        self.draw(&state);
        true
    }

    fn draw(&self, state: &State) {
        let (Style::Live { color }, Some(status)) = (self.style, &state.status) else {
            return;
        };
        let width = terminal_size::terminal_size_of(std::io::stderr())
            .map_or(DEFAULT_WIDTH, |(w, _)| usize::from(w.0));
        // One column spare: some terminals wrap when the last column is written.
        let line = live_line(
            state.frame,
            status,
            state.step_started.elapsed(),
            width.saturating_sub(1),
            color,
        );
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
    }

    /// Prints a permanent line (above the live line on a terminal).
    pub fn line(&self, text: &str) {
        self.line_for(None, text);
    }

    fn line_for(&self, event: Option<&Event>, text: &str) {
        let state = self.lock();
        let mut err = std::io::stderr().lock();
        match self.style {
            Style::Plain => {
                let _ = writeln!(err, "{text}");
            }
            Style::Live { color } => {
                let _ = writeln!(err, "\r\x1b[2K{}", permanent_line(event, text, color));
                drop(err);
                self.draw(&state);
            }
        }
    }

    /// Sets the current step of the live line (and restarts its clock). Plain output shows
    /// steps through [`Progress::line`] only.
    pub fn step(&self, current: impl Into<String>) {
        let mut state = self.lock();
        state.status = Some(Status {
            current: current.into(),
            pending: Vec::new(),
        });
        state.step_started = Instant::now();
        // Each step's spinner starts from its first frame.
        state.frame = 0;
        self.draw(&state);
    }

    /// Sets what the current step waits for. Plain output prints `plain` instead, at most once
    /// a second (`at`: seconds since the run started).
    pub fn waiting(&self, pending: Vec<String>, at: f64, plain: Option<&str>) {
        let mut state = self.lock();
        match self.style {
            Style::Live { .. } => {
                if let Some(status) = &mut state.status {
                    status.pending = pending;
                }
                self.draw(&state);
            }
            Style::Plain => {
                let Some(text) = plain else { return };
                if state
                    .last_wait
                    .is_some_and(|last| at - last < PLAIN_WAIT_INTERVAL)
                {
                    return;
                }
                state.last_wait = Some(at);
                let _ = writeln!(std::io::stderr(), "{text}");
            }
        }
    }

    /// Shows one engine event; `text` is its rendering as a permanent line (`None`: it has
    /// none).
    pub fn event(&self, event: &Stamped, text: Option<String>) {
        match &event.event {
            Event::Waiting { pending, .. } => {
                self.waiting(pending.clone(), event.at, text.as_deref());
                return;
            }
            Event::Step {
                component, step, ..
            } if step != "done" => self.step(format!("{component}: {step}")),
            Event::ComponentStarted { component } => self.step(format!("{component}: starting")),
            _ => {}
        }
        self.lock().last_wait = None;
        if let Some(text) = text {
            self.line_for(Some(&event.event), &text);
        }
    }

    /// Erases the live line and stops redrawing it. Idempotent.
    pub fn finish(&self) {
        let mut state = self.lock();
        if state.finished {
            return;
        }
        state.finished = true;
        if let (Style::Live { .. }, Some(_)) = (self.style, &state.status) {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(current: &str, pending: &[&str]) -> Status {
        Status {
            current: current.into(),
            pending: pending.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn the_live_line_shows_step_pending_and_elapsed_within_the_width() {
        let rollout = || {
            status(
                "kube-apiserver: wait-for-rollout",
                &["cp-1 Ready", "cp-2 Ready"],
            )
        };
        let cases = [
            (
                rollout(),
                80,
                "⠋ kube-apiserver: wait-for-rollout · waiting for cp-1 Ready; cp-2 Ready (3.2s)",
            ),
            (
                rollout(),
                76,
                "⠋ kube-apiserver: wait-for-rollout · waiting for cp-1 Ready (+1 more) (3.2s)",
            ),
            (
                rollout(),
                66,
                "⠋ kube-apiserver: wait-for-rollout · waiting for 2 thing(s) (3.2s)",
            ),
            (rollout(), 45, "⠋ kube-apiserver: wait-for-rollout (3.2s)"),
            (
                status(
                    "kube-apiserver: wait-for-rollout",
                    &[
                        "cp-2: pod self-hosted-kube-apiserver-97s6h runs the previous template",
                        "cp-3: pod self-hosted-kube-apiserver-6tgzd runs the previous template",
                    ],
                ),
                100,
                "⠋ kube-apiserver: wait-for-rollout · waiting for cp-2: pod self-hosted-kube-apiser… (+1 more) (3.2s)",
            ),
            (rollout(), 20, "⠋ kube-apise… (3.2s)"),
            (status("prepull", &[]), 80, "⠋ prepull (3.2s)"),
        ];
        for (status, width, expected) in cases {
            let line = live_line(0, &status, Duration::from_millis(3210), width, false);
            assert_eq!(line, expected, "width {width}");
            assert!(line.chars().count() <= width, "{line:?} wider than {width}");
        }
    }

    #[test]
    fn the_spinner_turns_with_the_frame() {
        let s = status("x", &[]);
        let frames: Vec<char> = (0..FRAMES.len() + 1)
            .map(|f| {
                live_line(f, &s, Duration::ZERO, 80, false)
                    .chars()
                    .next()
                    .unwrap_or(' ')
            })
            .collect();
        assert_eq!(frames[0], frames[FRAMES.len()]);
        assert_ne!(frames[0], frames[1]);
    }

    #[test]
    fn colour_only_when_asked() {
        let s = status("kube-scheduler: create-backup", &["cp-1"]);
        let plain = live_line(3, &s, Duration::from_secs(1), 80, false);
        let coloured = live_line(3, &s, Duration::from_secs(1), 80, true);
        assert!(!plain.contains('\x1b'), "{plain:?}");
        assert!(coloured.contains("\x1b[36m"), "{coloured:?}");
        let strip = |s: &str| {
            let mut out = String::new();
            let mut escape = false;
            for c in s.chars() {
                match (escape, c) {
                    (false, '\x1b') => escape = true,
                    (true, 'm') => escape = false,
                    (true, _) => {}
                    (false, c) => out.push(c),
                }
            }
            out
        };
        assert_eq!(strip(&coloured), plain, "the same text, only coloured");

        let finished = Event::ComponentFinished {
            component: selfhost::Component::ApiServer,
            outcome: "rolled-back".into(),
            message: "m".into(),
            elapsed_seconds: 1.0,
        };
        assert_eq!(
            permanent_line(Some(&finished), "t", true),
            "\x1b[31mt\x1b[0m"
        );
        assert_eq!(permanent_line(Some(&finished), "t", false), "t");
        assert_eq!(permanent_line(None, "t", true), "t");
    }
}
