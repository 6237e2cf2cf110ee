//! How long each of the engine's steps took, from the markers.

use super::model::Marker;
use crate::Component;

/// The time spent in one step of one component.
#[derive(Debug, Clone, PartialEq)]
pub struct StepTiming {
    /// The component.
    pub component: Component,
    /// The step's name.
    pub step: String,
    /// Seconds spent in it (all its stretches together, if it came back).
    pub seconds: f64,
}

/// Per component, in order of first appearance, the time spent in each step: a step lasts
/// until the component's next marker, or until `end` if none followed (a run cut short).
/// Markers must be in time order; finish markers end the step before them and take no time.
pub fn step_timings(markers: &[Marker], end: f64) -> Vec<StepTiming> {
    let mut out: Vec<StepTiming> = Vec::new();
    for (i, marker) in markers.iter().enumerate() {
        if marker.finish {
            continue;
        }
        let until = markers[i + 1..]
            .iter()
            .find(|m| m.component == marker.component)
            .map_or(end, |m| m.at);
        let seconds = (until - marker.at).max(0.0);
        match out
            .iter_mut()
            .find(|t| t.component == marker.component && t.step == marker.step)
        {
            Some(timing) => timing.seconds += seconds,
            None => out.push(StepTiming {
                component: marker.component,
                step: marker.step.clone(),
                seconds,
            }),
        }
    }
    out
}
