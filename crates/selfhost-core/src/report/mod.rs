//! The upgrade report: what happened during a run, as data a person can look at.
//!
//! The engine records pod changes, API availability and its own steps while it works; this
//! module turns them into a timeline (one lane per node and component, each pod a bar coloured
//! by the template it runs) and renders that as one self-contained HTML page with inline SVG:
//! no script, no stylesheet or font fetched from anywhere, every string escaped.
//!
//! Times are seconds since the recording started.

mod classify;
mod html;
mod model;
mod steps;
mod timeline;

#[cfg(test)]
mod tests;

pub use classify::{PodOwner, REVISION_HASH_LABEL};
pub use html::{escape, render_html};
pub use model::{
    Availability, AvailabilitySource, ClientConnections, Lane, Marker, PodBar, PodChange, PodState,
    ProbeFailure, ProbeKind, Segment, Table, TemplateKind, UpgradeReport,
};
pub use steps::{StepTiming, step_timings};
pub use timeline::TimelineBuilder;
