//! Pseudo-random ids that follow from a seed, so that runs are reproducible.

/// A stable pseudo-random 32-hex-digit id derived from a seed (container and process ids,
/// identities), so runs are reproducible.
pub fn stable_hex(seed: &str, digits: usize) -> String {
    let mut out = String::with_capacity(digits + 16);
    let mut state: u64 = 0xcbf2_9ce4_8422_2325;
    let mut round: u8 = 0;
    while out.len() < digits {
        for byte in seed.bytes().chain([round]) {
            state ^= u64::from(byte);
            state = state.wrapping_mul(0x0100_0000_01b3);
        }
        out.push_str(&format!("{state:016x}"));
        round = round.wrapping_add(1);
    }
    out.truncate(digits);
    out
}

/// A UUID-shaped identity suffix from a seed.
pub fn stable_uuid(seed: &str) -> String {
    let h = stable_hex(seed, 32);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_distinct() {
        assert_eq!(stable_hex("a", 64), stable_hex("a", 64));
        assert_ne!(stable_hex("a", 64), stable_hex("b", 64));
        assert_eq!(stable_hex("a", 64).len(), 64);
        let uuid = stable_uuid("cp-1/1");
        assert_eq!(uuid.len(), 36);
        assert_eq!(uuid.matches('-').count(), 4);
    }
}
