//! W3C Trace Context (level 1): the `traceparent` and `tracestate` headers a
//! producer sends on prepare, which trustmsg stores with the message and
//! propagates on the check-back call and as headers of the Kafka record.
//!
//! Parsing follows the specification's rules exactly: version `00` is
//! `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, lower-case only,
//! neither id all zeros; a higher version (not `ff`) is parsed the same way
//! for its first 55 characters, may carry more after a `-`, and is
//! re-emitted as version `00` (the only one this code knows) with the
//! sampled flag alone. Anything else is invalid and ignored by trustmsg.
//! An invalid `tracestate` is dropped (the `traceparent` is kept).

/// The `traceparent` header (HTTP request and Kafka record).
pub const TRACEPARENT: &str = "traceparent";
/// The `tracestate` header (HTTP request and Kafka record).
pub const TRACESTATE: &str = "tracestate";
/// The length of a version-00 `traceparent`, which is what trustmsg stores.
pub const TRACEPARENT_LEN: usize = 55;
/// The longest `tracestate` trustmsg keeps (the specification's limit for
/// propagation); a longer one is dropped.
pub const TRACESTATE_MAX_LEN: usize = 512;
/// The most list members a `tracestate` may have.
pub const TRACESTATE_MAX_MEMBERS: usize = 32;

/// A valid `traceparent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// The trace id.
    pub trace_id: [u8; 16],
    /// The caller's span id (`parent-id`).
    pub parent_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    /// Parses a `traceparent` header value; None when it is invalid.
    ///
    /// ```
    /// use trustmsg_verify_api::trace_context::TraceParent;
    /// let tp = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
    /// assert_eq!(tp.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
    /// assert!(TraceParent::parse("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01").is_none());
    /// ```
    pub fn parse(value: &str) -> Option<Self> {
        let b = value.as_bytes();
        if b.len() < TRACEPARENT_LEN {
            return None;
        }
        let version = hex_byte(&b[0..2])?;
        if version == 0xff || b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        if version == 0 {
            if b.len() != TRACEPARENT_LEN {
                return None;
            }
        } else if b.len() > TRACEPARENT_LEN && b[55] != b'-' {
            return None;
        }
        let mut trace_id = [0u8; 16];
        for (i, out) in trace_id.iter_mut().enumerate() {
            *out = hex_byte(&b[3 + 2 * i..5 + 2 * i])?;
        }
        let mut parent_id = [0u8; 8];
        for (i, out) in parent_id.iter_mut().enumerate() {
            *out = hex_byte(&b[36 + 2 * i..38 + 2 * i])?;
        }
        let mut flags = hex_byte(&b[53..55])?;
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        if version != 0 {
            // Only the flags of version 00 are known: the others are not passed on.
            flags &= 0x01;
        }
        Some(Self {
            trace_id,
            parent_id,
            flags,
        })
    }

    /// The trace id in lower-case hex (32 characters).
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }

    /// The same trace and flags with another parent (a span of our own).
    pub fn with_parent(self, parent_id: [u8; 8]) -> Self {
        Self { parent_id, ..self }
    }

    /// Whether the caller sampled this trace.
    pub fn sampled(&self) -> bool {
        self.flags & 0x01 != 0
    }
}

impl std::fmt::Display for TraceParent {
    /// The version-00 form (55 characters).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            hex(&self.trace_id),
            hex(&self.parent_id),
            self.flags
        )
    }
}

/// The trace id of a stored `traceparent` (its characters 3 to 35), or None
/// when it is not one.
pub fn trace_id_of(traceparent: &str) -> Option<String> {
    TraceParent::parse(traceparent).map(|tp| tp.trace_id_hex())
}

/// Checks a `tracestate` value (several header lines joined with `,`):
/// Some(value, trimmed) when it is valid, None when it must be dropped
/// (over 512 characters or 32 members, a malformed member, a key twice).
/// An empty value (or only empty members) is None too: nothing to keep.
///
/// ```
/// use trustmsg_verify_api::trace_context::tracestate;
/// assert_eq!(tracestate("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE").as_deref(),
///            Some("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE"));
/// assert!(tracestate("Rojo=1").is_none());
/// ```
pub fn tracestate(value: &str) -> Option<String> {
    let value = value.trim_matches([' ', '\t']);
    if value.is_empty() || value.len() > TRACESTATE_MAX_LEN {
        return None;
    }
    let mut keys: Vec<&str> = Vec::new();
    for member in value.split(',') {
        let member = member.trim_matches([' ', '\t']);
        if member.is_empty() {
            continue;
        }
        let (key, val) = member.split_once('=')?;
        if !valid_key(key) || !valid_value(val) || keys.contains(&key) {
            return None;
        }
        keys.push(key);
        if keys.len() > TRACESTATE_MAX_MEMBERS {
            return None;
        }
    }
    (!keys.is_empty()).then(|| value.to_string())
}

fn key_char(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'-' | b'*' | b'/')
}

/// `simple-key` or `tenant-id@system-id`.
fn valid_key(key: &str) -> bool {
    let b = key.as_bytes();
    match key.split_once('@') {
        None => {
            (1..=256).contains(&b.len())
                && b[0].is_ascii_lowercase()
                && b[1..].iter().all(|&c| key_char(c))
        }
        Some((tenant, system)) => {
            let (t, s) = (tenant.as_bytes(), system.as_bytes());
            (1..=241).contains(&t.len())
                && (t[0].is_ascii_lowercase() || t[0].is_ascii_digit())
                && t[1..].iter().all(|&c| key_char(c))
                && (1..=14).contains(&s.len())
                && s[0].is_ascii_lowercase()
                && s[1..].iter().all(|&c| key_char(c))
        }
    }
}

/// `0*255(chr) nblk-chr`: printable ASCII without `,` and `=`, not ending in a space.
fn valid_value(value: &str) -> bool {
    let b = value.as_bytes();
    let chr = |c: u8| (0x20..=0x7e).contains(&c) && c != b',' && c != b'=';
    (1..=256).contains(&b.len()) && b.iter().all(|&c| chr(c)) && b[b.len() - 1] != b' '
}

fn hex_byte(pair: &[u8]) -> Option<u8> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    Some(digit(pair[0])? << 4 | digit(pair[1])?)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn version_00_is_taken_exactly_as_the_specification_writes_it() {
        let tp = TraceParent::parse(VALID).unwrap();
        assert_eq!(tp.to_string(), VALID);
        assert!(tp.sampled());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        ] {
            assert!(TraceParent::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn a_higher_version_is_read_for_its_known_part_and_passed_on_as_00() {
        let tp = TraceParent::parse(
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff-what-comes",
        )
        .unwrap();
        assert_eq!(
            tp.to_string(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert!(
            TraceParent::parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").is_some()
        );
        assert!(
            TraceParent::parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x")
                .is_none()
        );
    }

    #[test]
    fn tracestate_keeps_a_valid_list_and_drops_anything_else() {
        assert_eq!(
            tracestate(" a=1,,b@sys=x y ,").as_deref(),
            Some("a=1,,b@sys=x y ,")
        );
        let many: Vec<String> = (0..33).map(|i| format!("k{i}=v")).collect();
        assert!(tracestate(&many[..32].join(",")).is_some());
        assert!(tracestate(&many.join(",")).is_none());
        assert!(tracestate(&format!("a={}", "v".repeat(511))).is_none());
        for bad in ["a", "A=1", "a=1,a=2", "a=1=2", "1a=1", "a=\u{7f}"] {
            assert!(tracestate(bad).is_none(), "{bad:?}");
        }
        assert!(tracestate(" , ").is_none());
    }
}
