//! The node's table of who holds which host port, on which address, as Linux decides it:
//!
//! - **Binding.** Two sockets of a port conflict when their addresses overlap (the same
//!   address, or either is the wildcard); a second process may then bind only if it and every
//!   overlapping holder set SO_REUSEPORT (`--permit-port-sharing=true`), else it fails with
//!   `bind: address already in use`. Sockets on two distinct specific addresses never
//!   conflict.
//! - **Reaching.** A connection to an address goes to the sockets bound to that very address
//!   when there are any (a specific address beats the wildcard), else to the wildcard's; with
//!   neither it is refused. Sockets of one group share its connections (the kernel picks).
//!
//! A process keeps its ports until it exits (or closes its listener), even while its pod is
//! Terminating.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::ports::{HostPort, PortClaim, listen_text};
use super::process::ProcessId;

/// A failed bind, worded as Go's net package reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "listen {} {}: bind: address already in use",
    port.protocol.as_str(),
    listen_text(*address, port.port)
)]
pub struct AddressInUse {
    /// The contested port.
    pub port: HostPort,
    /// The address the refused process asked for (`None`: the wildcard).
    pub address: Option<IpAddr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Holder {
    process: ProcessId,
    address: Option<IpAddr>,
    permits_sharing: bool,
}

impl Holder {
    /// Whether a socket on `address` would take some of this one's connections.
    fn overlaps(&self, address: Option<IpAddr>) -> bool {
        self.address.is_none() || address.is_none() || self.address == address
    }
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
    /// The first port held on an overlapping address by a process when either side does not
    /// permit sharing (or by the process itself).
    pub fn bind(&mut self, process: ProcessId, claim: &PortClaim) -> Result<(), AddressInUse> {
        for port in &claim.ports {
            let holders = self
                .holders
                .get(port)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let conflict = holders.iter().any(|h| {
                h.overlaps(claim.address)
                    && !(claim.permit_sharing && h.permits_sharing && h.process != process)
            });
            if conflict {
                return Err(AddressInUse {
                    port: *port,
                    address: claim.address,
                });
            }
        }
        for port in &claim.ports {
            self.holders.entry(*port).or_default().push(Holder {
                process,
                address: claim.address,
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

    /// The processes holding a port on any address, in bind order.
    pub fn holders(&self, port: HostPort) -> Vec<ProcessId> {
        self.holders
            .get(&port)
            .map(|h| h.iter().map(|h| h.process).collect())
            .unwrap_or_default()
    }

    /// The processes a connection to `to`:`port` reaches, in bind order (the kernel spreads
    /// new connections over them when there are several): those bound to `to` itself if any,
    /// else those bound to the wildcard; empty when it is refused. `None` stands for an
    /// address no process binds specifically.
    pub fn reached(&self, port: HostPort, to: Option<IpAddr>) -> Vec<ProcessId> {
        let holders = self
            .holders
            .get(&port)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let on = |address: Option<IpAddr>| -> Vec<ProcessId> {
            holders
                .iter()
                .filter(|h| h.address == address)
                .map(|h| h.process)
                .collect()
        };
        match to.map(|ip| on(Some(ip))) {
            Some(specific) if !specific.is_empty() => specific,
            _ => on(None),
        }
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
            address: None,
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

    fn on(address: Option<&str>, sharing: bool) -> PortClaim {
        PortClaim {
            ports: vec![HostPort::tcp(6443)],
            permit_sharing: sharing,
            address: address.map(|a| a.parse().unwrap()),
        }
    }

    #[test]
    fn distinct_specific_addresses_never_conflict_and_overlaps_need_sharing_on_both_sides() {
        let (node, one, two) = (Some("10.0.0.11"), Some("127.0.0.1"), Some("127.0.0.2"));
        // (first, second, whether the second binds)
        let cases = [
            (on(one, false), on(two, false), true),
            (on(one, false), on(one, false), false),
            (on(one, true), on(one, true), true),
            (on(None, false), on(node, true), false),
            (on(None, true), on(node, false), false),
            (on(None, true), on(node, true), true),
            (on(node, true), on(None, false), false),
            (on(node, true), on(None, true), true),
        ];
        for (first, second, binds) in cases {
            let mut table = PortTable::default();
            table.bind(ProcessId(1), &first).unwrap();
            let result = table.bind(ProcessId(2), &second);
            assert_eq!(result.is_ok(), binds, "{first:?} then {second:?}");
            if let Err(e) = result {
                let wanted = second.address.map_or("0.0.0.0".into(), |a| a.to_string());
                assert_eq!(
                    e.to_string(),
                    format!("listen tcp {wanted}:6443: bind: address already in use")
                );
            }
        }
    }

    #[test]
    fn a_connection_reaches_its_address_else_the_wildcard_else_nothing() {
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        let port = HostPort::tcp(6443);
        let mut table = PortTable::default();
        assert!(table.reached(port, ip("10.0.0.11")).is_empty(), "refused");
        table.bind(ProcessId(1), &on(None, true)).unwrap();
        table.bind(ProcessId(2), &on(None, true)).unwrap();
        table
            .bind(ProcessId(3), &on(Some("127.0.0.1"), true))
            .unwrap();
        table
            .bind(ProcessId(4), &on(Some("10.0.0.11"), true))
            .unwrap();
        assert_eq!(table.reached(port, ip("10.0.0.11")), [ProcessId(4)]);
        assert_eq!(table.reached(port, ip("127.0.0.1")), [ProcessId(3)]);
        assert_eq!(
            table.reached(port, ip("127.0.0.2")),
            [ProcessId(1), ProcessId(2)],
            "no specific socket there: the wildcard's, in bind order"
        );
        assert_eq!(table.reached(port, None), [ProcessId(1), ProcessId(2)]);
        table.release(ProcessId(1));
        table.release(ProcessId(2));
        assert!(
            table.reached(port, ip("127.0.0.2")).is_empty(),
            "only other addresses are bound: refused"
        );
        assert_eq!(table.holders(port), [ProcessId(3), ProcessId(4)]);
    }
}
