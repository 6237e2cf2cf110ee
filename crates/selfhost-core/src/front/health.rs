//! One backend's health from its checks: healthy after `rise` passes in a row, unhealthy at
//! the first failure.

/// The result of one health check of a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// `/readyz` answered 200.
    Pass,
    /// Anything else: another status, a TLS or connection error, no answer in time.
    Fail(String),
}

/// How many passes make a backend healthy; one failure always makes it unhealthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthPolicy {
    /// Consecutive passes before a backend takes connections (at least 1; 0 counts as 1).
    pub rise: u32,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy { rise: 1 }
    }
}

/// A change of a backend's health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// It passed enough checks in a row to take new connections.
    Healthy,
    /// It failed a check (or its first check): no new connections until it rises again.
    Unhealthy {
        /// What the failing check said.
        reason: String,
    },
}

/// What is known of one backend's health.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackendHealth {
    /// Whether it takes new connections.
    healthy: bool,
    /// Whether any check has been recorded (before, it is unhealthy but not announced so).
    checked: bool,
    /// Passes in a row since the last failure.
    passes: u32,
}

impl BackendHealth {
    /// A backend never checked: not healthy.
    pub fn new() -> BackendHealth {
        BackendHealth::default()
    }

    /// Whether it takes new connections.
    pub fn is_healthy(&self) -> bool {
        self.healthy
    }

    /// Records a check and returns the change of state it made, if any. The first failure of
    /// a backend never checked is a change too (from unknown to unhealthy), so it is said.
    pub fn record(&mut self, check: &Check, policy: HealthPolicy) -> Option<Transition> {
        let first = !self.checked;
        self.checked = true;
        match check {
            Check::Pass => {
                self.passes = self.passes.saturating_add(1);
                if !self.healthy && self.passes >= policy.rise.max(1) {
                    self.healthy = true;
                    return Some(Transition::Healthy);
                }
                None
            }
            Check::Fail(reason) => {
                self.passes = 0;
                if self.healthy || first {
                    self.healthy = false;
                    return Some(Transition::Unhealthy {
                        reason: reason.clone(),
                    });
                }
                None
            }
        }
    }
}
