//! Service flags the tests share, and the small tools for flag lists.

/// Fast sends: a short message timeout (a send to a broker that is down
/// gives up within 2 s and is retried), a send lease of 6 s, a sweep every
/// 200 ms and a send backoff from 100 ms to 1 s. For tests that take a
/// broker away and want what was committed meanwhile sent soon after it is
/// back; replace one with [`set_flag`].
pub const FAST_SEND: &[&str] = &[
    "--kafka-message-timeout",
    "2s",
    "--send-lease",
    "6s",
    "--sweep-interval",
    "200ms",
    "--send-backoff-base",
    "100ms",
    "--send-backoff-max",
    "1s",
];

/// `groups` one after the other, owned.
pub fn flags(groups: &[&[&str]]) -> Vec<String> {
    groups
        .iter()
        .flat_map(|g| g.iter().map(|s| s.to_string()))
        .collect()
}

/// Replaces the value of `--name` in `flags` (a flag may be given once).
pub fn set_flag(flags: &mut [String], name: &str, value: &str) {
    let pos = flags
        .iter()
        .position(|f| f == name)
        .unwrap_or_else(|| panic!("{name} not in {flags:?}"));
    flags[pos + 1] = value.to_string();
}

/// The flags as the `&[&str]` the kit's starters take.
pub fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}
