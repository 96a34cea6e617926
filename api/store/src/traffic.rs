//! Traffic statistics and recent decisions per website, as every gateway adds them
//! and the dashboard reads them: counters in minute and hour buckets, and a bounded
//! list of the latest requests.
//!
//! Sizes are bounded per website: [`MINUTE_BUCKETS_KEPT`] minute buckets of decision
//! counters; [`HOUR_BUCKETS_KEPT`] hour buckets of the same counters plus the four top
//! lists, at most [`TOP_LIST_ENTRIES`] entries each (an entry new to a full list is
//! dropped; the ones it has keep counting); and the latest [`EVENTS_KEPT`] events, for
//! as long as the hour buckets. A website's deletion deletes them.

use botgate_model::Domain;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::future::Future;

use crate::{Owner, StoreError};

/// Minute buckets kept per website: two hours.
pub const MINUTE_BUCKETS_KEPT: u64 = 120;
/// Hour buckets kept per website: eight days.
pub const HOUR_BUCKETS_KEPT: u64 = 8 * 24;
/// The most entries of each top list in an hour bucket.
pub const TOP_LIST_ENTRIES: usize = 200;
/// The latest events kept per website.
pub const EVENTS_KEPT: usize = 200;
/// The most buckets one read returns (the latest of those asked for).
pub const MAX_BUCKETS_READ: u64 = 240;

/// Counts by field. The field families:
///
/// - `c:<category or none>:<outcome>`: requests decided so (minute and hour buckets);
/// - `ch:shown`, `ch:solved`: challenges shown and solved (both);
/// - `p:<path>`, `u:<user agent>`, `n:<network>`, `d:<component> <reason>`: the top
///   lists' entries (hour buckets only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts(pub BTreeMap<String, u64>);

impl Counts {
    pub fn add(&mut self, field: &str, count: u64) {
        match self.0.get_mut(field) {
            Some(total) => *total += count,
            None => {
                self.0.insert(field.to_owned(), count);
            }
        }
    }

    /// Whether `field` belongs in minute buckets too (a decision or challenge count).
    pub fn is_counter(field: &str) -> bool {
        field.starts_with("c:") || field.starts_with("ch:")
    }

    /// The top list a field belongs to (`p:`, `u:`, `n:`, `d:`), or `None` for a counter.
    fn list_of(field: &str) -> Option<&str> {
        field
            .get(..2)
            .filter(|prefix| prefix.ends_with(':') && !Counts::is_counter(field))
    }

    /// Adds `other` into these counts: every counter, and a top-list entry new to them
    /// only while its list holds fewer than [`TOP_LIST_ENTRIES`].
    pub fn merge_bounded(&mut self, other: &Counts) {
        for (field, count) in &other.0 {
            if self.0.contains_key(field) {
                self.add(field, *count);
                continue;
            }
            let full = Counts::list_of(field).is_some_and(|list| {
                self.0
                    .range::<str, _>((std::ops::Bound::Included(list), std::ops::Bound::Unbounded))
                    .take_while(|(key, _)| key.starts_with(list))
                    .count()
                    >= TOP_LIST_ENTRIES
            });
            if !full {
                self.add(field, *count);
            }
        }
    }
}

/// One decided request, as the dashboard lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrafficEvent {
    /// When it was answered, in milliseconds since the Unix epoch.
    pub time: u64,
    pub client: String,
    pub method: String,
    /// The path and query, shortened, with any `api-key` redacted.
    pub path: String,
    /// The decided category, when a decision was made.
    pub category: Option<String>,
    /// What the gateway did (`grant`, `deny`, `captcha`, `challenge_solved`, …).
    pub action: String,
    /// The deciding component.
    pub decider: Option<String>,
    /// The deciding opinion's reason.
    pub reason: String,
    /// The status answered.
    pub status: u16,
}

/// The resolution of a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    Minute,
    Hour,
}

impl Resolution {
    pub fn letter(self) -> &'static str {
        match self {
            Resolution::Minute => "m",
            Resolution::Hour => "h",
        }
    }
}

/// Traffic statistics and recent decisions, shared by every gateway of a cluster.
pub trait TrafficStore: Send + Sync + 'static {
    /// Adds one gateway's counts for `domain` in `minute` (minutes since the Unix
    /// epoch) to its minute and hour buckets, and `events` (oldest first) to its latest,
    /// when `domain` is a website of `owner`'s. Counts recorded for an owner the website
    /// no longer has (deleted, or created again by someone else since) are dropped.
    fn add_traffic(
        &self,
        domain: &Domain,
        owner: Owner<'_>,
        minute: u64,
        counts: &Counts,
        events: &[TrafficEvent],
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The buckets of `domain` numbered `from..=to` at `resolution` (minutes or hours
    /// since the Unix epoch), each with its counts; missing buckets are empty.
    fn traffic(
        &self,
        domain: &Domain,
        resolution: Resolution,
        from: u64,
        to: u64,
    ) -> impl Future<Output = Result<Vec<Counts>, StoreError>> + Send;

    /// The latest events of `domain`, newest first, at most `limit`.
    fn events(
        &self,
        domain: &Domain,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<TrafficEvent>, StoreError>> + Send;
}
