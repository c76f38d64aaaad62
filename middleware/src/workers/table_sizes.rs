//! The large tables' sizes in `/metrics`: rows and bytes per table, and
//! how old the oldest stored message is, so an operator sees retention
//! (or its absence) at work.
//!
//! Read from the database's catalog every `--table-size-interval` (60 s by
//! default, slower than the backlog: MySQL's `information_schema` can take
//! a while on a server with many tables), not per scrape. Gauges:
//! `trustmsg_table_rows{table}` (the engine's estimate, not a count),
//! `trustmsg_table_bytes{table}` (data and indexes, every partition of a
//! partitioned table), and `trustmsg_oldest_message_age_seconds` (0 when
//! there is no message).

use crate::store::Storage;
use crate::workers::periodic;

/// The gauges, read every `--table-size-interval` ([`periodic::gauges`]).
pub(crate) const GAUGES: periodic::Gauges<Storage> = periodic::Gauges {
    what: "read the tables' sizes",
    read: |s| s.storage(),
    publish,
};

fn publish(s: Storage) {
    for t in &s.tables {
        let table = t.table.clone();
        metrics::gauge!("trustmsg_table_rows", "table" => table.clone()).set(t.rows as f64);
        metrics::gauge!("trustmsg_table_bytes", "table" => table).set(t.bytes as f64);
    }
    metrics::gauge!("trustmsg_oldest_message_age_seconds").set(oldest_age_seconds(&s));
}

/// How long ago the oldest stored message was prepared, by the database's
/// clock; 0 when there is none.
pub(crate) fn oldest_age_seconds(s: &Storage) -> f64 {
    s.oldest_message_at.map_or(0.0, |t| {
        (s.at - t).num_milliseconds().max(0) as f64 / 1000.0
    })
}
