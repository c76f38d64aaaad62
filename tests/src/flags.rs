//! Service flags the tests share, and the small tools for flag lists.

/// Short send timeouts: a send to a broker that is down gives up within
/// 2 s (and is retried), and a claimed send is free again after 6 s.
pub const SHORT_SEND_TIMEOUTS: &[&str] = &["--kafka-message-timeout", "2s", "--send-lease", "6s"];

/// A sweep every 200 ms and a send backoff from 100 ms to 1 s: what was
/// committed while a broker or a database was away is sent soon after it
/// is back.
pub const RESEND_SOON: &[&str] = &[
    "--sweep-interval",
    "200ms",
    "--send-backoff-base",
    "100ms",
    "--send-backoff-max",
    "1s",
];

/// Fast sends: [`SHORT_SEND_TIMEOUTS`] and [`RESEND_SOON`]. For tests that
/// take a broker away and want what was committed meanwhile sent soon after
/// it is back; replace one with [`set_flag`].
pub const FAST_SEND: &[&str] = &concat::<10>(SHORT_SEND_TIMEOUTS, RESEND_SOON);

/// `a` then `b`, as a constant (`N` is their length together).
const fn concat<const N: usize>(a: &[&'static str], b: &[&'static str]) -> [&'static str; N] {
    assert!(a.len() + b.len() == N);
    let mut all = [""; N];
    let mut i = 0;
    while i < N {
        all[i] = if i < a.len() { a[i] } else { b[i - a.len()] };
        i += 1;
    }
    all
}

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
