//! The node's table of who holds which host port. A second process may bind a held port only
//! if it and every holder run with `--permit-port-sharing=true` (SO_REUSEPORT); otherwise it
//! fails with `bind: address already in use`. A process keeps its ports until it exits, even
//! while its pod is Terminating.

use std::collections::BTreeMap;

use super::ports::{HostPort, PortClaim};
use super::process::ProcessId;

/// A failed bind, worded as Go's net package reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("listen {port}: bind: address already in use")]
pub struct AddressInUse {
    /// The contested port.
    pub port: HostPort,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Holder {
    process: ProcessId,
    permits_sharing: bool,
}

/// Who holds which port on one node.
#[derive(Debug, Clone, Default)]
pub struct PortTable {
    holders: BTreeMap<HostPort, Vec<Holder>>,
}

impl PortTable {
    /// Binds every port of the claim for `process`, or none of them.
    ///
    /// # Errors
    /// The first port held by a process when either side does not permit sharing.
    pub fn bind(&mut self, process: ProcessId, claim: &PortClaim) -> Result<(), AddressInUse> {
        for port in &claim.ports {
            let holders = self
                .holders
                .get(port)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let shareable = holders
                .iter()
                .all(|h| h.permits_sharing && h.process != process);
            if !(holders.is_empty() || (claim.permit_sharing && shareable)) {
                return Err(AddressInUse { port: *port });
            }
        }
        for port in &claim.ports {
            self.holders.entry(*port).or_default().push(Holder {
                process,
                permits_sharing: claim.permit_sharing,
            });
        }
        Ok(())
    }

    /// Releases every port the process holds (it exited).
    pub fn release(&mut self, process: ProcessId) {
        self.holders.retain(|_, holders| {
            holders.retain(|h| h.process != process);
            !holders.is_empty()
        });
    }

    /// The processes holding a port, in bind order (the kernel spreads new connections over
    /// them when they share it).
    pub fn holders(&self, port: HostPort) -> Vec<ProcessId> {
        self.holders
            .get(&port)
            .map(|h| h.iter().map(|h| h.process).collect())
            .unwrap_or_default()
    }

    /// Every held port.
    pub fn ports(&self) -> impl Iterator<Item = HostPort> + '_ {
        self.holders.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharing_needs_every_holder_to_permit_it() {
        let claim = |sharing| PortClaim {
            ports: vec![HostPort::tcp(6443)],
            permit_sharing: sharing,
        };
        let cases = [
            (false, false, false),
            (true, false, false),
            (false, true, false),
            (true, true, true),
        ];
        for (first, second, shared) in cases {
            let mut table = PortTable::default();
            table.bind(ProcessId(1), &claim(first)).unwrap();
            let result = table.bind(ProcessId(2), &claim(second));
            assert_eq!(result.is_ok(), shared, "first={first} second={second}");
            if let Err(e) = result {
                assert_eq!(
                    e.to_string(),
                    "listen tcp 0.0.0.0:6443: bind: address already in use"
                );
            }
        }
        let mut table = PortTable::default();
        table.bind(ProcessId(1), &claim(false)).unwrap();
        table.release(ProcessId(1));
        assert!(
            table.bind(ProcessId(2), &claim(false)).is_ok(),
            "free again after exit"
        );
        assert_eq!(table.holders(HostPort::tcp(6443)), [ProcessId(2)]);
    }
}
