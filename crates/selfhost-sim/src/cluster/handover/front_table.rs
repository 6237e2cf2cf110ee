//! The node-local API fronts of every node, as their kubelets publish them: each front's state
//! lives from the moment its socket exists until its process is gone (and a little after, so
//! that its counts can still be read).

use std::sync::Arc;

use super::front::{ApiFrontState, Front, FrontTiming};
use super::frontend::{ApiFrontEnd, FrontEntry, State};
use super::sockets::FrontProcess;

/// How many exited fronts [`ApiFrontEnd::fronts`] still shows (their counts), per cluster.
const GONE_FRONTS: usize = 16;

impl ApiFrontEnd {
    /// A node's fronts as its kubelet sees them now: new ones start checking, stopped ones
    /// stop accepting and drain, gone ones cut their connections; whether anything changed.
    pub(super) fn reconcile_fronts(
        &self,
        node: &str,
        state: &mut State,
        views: Vec<FrontProcess>,
    ) -> bool {
        let mut changed = false;
        let State {
            fronts,
            gone_fronts,
            ..
        } = state;
        let table = fronts.entry(node.to_string()).or_default();
        table.retain(|id, entry| {
            let alive = views.iter().any(|v| v.id == *id);
            if !alive {
                entry.front.exit();
                gone_fronts.push_back(entry.front.clone());
                changed = true;
            }
            alive
        });
        while gone_fronts.len() > GONE_FRONTS {
            gone_fronts.pop_front();
        }
        for view in views {
            match table.get_mut(&view.id) {
                Some(entry) if !entry.view.differs_from(&view) => {}
                Some(entry) => {
                    entry.front.observe(&view);
                    entry.view = view;
                    changed = true;
                }
                None => {
                    let timing = FrontTiming::of(&view, self.timings().spec_seconds_divisor);
                    let kubelet = self.kubelet_of(node);
                    let front = Arc::new(Front::new(node, &view, timing, kubelet));
                    front.observe(&view);
                    table.insert(view.id, FrontEntry { view, front });
                    changed = true;
                }
            }
        }
        changed
    }

    /// Every node-local API front with a socket, by node and process, then those whose process
    /// is gone (the latest few): where each listens, its backends' health and what it did with
    /// its connections.
    pub fn fronts(&self) -> Vec<ApiFrontState> {
        let state = self.lock();
        state
            .fronts
            .values()
            .flat_map(|t| t.values().map(|e| e.front.clone()))
            .chain(state.gone_fronts.iter().cloned())
            .map(|f| f.state())
            .collect()
    }
}
