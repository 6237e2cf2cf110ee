//! API server identity Leases, as kube-apiserver publishes them from v1.26 (the
//! `APIServerIdentity` feature, beta and on by default since then).
//!
//! Each kube-apiserver process, once it serves, keeps a Lease in `kube-system` named after
//! its host (the machine's hostname, [`crate::controllers::kubelet::KubeletConfig::hostname`],
//! which need not be the node's name) — `apiserver-<hash>`, the hash being the first 16 bytes of the SHA-256 of the
//! length-prefixed hostname and `kube-apiserver`, in lower-case unpadded base32 — labelled
//! `apiserver.kubernetes.io/identity=kube-apiserver` and `kubernetes.io/hostname=<host>`,
//! with the holder identity `<lease name>_<uuid>` unique per process and
//! `leaseDurationSeconds` 3600, renewed every 10 s. A new process on the same host takes the
//! same Lease over with its own holder identity (and two processes on one host overwrite each
//! other's holder on every renewal). Every apiserver also collects the identity Leases that
//! expired (not renewed for their duration), once an hour.
//!
//! Here a process publishes while the model's serving policy counts it among the serving
//! apiservers: its Lease controller runs from the post-start hooks (once it serves) until the
//! server stops accepting new requests (after `--shutdown-delay-duration`, when it leaves the
//! port). The collection runs while any apiserver with identity serves.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::api::{CallError, ClusterApi, typed};
use super::leader_election::whole_seconds;
use super::leader_gated_loop::sleep_until;
use super::model::image_version;
use super::process_table::{ModelDecisions, ProcessTable};
use crate::controllers::clock;
use crate::resources::LEASES;
use crate::store::{DeleteOptions, Subresource, meta};

/// The namespace of identity Leases.
pub const IDENTITY_LEASE_NAMESPACE: &str = "kube-system";
/// The label that marks an identity Lease.
pub const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
/// Its value for kube-apiserver.
pub const IDENTITY_LABEL_VALUE: &str = "kube-apiserver";
/// The label naming the apiserver's host.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The field manager of the apiserver's own writes.
const MANAGER: &str = "kube-apiserver";

/// The identity Lease name kube-apiserver uses on `hostname`.
pub fn identity_lease_name(hostname: &str) -> String {
    let mut data = Vec::with_capacity(hostname.len() + IDENTITY_LABEL_VALUE.len() + 4);
    for part in [hostname, IDENTITY_LABEL_VALUE] {
        // Length-prefixed like cryptobyte's AddUint16LengthPrefixed (big-endian).
        let len = u16::try_from(part.len()).unwrap_or(u16::MAX);
        data.extend_from_slice(&len.to_be_bytes());
        data.extend_from_slice(part.as_bytes());
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, &data);
    let prefix = digest.as_ref().get(..16).unwrap_or_default();
    format!("apiserver-{}", base32_lower(prefix))
}

/// RFC 4648 base32 without padding, lower case.
fn base32_lower(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::with_capacity(bytes.len() * 8 / 5 + 1);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for byte in bytes {
        buffer = (buffer << 8) | u32::from(*byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((buffer >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((buffer << (5 - bits)) & 31) as usize]));
    }
    out
}

/// Which kube-apiserver processes publish identity Leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiserverIdentity {
    /// Those whose image is v1.26 or newer (the feature's default since then).
    #[default]
    ByVersion,
    /// Every one (the feature gate on in an older version).
    Always,
    /// None (the `APIServerIdentity` feature gate off).
    Never,
}

impl ApiserverIdentity {
    /// Whether a process running `image` publishes its identity.
    pub fn publishes(self, image: Option<&str>) -> bool {
        match self {
            ApiserverIdentity::Never => false,
            ApiserverIdentity::Always => true,
            ApiserverIdentity::ByVersion => image
                .and_then(image_version)
                .is_some_and(|(major, minor, _)| (major, minor) >= (1, 26)),
        }
    }
}

/// The identity Lease clock (kube-apiserver's constants).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdentityLeaseTimings {
    /// How often a process renews its Lease (10 s).
    pub renew_interval: Duration,
    /// The Lease's duration: expired after that long without renewal (3600 s).
    pub lease_duration: Duration,
    /// How often expired identity Leases are collected (3600 s).
    pub gc_period: Duration,
}

impl IdentityLeaseTimings {
    /// kube-apiserver's values.
    pub fn realistic() -> Self {
        IdentityLeaseTimings {
            renew_interval: Duration::from_secs(10),
            lease_duration: Duration::from_secs(3_600),
            gc_period: Duration::from_secs(3_600),
        }
    }

    /// Every duration divided by `factor` (at least 1).
    pub fn scaled(self, factor: u32) -> Self {
        let factor = factor.max(1);
        IdentityLeaseTimings {
            renew_interval: self.renew_interval / factor,
            lease_duration: self.lease_duration / factor,
            gc_period: self.gc_period / factor,
        }
    }
}

impl Default for IdentityLeaseTimings {
    fn default() -> Self {
        Self::realistic()
    }
}

/// One serving process's Lease controller.
struct Publisher {
    /// The hostname the process sees: its machine's, the host part of its process identity.
    host: String,
    lease: String,
    holder: String,
    next_at: Instant,
}

/// The identity Lease task.
pub(crate) struct IdentityLeases {
    pub api: ClusterApi,
    pub process_table: Arc<ProcessTable>,
    pub decisions: ModelDecisions,
    pub timings: IdentityLeaseTimings,
    pub policy: ApiserverIdentity,
}

impl IdentityLeases {
    /// Runs until shutdown.
    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        if self.policy == ApiserverIdentity::Never {
            return;
        }
        let mut changes = self.process_table.subscribe();
        let mut publishers: BTreeMap<String, Publisher> = BTreeMap::new();
        let mut gc_at: Option<Instant> = None;
        loop {
            changes.borrow_and_update();
            self.sync(&mut publishers, Instant::now());
            let now = Instant::now();
            for p in publishers.values_mut().filter(|p| p.next_at <= now) {
                if let Err(e) = self.renew(p) {
                    tracing::debug!(lease = p.lease, error = %e, "identity Lease not renewed");
                }
                p.next_at = next_renewal(p.next_at, now, self.timings.renew_interval);
            }
            gc_at = match gc_at {
                _ if publishers.is_empty() => None,
                Some(at) if at > now => Some(at),
                _ => {
                    if let Err(e) = self.collect_expired() {
                        tracing::debug!(error = %e, "identity Leases not collected");
                    }
                    Some(now + self.timings.gc_period)
                }
            };
            let renew_at = publishers.values().map(|p| p.next_at).min();
            let wake_at = match (renew_at, gc_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                r = self.decisions.api.changed() => if r.is_err() { return },
                r = changes.changed() => if r.is_err() { return },
                _ = sleep_until(wake_at) => {}
            }
        }
    }

    /// Starts a publisher for every process that serves now, stops the others.
    fn sync(&mut self, publishers: &mut BTreeMap<String, Publisher>, now: Instant) {
        let decision = self.decisions.api.borrow_and_update().clone();
        let snapshot = self.process_table.snapshot();
        let mut serving = BTreeMap::new();
        for backend in &decision.serving.backends {
            if backend.process.is_none() || !self.policy.publishes(backend.image.as_deref()) {
                continue;
            }
            let view = snapshot.nodes.get(&backend.node).and_then(|n| {
                n.containers
                    .iter()
                    .find(|c| c.process == backend.process && c.pod.uid == backend.pod.uid)
            });
            let Some(view) = view else {
                continue;
            };
            let Some(identity) = view.identity.clone() else {
                continue;
            };
            // `<hostname>_<uuid>`: the process names its Lease after the machine's hostname,
            // which need not be the node's name.
            let (host, uuid) = identity
                .rsplit_once('_')
                .unwrap_or((backend.node.as_str(), identity.as_str()));
            let host = host.to_string();
            let lease = identity_lease_name(&host);
            let holder = format!("{lease}_{uuid}");
            serving.insert(
                identity.clone(),
                Publisher {
                    host,
                    lease,
                    holder,
                    next_at: now,
                },
            );
        }
        publishers.retain(|identity, _| serving.contains_key(identity));
        for (identity, publisher) in serving {
            publishers.entry(identity).or_insert(publisher);
        }
    }

    /// The Lease controller's sync: create the Lease, or take it over and renew it.
    fn renew(&self, p: &Publisher) -> Result<(), CallError> {
        let now = Timestamp::now();
        let seconds = whole_seconds(self.timings.lease_duration);
        let ns = IDENTITY_LEASE_NAMESPACE;
        let renewed = self
            .api
            .modify(&LEASES, ns, &p.lease, Subresource::Main, MANAGER, |cur| {
                let mut new = cur.clone();
                new["spec"]["holderIdentity"] = json!(p.holder);
                new["spec"]["leaseDurationSeconds"] = json!(seconds);
                new["spec"]["renewTime"] = json!(MicroTime(now));
                let labels = &mut new["metadata"]["labels"];
                if !labels.is_object() {
                    *labels = json!({});
                }
                labels[IDENTITY_LABEL] = json!(IDENTITY_LABEL_VALUE);
                labels[HOSTNAME_LABEL] = json!(p.host);
                Ok(new)
            });
        match renewed {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => {
                let labels = [
                    (IDENTITY_LABEL.to_string(), IDENTITY_LABEL_VALUE.to_string()),
                    (HOSTNAME_LABEL.to_string(), p.host.clone()),
                ];
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(p.lease.clone()),
                        namespace: Some(ns.to_string()),
                        labels: Some(labels.into_iter().collect()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(p.holder.clone()),
                        lease_duration_seconds: Some(seconds),
                        renew_time: Some(MicroTime(now)),
                        ..LeaseSpec::default()
                    }),
                };
                let body = serde_json::to_value(&lease).unwrap_or(Value::Null);
                self.api.create(&LEASES, ns, body, MANAGER).map(|_| ())
            }
            Err(e) => Err(e),
        }
    }

    /// Deletes the identity Leases whose holder stopped renewing for a whole duration.
    fn collect_expired(&self) -> Result<(), CallError> {
        let now = Timestamp::now();
        let leases = self.api.list(&LEASES, Some(IDENTITY_LEASE_NAMESPACE))?;
        for obj in &leases.items {
            let Some(lease) = typed::<Lease>(obj) else {
                continue;
            };
            let labels = lease.metadata.labels.clone().unwrap_or_default();
            if labels.get(IDENTITY_LABEL).map(String::as_str) != Some(IDENTITY_LABEL_VALUE) {
                continue;
            }
            if !is_expired(&lease, now) {
                continue;
            }
            let options = DeleteOptions {
                precondition_resource_version: meta::resource_version(obj).map(str::to_string),
                ..DeleteOptions::default()
            };
            match self
                .api
                .delete(&LEASES, IDENTITY_LEASE_NAMESPACE, meta::name(obj), &options)
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() || e.is_conflict() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// An identity Lease without a renewal time or duration, or not renewed for its duration.
/// When a process renews next, after the renewal due at `due` was made at `now`: on its own
/// clock, as each real process does. A late wake-up of the shared loop must not bring two
/// processes of one host into phase, or the one renewing second would hold the shared Lease at
/// every moment a client looks, and the other would never be seen serving.
fn next_renewal(due: Instant, now: Instant, interval: Duration) -> Instant {
    let interval = interval.max(Duration::from_millis(1));
    let mut next = due + interval;
    while next <= now {
        next += interval;
    }
    next
}

fn is_expired(lease: &Lease, now: Timestamp) -> bool {
    let spec = lease.spec.clone().unwrap_or_default();
    let (Some(renewed), Some(seconds)) = (spec.renew_time, spec.lease_duration_seconds) else {
        return true;
    };
    let duration = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
    clock::after(renewed.0, duration) < now
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_processes_keep_their_own_renewal_phases_after_a_late_wake_up() {
        let t0 = Instant::now();
        let interval = Duration::from_millis(100);
        let (old, new) = (
            t0 + Duration::from_millis(100),
            t0 + Duration::from_millis(130),
        );
        // The loop wakes 250 ms late, with both renewals overdue.
        let late = t0 + Duration::from_millis(380);
        let (old, new) = (
            next_renewal(old, late, interval),
            next_renewal(new, late, interval),
        );
        assert_eq!(old, t0 + Duration::from_millis(400));
        assert_eq!(new, t0 + Duration::from_millis(430), "still 30 ms apart");
    }

    #[test]
    fn lease_names_hash_the_hostname_like_kube_apiserver() {
        let name = identity_lease_name("cp-1");
        let hash = name.strip_prefix("apiserver-").unwrap();
        assert_eq!(hash.len(), 26, "16 bytes in unpadded base32");
        assert!(
            hash.chars()
                .all(|c| c.is_ascii_lowercase() || ('2'..='7').contains(&c))
        );
        assert_eq!(name, identity_lease_name("cp-1"), "stable per host");
        assert_ne!(name, identity_lease_name("cp-2"));
    }

    #[test]
    fn base32_matches_rfc_4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "my"),
            ("fo", "mzxq"),
            ("foo", "mzxw6"),
            ("foob", "mzxw6yq"),
            ("fooba", "mzxw6ytb"),
            ("foobar", "mzxw6ytboi"),
        ];
        for (input, encoded) in cases {
            assert_eq!(base32_lower(input.as_bytes()), encoded, "{input:?}");
        }
    }

    #[test]
    fn identity_is_published_from_v1_26_unless_switched() {
        let image = |tag: &str| format!("registry.k8s.io/kube-apiserver:{tag}");
        let cases = [
            (ApiserverIdentity::ByVersion, image("v1.25.16"), false),
            (ApiserverIdentity::ByVersion, image("v1.26.0"), true),
            (ApiserverIdentity::ByVersion, image("v1.33.2"), true),
            (ApiserverIdentity::Always, image("v1.20.15"), true),
            (ApiserverIdentity::Never, image("v1.33.2"), false),
        ];
        for (policy, image, publishes) in cases {
            assert_eq!(
                policy.publishes(Some(&image)),
                publishes,
                "{policy:?} {image}"
            );
        }
        assert!(!ApiserverIdentity::ByVersion.publishes(Some("example.com/apiserver:latest")));
    }

    #[test]
    fn leases_expire_after_their_duration_from_the_last_renewal() {
        let renewed = Timestamp::UNIX_EPOCH;
        let lease = |seconds: Option<i32>| Lease {
            spec: Some(LeaseSpec {
                renew_time: Some(MicroTime(renewed)),
                lease_duration_seconds: seconds,
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        };
        let at = |s: u64| clock::after(renewed, Duration::from_secs(s));
        assert!(!is_expired(&lease(Some(3_600)), at(3_600)));
        assert!(is_expired(&lease(Some(3_600)), at(3_601)));
        assert!(is_expired(&lease(None), at(0)), "no duration: invalid");
    }
}
