//! Where a message lives: its slot, the slot's shard, and the shard an id
//! was born on. Pure functions; [`super::ShardedStore`] applies them.

/// Slots in the map: a message's slot is a stable hash of its key modulo
/// this, and a shard holds whole slots, so shards are added by moving slots.
pub const SLOTS: u16 = 1024;

/// Ids are `shard << ID_BITS | n`: shard k's rows (messages, alerts,
/// waiting commits) take ids from `k << ID_BITS` on, so an id alone names
/// the shard it was created on. Shard 0's start at 1, as a deployment with
/// one database always had.
pub const ID_BITS: u32 = 48;

/// At most this many shards: their ids stay below 2^53, which a JSON
/// number (a JavaScript double) holds exactly.
pub const MAX_SHARDS: usize = 32;

/// The slot of a message: CRC-32 (the IEEE polynomial, as MySQL's `CRC32()`
/// computes it, so an operator can select a slot's rows in SQL) of the
/// producer's `biz_id`, a zero byte and `key` (the message key, or an
/// ordered message's order key), modulo [`SLOTS`]. Never changes: that is
/// what lets a deployment add shards by moving whole slots.
pub fn slot_of(biz_id: &str, key: &[u8]) -> u16 {
    let mut hash = crc32fast::Hasher::new();
    hash.update(biz_id.as_bytes());
    hash.update(&[0]);
    hash.update(key);
    u16::try_from(hash.finalize() % u32::from(SLOTS)).expect("a slot is below SLOTS")
}

/// The first id of shard `shard`'s rows (0 for the first shard, whose
/// AUTO_INCREMENT starts at 1 as always).
pub fn id_floor(shard: usize) -> u64 {
    (shard as u64) << ID_BITS
}

/// The shard an id was created on.
pub fn shard_of_id(id: u64) -> usize {
    usize::try_from(id >> ID_BITS).unwrap_or(usize::MAX)
}

/// A new deployment's map: slot `s` on shard `s mod shards`, so each shard
/// holds an equal share of the keys.
pub(super) fn spread(shards: usize) -> Vec<u16> {
    (0..SLOTS)
        .map(|s| u16::try_from(usize::from(s) % shards.max(1)).expect("shards fit u16"))
        .collect()
}

/// `total` split into `parts` shares that differ by at most one, the larger
/// shares starting at part `first` (so that, turned from call to call, no
/// part always gets the smaller share).
pub(super) fn shares(total: u32, parts: usize, first: usize) -> Vec<u32> {
    let parts_u32 = u32::try_from(parts.max(1)).unwrap_or(u32::MAX);
    let (each, rest) = (total / parts_u32, total % parts_u32);
    (0..parts.max(1))
        .map(|i| {
            let turn = u32::try_from((i + parts - first % parts.max(1)) % parts.max(1))
                .unwrap_or(u32::MAX);
            each + u32::from(turn < rest)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_mysqls_crc32_of_the_key_and_stays_put() {
        // MySQL: SELECT CRC32(CONCAT('shop', CHAR(0), 'order-1')) % 1024
        let crc = crc32fast::hash(b"shop\0order-1");
        assert_eq!(u32::from(slot_of("shop", b"order-1")), crc % 1024);
        // The zero byte keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(crc32fast::hash(b"ab\0c"), crc32fast::hash(b"a\0bc"));
        // CRC-32 of "123456789" is the check value of the IEEE polynomial.
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn ids_name_the_shard_they_were_created_on() {
        assert_eq!(shard_of_id(1), 0);
        assert_eq!(shard_of_id(id_floor(2)), 2);
        assert_eq!(shard_of_id(id_floor(3) - 1), 2);
        assert!(id_floor(MAX_SHARDS) <= 1 << 53);
    }

    #[test]
    fn shares_differ_by_one_and_the_larger_ones_turn() {
        assert_eq!(shares(10, 3, 0), vec![4, 3, 3]);
        assert_eq!(shares(10, 3, 1), vec![3, 4, 3]);
        assert_eq!(shares(2, 3, 2), vec![1, 0, 1]);
        assert_eq!(shares(7, 1, 5), vec![7]);
        for first in 0..5 {
            assert_eq!(shares(17, 4, first).iter().sum::<u32>(), 17);
        }
        let spread = spread(3);
        assert_eq!(spread.len(), usize::from(SLOTS));
        assert_eq!(spread.iter().filter(|&&s| s == 2).count(), 341);
    }
}
