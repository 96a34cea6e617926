//! Prometheus metrics of the data plane: requests by website, category and action,
//! request latency, origin failures, and each rule component's calls and failures
//! (read from the rule engine's own counters at scrape time), and the response cache's
//! lookups and size.

use super::cache::ResponseCache;
use crate::rules::Registry as RulesetRegistry;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub website: String,
    /// The decided category, or `none` when no decision was made.
    pub category: &'static str,
    /// `grant`, `deny`, `captcha`, or what happened without a decision: `pass`
    /// (protection off or paused), `redirect`, `limited`, `challenge_solved`,
    /// `unknown_host`.
    pub action: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    pub action: &'static str,
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
    pub requests: Family<RequestLabels, Counter>,
    pub latency: Family<LatencyLabels, Histogram>,
    pub origin_failures: Family<OriginLabels, Counter>,
    pub cache_lookups: Family<CacheLabels, Counter>,
}

impl Metrics {
    pub fn new(rulesets: Arc<RulesetRegistry>, cache: Arc<ResponseCache>) -> Metrics {
        let mut registry = Registry::with_prefix("botgate");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests by website, decided category and action",
            requests.clone(),
        );
        let latency = Family::<LatencyLabels, Histogram>::new_with_constructor(|| {
            // 100 µs to ~6.5 s.
            Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                0.0001, 2.0, 17,
            ))
        });
        registry.register(
            "request_duration_seconds",
            "Time from the request head to the response head, by action",
            latency.clone(),
        );
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
            latency,
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

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ComponentLabels {
    component: String,
    version: String,
}

/// The rule engine's per-component counters, read at each scrape.
struct ComponentCollector(Arc<RulesetRegistry>);

impl std::fmt::Debug for ComponentCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ComponentCollector")
    }
}

impl Collector for ComponentCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let set = self.0.snapshot();
        let rows: Vec<(ComponentLabels, u64, u64, u64)> = set
            .iter()
            .map(|c| {
                let stats = c.stats();
                (
                    ComponentLabels {
                        component: c.name().to_owned(),
                        version: c.version().to_owned(),
                    },
                    stats.calls.load(Relaxed),
                    stats.failures(),
                    stats.disabled_times.load(Relaxed),
                )
            })
            .collect();
        type Pick = fn(&(ComponentLabels, u64, u64, u64)) -> u64;
        let counters: [(&str, &str, Pick); 3] = [
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
        let loaded = ConstGauge::new(rows.len() as i64);
        loaded.encode(encoder.encode_descriptor(
            "components_loaded",
            "Rule components loaded",
            None,
            loaded.metric_type(),
        )?)?;
        Ok(())
    }
}

/// The response cache's size, read at each scrape.
struct CacheCollector(Arc<ResponseCache>);

impl std::fmt::Debug for CacheCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheCollector")
    }
}

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
