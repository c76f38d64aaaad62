//! Claimed rows waiting for a free call slot of their producer, in this
//! instance's memory: at most the producer's limit of rows each, started as
//! its calls end, given back when their own claim could no longer outlast
//! their call.

use std::collections::{HashMap, VecDeque};

use super::claim::Claim;
use super::Inner;
use crate::store::Message;

/// The rows, by producer, oldest claim first.
#[derive(Default)]
pub(super) struct Queue {
    pub(super) rows: HashMap<String, VecDeque<Claim>>,
    pub(super) len: usize,
}

impl Queue {
    pub(super) fn waiting(&self, biz_id: &str) -> usize {
        self.rows.get(biz_id).map_or(0, VecDeque::len)
    }

    pub(super) fn push(&mut self, c: Claim) {
        self.add_one(&c).push_back(c);
    }

    /// Puts back a row just popped: it keeps its place at the head.
    pub(super) fn push_front(&mut self, c: Claim) {
        self.add_one(&c).push_front(c);
    }

    /// Counts one more row and returns its producer's queue.
    fn add_one(&mut self, c: &Claim) -> &mut VecDeque<Claim> {
        self.len += 1;
        self.rows.entry(c.message.biz_id.clone()).or_default()
    }

    pub(super) fn pop(&mut self, biz_id: &str) -> Option<Claim> {
        let rows = self.rows.get_mut(biz_id)?;
        let row = rows.pop_front();
        if rows.is_empty() {
            self.rows.remove(biz_id);
        }
        if row.is_some() {
            self.len -= 1;
        }
        row
    }

    pub(super) fn take_all(&mut self) -> Vec<Message> {
        self.len = 0;
        self.rows
            .drain()
            .flat_map(|(_, rows)| rows.into_iter().map(|c| c.message))
            .collect()
    }
}

impl Inner {
    pub(super) fn lock_queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}
