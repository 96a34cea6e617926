//! Prometheus metrics of the data plane: requests by website, category and action,
//! decisions by what decided them, request latency, origin failures, and each rule component's calls and failures
//! (read from the rule engine's own counters at scrape time), and the response cache's
//! lookups and size.

use super::cache::ResponseCache;
use crate::rules::Registry as RulesetRegistry;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use thread_local::ThreadLocal;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    website: String,
    /// The decided category, or `none` when no decision was made.
    category: &'static str,
    /// `grant`, `deny`, `captcha`, or what happened without a decision: `pass`
    /// (protection off or paused), `redirect`, `limited`, `challenge_solved`,
    /// `unknown_host`.
    action: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    /// The component whose opinion won, or `none` when every component abstained.
    decider: String,
    /// Its reason id (`crs.942100-sqli`), `none`, or `other` past [`MAX_REASONS`].
    reason: String,
    action: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    action: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OriginLabels {
    pub kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    /// `hit` or `miss`.
    pub result: &'static str,
}

/// The gateway's metrics.
pub struct Metrics {
    registry: Registry,
    /// Requests by website, category and action, and their latency by action.
    pub requests: Arc<RequestMetrics>,
    pub origin_failures: Family<OriginLabels, Counter>,
    pub cache_lookups: Family<CacheLabels, Counter>,
}

impl Metrics {
    pub fn new(rulesets: Arc<RulesetRegistry>, cache: Arc<ResponseCache>) -> Metrics {
        let mut registry = Registry::with_prefix("botgate");
        let requests = Arc::new(RequestMetrics::new());
        registry.register_collector(Box::new(RequestCollector(requests.clone())));
        let origin_failures = Family::<OriginLabels, Counter>::default();
        registry.register(
            "origin_failures",
            "Origin connections refused or timed out, and origins that failed mid-request",
            origin_failures.clone(),
        );
        let cache_lookups = Family::<CacheLabels, Counter>::default();
        registry.register(
            "cache_lookups",
            "Requests the response cache could answer (hit) or not (miss)",
            cache_lookups.clone(),
        );
        registry.register_collector(Box::new(ComponentCollector(rulesets)));
        registry.register_collector(Box::new(CacheCollector(cache)));
        Metrics {
            registry,
            requests,
            origin_failures,
            cache_lookups,
        }
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(err) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(%err, "encoding metrics failed");
        }
        out
    }
}

/// The latency histogram's upper bounds: 100 µs, doubling to ~6.5 s, then +Inf.
fn latency_bounds() -> Box<[f64]> {
    prometheus_client::metrics::histogram::exponential_buckets(0.0001, 2.0, 17)
        .chain(std::iter::once(f64::INFINITY))
        .collect()
}

/// Requests and their latency, counted by each thread in a table of its own and summed
/// at each scrape: recording a request writes only memory of its own core (a shared
/// `Family` has every data-plane core write its lock, its counters and the histogram's
/// lock on every request).
pub struct RequestMetrics {
    per_thread: ThreadLocal<Mutex<ThreadTable>>,
    bounds: Box<[f64]>,
    reasons: Mutex<ReasonAdmission>,
}

/// Requests by website, category and action, added up over the threads.
type RequestTotals = BTreeMap<(String, &'static str, &'static str), u64>;
/// Latency by action, added up over the threads.
type LatencyTotals = BTreeMap<&'static str, LatencyCounts>;

/// Request counts by category and action.
type CountsByCategory = Vec<(&'static str, &'static str, u64)>;
/// Decisions by decider, reason and action, added up over the threads.
type DecisionTotals = BTreeMap<(String, String, &'static str), u64>;
/// Decision counts by action.
type CountsByAction = Vec<(&'static str, u64)>;

/// The most (decider, reason) pairs the gateway counts apart, and of them one decider's;
/// the rest count as reason `other`, one more pair per decider (reason ids come from
/// components: the series stay bounded whatever they send, and one component's stream
/// of ids leaves room for the others').
pub const MAX_REASONS: usize = 512;
pub const MAX_REASONS_PER_DECIDER: usize = 256;

/// The (decider, reason) pairs counted apart, gateway-wide ([`MAX_REASONS`]).
#[derive(Default)]
struct ReasonAdmission {
    by_decider: HashMap<Box<str>, std::collections::HashSet<Box<str>>>,
    pairs: usize,
}

impl ReasonAdmission {
    /// Whether `reason` of `decider` is counted apart (it was before, or there is room).
    fn admit(&mut self, decider: &str, reason: &str) -> bool {
        let admitted = self.by_decider.get(decider);
        if admitted.is_some_and(|reasons| reasons.contains(reason)) {
            return true;
        }
        if self.pairs >= MAX_REASONS
            || admitted.is_some_and(|reasons| reasons.len() >= MAX_REASONS_PER_DECIDER)
        {
            return false;
        }
        self.pairs += 1;
        match self.by_decider.get_mut(decider) {
            Some(reasons) => reasons.insert(reason.into()),
            None => self
                .by_decider
                .entry(decider.into())
                .or_default()
                .insert(reason.into()),
        }
    }
}

/// One thread's counts.
#[derive(Default)]
struct ThreadTable {
    /// Requests by website, then by category and action. (foldhash: the websites are
    /// the partners' names, not a client's.)
    requests: HashMap<Box<str>, CountsByCategory, foldhash::fast::RandomState>,
    /// Latency by action.
    latency: Vec<(&'static str, LatencyCounts)>,
    /// Decisions by decider, then by reason and action.
    decisions: HashMap<Box<str>, ReasonCounts, foldhash::fast::RandomState>,
}

/// One decider's counts by reason. (foldhash: reason ids come from the components, and
/// their number is bounded.)
type ReasonCounts = HashMap<Box<str>, CountsByAction, foldhash::fast::RandomState>;

/// A histogram's counts: per bucket (not cumulative), their sum and count.
#[derive(Clone)]
struct LatencyCounts {
    buckets: Box<[u64]>,
    sum: f64,
    count: u64,
}

impl LatencyCounts {
    fn new(buckets: usize) -> LatencyCounts {
        LatencyCounts {
            buckets: vec![0; buckets].into(),
            sum: 0.0,
            count: 0,
        }
    }

    fn add(&mut self, other: &LatencyCounts) {
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
        self.sum += other.sum;
        self.count += other.count;
    }
}

impl RequestMetrics {
    fn new() -> RequestMetrics {
        RequestMetrics {
            per_thread: ThreadLocal::new(),
            reasons: Mutex::default(),
            bounds: latency_bounds(),
        }
    }

    /// Counts one request of `website` (`-` for none), its category and action, its
    /// latency, and for a decided request what decided it (`decision`: the deciding
    /// component, `none` when every component abstained, and the reason id).
    pub fn record(
        &self,
        website: &str,
        category: &'static str,
        action: &'static str,
        latency: Duration,
        decision: Option<(&str, &str)>,
    ) {
        // Only a scrape ever waits on this lock, for the time of a copy.
        let mut table = self
            .per_thread
            .get_or_default()
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let rows = match table.requests.get_mut(website) {
            Some(rows) => rows,
            None => table.requests.entry(website.into()).or_default(),
        };
        match rows
            .iter_mut()
            .find(|(c, a, _)| *c == category && *a == action)
        {
            Some((_, _, count)) => *count += 1,
            None => rows.push((category, action, 1)),
        }
        let seconds = latency.as_secs_f64();
        let bucket = self
            .bounds
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(self.bounds.len() - 1);
        let counts = match table.latency.iter().position(|(a, _)| *a == action) {
            Some(i) => &mut table.latency[i].1,
            None => {
                table
                    .latency
                    .push((action, LatencyCounts::new(self.bounds.len())));
                &mut table.latency.last_mut().expect("just pushed").1
            }
        };
        counts.buckets[bucket] += 1;
        counts.sum += seconds;
        counts.count += 1;
        if let Some((decider, reason)) = decision {
            table.count_decision(decider, reason, action, &self.reasons);
        }
    }

    /// Every thread's counts, added up, in a stable order.
    fn totals(&self) -> (RequestTotals, LatencyTotals, DecisionTotals) {
        let mut requests = RequestTotals::new();
        let mut latency = LatencyTotals::new();
        let mut decisions = DecisionTotals::new();
        for table in self.per_thread.iter() {
            let table = table.lock().unwrap_or_else(PoisonError::into_inner);
            for (website, rows) in &table.requests {
                for &(category, action, count) in rows {
                    *requests
                        .entry((website.to_string(), category, action))
                        .or_default() += count;
                }
            }
            for (action, counts) in &table.latency {
                latency
                    .entry(action)
                    .or_insert_with(|| LatencyCounts::new(self.bounds.len()))
                    .add(counts);
            }
            for (decider, reasons) in &table.decisions {
                for (reason, actions) in reasons {
                    for &(action, count) in actions {
                        *decisions
                            .entry((decider.to_string(), reason.to_string(), action))
                            .or_default() += count;
                    }
                }
            }
        }
        (requests, latency, decisions)
    }
}

impl ThreadTable {
    fn count_decision(
        &mut self,
        decider: &str,
        reason: &str,
        action: &'static str,
        admission: &Mutex<ReasonAdmission>,
    ) {
        let reason = if reason.is_empty() { "none" } else { reason };
        let reasons = match self.decisions.get_mut(decider) {
            Some(reasons) => reasons,
            None => self.decisions.entry(decider.into()).or_default(),
        };
        let actions = match reasons.get_mut(reason) {
            Some(actions) => actions,
            // This thread's first of the pair: asked gateway-wide (rarely).
            None => {
                let admitted = admission
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .admit(decider, reason);
                let reason = if admitted { reason } else { "other" };
                reasons.entry(reason.into()).or_default()
            }
        };
        match actions.iter_mut().find(|(a, _)| *a == action) {
            Some((_, count)) => *count += 1,
            None => actions.push((action, 1)),
        }
    }
}

/// Encodes [`RequestMetrics`] as `requests` (a counter) and `request_duration_seconds`
/// (a histogram) at each scrape.
struct RequestCollector(Arc<RequestMetrics>);

impl Collector for RequestCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (requests, latency, decisions) = self.0.totals();
        let mut family = encoder.encode_descriptor(
            "requests",
            "Requests by website, decided category and action",
            None,
            MetricType::Counter,
        )?;
        for ((website, category, action), count) in requests {
            let labels = RequestLabels {
                website,
                category,
                action,
            };
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "decisions",
            "Decided requests by the component that decided (none: all abstained), its reason id and the action",
            None,
            MetricType::Counter,
        )?;
        for ((decider, reason, action), count) in decisions {
            let labels = DecisionLabels {
                decider,
                reason,
                action,
            };
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "request_duration_seconds",
            "Time from the request head to the response head, by action",
            None,
            MetricType::Histogram,
        )?;
        for (action, counts) in latency {
            let buckets: Vec<(f64, u64)> = self
                .0
                .bounds
                .iter()
                .copied()
                .zip(counts.buckets.iter().copied())
                .collect();
            family
                .encode_family(&LatencyLabels { action })?
                .encode_histogram::<NoLabelSet>(counts.sum, counts.count, &buckets, None)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ComponentLabels {
    component: String,
    version: String,
}

/// The rule engine's per-component counters, read at each scrape.
struct ComponentCollector(Arc<RulesetRegistry>);

impl Collector for ComponentCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let set = self.0.snapshot();
        let rows: Vec<(ComponentLabels, u64, u64, u64, u64)> = set
            .iter()
            .map(|c| {
                let stats = c.stats();
                (
                    ComponentLabels {
                        component: c.name().to_owned(),
                        version: c.version().to_owned(),
                    },
                    stats.calls(),
                    stats.failures(),
                    stats.disabled_times.load(Relaxed),
                    stats.instances_made_on_request.load(Relaxed),
                )
            })
            .collect();
        type Pick = fn(&(ComponentLabels, u64, u64, u64, u64)) -> u64;
        let counters: [(&str, &str, Pick); 4] = [
            ("component_calls", "Calls into each rule component", |r| r.1),
            (
                "component_failures",
                "Calls that trapped, ran out of time or memory, or answered nonsense",
                |r| r.2,
            ),
            (
                "component_disabled",
                "Times a failing component was switched off for a while",
                |r| r.3,
            ),
            (
                "component_instances_made_on_request",
                "Instances a thread made while a request waited, no spare being ready",
                |r| r.4,
            ),
        ];
        for (name, help, pick) in counters {
            let mut family = encoder.encode_descriptor(
                name,
                help,
                None,
                ConstCounter::new(0u64).metric_type(),
            )?;
            for row in &rows {
                ConstCounter::new(pick(row)).encode(family.encode_family(&row.0)?)?;
            }
        }
        // The circuit breaker's state (switched off now) and the failure policy.
        type State = fn(&botgate_rules::LoadedComponent, &botgate_rules::RulesetSet) -> bool;
        let states: [(&str, &str, State); 2] = [
            (
                "component_switched_off",
                "1 while a component that kept failing is switched off (its circuit open)",
                |c, _| c.is_disabled(),
            ),
            (
                "component_fails_closed",
                "1 for a component whose failure refuses the request (fail-closed)",
                |c, set| set.fails_closed(c.name()),
            ),
        ];
        for (name, help, state) in states {
            let mut family =
                encoder.encode_descriptor(name, help, None, ConstGauge::new(0i64).metric_type())?;
            for (component, row) in set.iter().zip(&rows) {
                let value = i64::from(state(component, &set));
                ConstGauge::new(value).encode(family.encode_family(&row.0)?)?;
            }
        }
        let mut held: Vec<String> = self
            .0
            .not_in_service()
            .into_iter()
            .map(|n| n.name)
            .collect();
        held.dedup();
        let counts = [
            ("components_loaded", "Rule components loaded", rows.len()),
            (
                "components_not_in_service",
                "Names of components the rule-set directory or the store holds that do not serve here (refused, or an activated version this gateway cannot load)",
                held.len(),
            ),
        ];
        for (name, help, count) in counts {
            let gauge = ConstGauge::new(count as i64);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

/// The response cache's size, read at each scrape.
struct CacheCollector(Arc<ResponseCache>);

impl Collector for CacheCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let bytes = ConstGauge::new(self.0.weight() as i64);
        bytes.encode(encoder.encode_descriptor(
            "cache_bytes",
            "Bytes the response cache holds",
            None,
            bytes.metric_type(),
        )?)
    }
}

/// `Debug` for the collectors (the `Collector` trait asks for it): their name.
macro_rules! debug_as_name {
    ($($collector:ident),*) => {$(
        impl std::fmt::Debug for $collector {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(stringify!($collector))
            }
        }
    )*};
}

debug_as_name!(RequestCollector, ComponentCollector, CacheCollector);

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(requests: &Arc<RequestMetrics>) -> String {
        let mut registry = Registry::with_prefix("botgate");
        registry.register_collector(Box::new(RequestCollector(requests.clone())));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        out
    }

    #[test]
    fn requests_counted_on_several_threads_are_scraped_as_one_sum() {
        let requests = Arc::new(RequestMetrics::new());
        let ms = Duration::from_millis;
        std::thread::scope(|threads| {
            for _ in 0..3 {
                threads.spawn(|| {
                    requests.record("a.example", "humans", "grant", ms(1), Some(("none", "")));
                    requests.record(
                        "a.example",
                        "security_issues",
                        "deny",
                        Duration::ZERO,
                        Some(("crs", "crs.942100-sqli")),
                    );
                    requests.record("-", "none", "unknown_host", ms(20_000), None);
                });
            }
        });
        requests.record(
            "a.example",
            "humans",
            "grant",
            Duration::from_micros(300),
            Some(("classifier", "classifier.browser")),
        );
        let text = encoded(&requests);
        for line in [
            "# TYPE botgate_requests counter",
            "botgate_requests_total{website=\"a.example\",category=\"humans\",action=\"grant\"} 4",
            "botgate_requests_total{website=\"a.example\",category=\"security_issues\",action=\"deny\"} 3",
            "botgate_requests_total{website=\"-\",category=\"none\",action=\"unknown_host\"} 3",
            "# TYPE botgate_decisions counter",
            "botgate_decisions_total{decider=\"crs\",reason=\"crs.942100-sqli\",action=\"deny\"} 3",
            "botgate_decisions_total{decider=\"none\",reason=\"none\",action=\"grant\"} 3",
            "botgate_decisions_total{decider=\"classifier\",reason=\"classifier.browser\",action=\"grant\"} 1",
            "# TYPE botgate_request_duration_seconds histogram",
            // Cumulative buckets: 0.3 ms is in 0.0004, the three 1 ms in 0.0016.
            "botgate_request_duration_seconds_bucket{le=\"0.0002\",action=\"grant\"} 0",
            "botgate_request_duration_seconds_bucket{le=\"0.0004\",action=\"grant\"} 1",
            "botgate_request_duration_seconds_bucket{le=\"0.0008\",action=\"grant\"} 1",
            "botgate_request_duration_seconds_bucket{le=\"0.0016\",action=\"grant\"} 4",
            "botgate_request_duration_seconds_bucket{le=\"+Inf\",action=\"grant\"} 4",
            "botgate_request_duration_seconds_count{action=\"grant\"} 4",
            "botgate_request_duration_seconds_bucket{le=\"0.0001\",action=\"deny\"} 3",
            // 20 s is past the last finite bound (~6.5 s).
            "botgate_request_duration_seconds_bucket{le=\"6.5536\",action=\"unknown_host\"} 0",
            "botgate_request_duration_seconds_bucket{le=\"+Inf\",action=\"unknown_host\"} 3",
            "botgate_request_duration_seconds_sum{action=\"unknown_host\"} 60.0",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
        }
    }

    #[test]
    fn decision_reasons_past_the_bound_count_as_other() {
        let requests = Arc::new(RequestMetrics::new());
        let record = |requests: &RequestMetrics, decider: &str, reason: &str| {
            requests.record(
                "a.example",
                "humans",
                "grant",
                Duration::ZERO,
                Some((decider, reason)),
            )
        };
        // One component's stream of ids takes its share only.
        for i in 0..MAX_REASONS + 10 {
            record(&requests, "hostile", &format!("hostile.{i}"));
        }
        // A reason already counted keeps its own series; another component's have room.
        record(&requests, "hostile", "hostile.0");
        for i in 0..MAX_REASONS {
            record(&requests, "crs", &format!("crs.{i}"));
        }
        // Another thread counts the same pairs, and no new ones past the bound.
        let shared = requests.clone();
        std::thread::spawn(move || {
            record(&shared, "hostile", "hostile.0");
            record(&shared, "crs", &format!("crs.{}", MAX_REASONS - 1));
        })
        .join()
        .unwrap();
        let text = encoded(&requests);
        let series = |decider: &str| {
            let prefix = format!("botgate_decisions_total{{decider=\"{decider}\"");
            text.lines().filter(|l| l.starts_with(&prefix)).count()
        };
        assert_eq!(series("hostile"), MAX_REASONS_PER_DECIDER + 1, "{text}");
        assert_eq!(
            series("crs"),
            MAX_REASONS - MAX_REASONS_PER_DECIDER + 1,
            "{text}"
        );
        for line in [
            "botgate_decisions_total{decider=\"hostile\",reason=\"other\",action=\"grant\"} 266",
            "botgate_decisions_total{decider=\"hostile\",reason=\"hostile.0\",action=\"grant\"} 3",
            "botgate_decisions_total{decider=\"crs\",reason=\"other\",action=\"grant\"} 257",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
        }
    }
}
