//! From pod changes, in the order they were seen, to lanes of pod bars.

use std::collections::BTreeMap;

use super::model::{Lane, PodBar, PodChange, PodState, Segment, TemplateKind};
use crate::Component;

/// A pod being followed: where it runs and its states so far (the last one still open).
#[derive(Debug)]
struct Followed {
    node: String,
    component: Component,
    kind: TemplateKind,
    /// Closed segments.
    segments: Vec<Segment>,
    /// The current state and since when; `None` once the pod is gone.
    open: Option<(f64, PodState)>,
}

/// Builds the lanes of the timeline from pod changes.
///
/// Changes must come in time order; a change that repeats the pod's current state is
/// ignored, a pod's node may become known after it first appears (binding), and a pod that
/// is seen again after it was gone starts a new stretch on the same bar.
#[derive(Debug, Default)]
pub struct TimelineBuilder {
    /// Pods by name, in the order they first appeared.
    pods: Vec<(String, Followed)>,
    index: BTreeMap<String, usize>,
}

impl TimelineBuilder {
    /// An empty timeline.
    pub fn new() -> TimelineBuilder {
        TimelineBuilder::default()
    }

    /// Takes one change into account.
    pub fn observe(&mut self, change: PodChange) {
        let slot = match self.index.get(&change.pod) {
            Some(&i) => i,
            None => {
                if change.state.is_none() {
                    // A pod that is gone before it was ever seen leaves nothing to draw.
                    return;
                }
                self.pods.push((
                    change.pod.clone(),
                    Followed {
                        node: change.node.clone(),
                        component: change.component,
                        kind: change.kind,
                        segments: Vec::new(),
                        open: None,
                    },
                ));
                self.index.insert(change.pod.clone(), self.pods.len() - 1);
                self.pods.len() - 1
            }
        };
        let followed = &mut self.pods[slot].1;
        if !change.node.is_empty() {
            followed.node = change.node;
        }
        if followed.open.as_ref().map(|(_, s)| s) == change.state.as_ref() {
            return;
        }
        if let Some((from, state)) = followed.open.take() {
            followed.segments.push(Segment {
                from,
                to: change.at.max(from),
                state,
            });
        }
        followed.open = change.state.map(|s| (change.at, s));
    }

    /// The lanes, with every pod still present drawn up to `end`. Lanes come in the upgrade's
    /// component order, then by node name; inside a lane, pods that overlap in time are put
    /// on different tracks.
    pub fn finish(self, end: f64) -> Vec<Lane> {
        let mut lanes: BTreeMap<(Component, String), Lane> = BTreeMap::new();
        for (pod, mut followed) in self.pods {
            if let Some((from, state)) = followed.open.take() {
                followed.segments.push(Segment {
                    from,
                    to: end.max(from),
                    state,
                });
            }
            if followed.segments.is_empty() {
                continue;
            }
            let lane = lanes
                .entry((followed.component, followed.node.clone()))
                .or_insert_with(|| Lane {
                    node: followed.node.clone(),
                    component: followed.component,
                    tracks: 0,
                    pods: Vec::new(),
                });
            let start = followed.segments[0].from;
            // The first track whose last pod ended before this one started.
            let track = (0..lane.tracks)
                .find(|t| {
                    lane.pods
                        .iter()
                        .filter(|p| p.track == *t)
                        .all(|p| p.segments.last().is_none_or(|s| s.to <= start))
                })
                .unwrap_or(lane.tracks);
            lane.tracks = lane.tracks.max(track + 1);
            lane.pods.push(PodBar {
                pod,
                kind: followed.kind,
                track,
                segments: followed.segments,
            });
        }
        lanes.into_values().collect()
    }
}
