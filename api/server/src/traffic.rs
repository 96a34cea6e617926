//! `/v1.0/website/{domain}/statistics` and `/v1.0/website/{domain}/events`: what the
//! gateways of the cluster counted for a website and its latest decided requests, as
//! the dashboard shows them (and any partner or user key may read them).

use crate::Api;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::websites::{domain, reachable_owner};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use botgate_model::{Category, Domain, PartnerName, UserId};
use botgate_store::{Counts, Resolution, TrafficEvent, TrafficStore, WebsiteOwner};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use utoipa::ToSchema;

/// Entries in each top list.
const TOP: usize = 10;

/// How long computed statistics are answered again, by range: a dashboard's repeated
/// reads (or a caller's loop) cost the store one read of the buckets a period.
const HOUR_FRESH_FOR: Duration = Duration::from_secs(2);
const WEEK_FRESH_FOR: Duration = Duration::from_secs(60);
/// Websites whose statistics are kept at most (all dropped when full).
const MAX_CACHED: usize = 4096;
/// What computing statistics may cost one partner's callers on this gateway, in hour
/// buckets read (the ones with top lists, up to some 800 fields each: a week is 168,
/// an hour 2): so many a second, and so many at once.
const PARTNER_BUCKETS_PER_SECOND: u32 = 84;
const PARTNER_BUCKETS_BURST: u32 = 5 * 168;

/// Statistics computed lately, and each partner's budget for computing more.
pub struct StatisticsCache {
    /// By website, its owner (a domain deleted and created again is another's) and
    /// range (`week` or not).
    entries: Mutex<HashMap<CacheKey, Arc<Cached>>>,
    /// One bucket a partner (partners are the operator's: few).
    budget: governor::DefaultKeyedRateLimiter<PartnerName>,
    clock: governor::clock::DefaultClock,
}

/// A website, its owner and a range (`week` or not).
type CacheKey = (Domain, PartnerName, UserId, bool);

/// One website's statistics for one range: computed once by the first caller, the
/// others waiting for it.
struct Cached {
    made: Instant,
    statistics: tokio::sync::OnceCell<Statistics>,
}

impl Default for StatisticsCache {
    fn default() -> Self {
        let quota = governor::Quota::per_second(
            NonZeroU32::new(PARTNER_BUCKETS_PER_SECOND).unwrap_or(NonZeroU32::MIN),
        )
        .allow_burst(NonZeroU32::new(PARTNER_BUCKETS_BURST).unwrap_or(NonZeroU32::MIN));
        StatisticsCache {
            entries: Mutex::new(HashMap::new()),
            budget: governor::RateLimiter::keyed(quota),
            clock: governor::clock::DefaultClock::default(),
        }
    }
}

impl StatisticsCache {
    /// The entry for `domain`'s range (`week` or not) under `owner`, a fresh one when
    /// the kept one is older than `fresh_for`.
    fn entry(
        &self,
        domain: &Domain,
        owner: &WebsiteOwner,
        week: bool,
        fresh_for: Duration,
    ) -> Arc<Cached> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let key = (
            domain.clone(),
            owner.partner.clone(),
            owner.user.clone(),
            week,
        );
        if let Some(cached) = entries.get(&key)
            && cached.made.elapsed() < fresh_for
        {
            return cached.clone();
        }
        if entries.len() >= MAX_CACHED {
            entries.clear();
        }
        let cached = Arc::new(Cached {
            made: Instant::now(),
            statistics: tokio::sync::OnceCell::new(),
        });
        entries.insert(key, cached.clone());
        cached
    }

    /// Takes `buckets` from `partner`'s budget, or says how long to wait.
    fn spend(&self, partner: &PartnerName, buckets: u32) -> Result<(), ApiError> {
        let buckets = NonZeroU32::new(buckets).unwrap_or(NonZeroU32::MIN);
        match self.budget.check_key_n(partner, buckets) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => Err(crate::limit::refused(&self.clock, not_until)),
            // More than the burst: never (a week is within it).
            Err(_) => Err(ApiError::too_many_requests(1)),
        }
    }
}
/// Events answered unless `limit` says otherwise.
const DEFAULT_EVENTS: usize = 100;

/// A top list's entry.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TopEntry {
    pub value: String,
    pub count: u64,
}

/// Challenges shown and solved in the period.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Challenges {
    pub shown: u64,
    pub solved: u64,
}

/// The top lists of the period (of the whole hours it touches).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Tops {
    pub paths: Vec<TopEntry>,
    pub user_agents: Vec<TopEntry>,
    /// Client networks: /24 for IPv4, /48 for IPv6.
    pub networks: Vec<TopEntry>,
    /// The deciding component and its reason.
    pub deciders: Vec<TopEntry>,
}

/// A website's traffic over a period, counted by every gateway.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Statistics {
    /// `hour` (per minute) or `week` (seven days, per hour).
    pub range: String,
    pub step_seconds: u64,
    /// The start of each step, in seconds since the Unix epoch; each series has one
    /// count per step.
    pub times: Vec<u64>,
    /// Requests per step by decided category (every category, zeros included).
    pub by_category: BTreeMap<String, Vec<u64>>,
    /// Requests per step by what the gateway did (`grant`, `deny`, `captcha`,
    /// `challenge_solved`, …; only those that happened).
    pub by_action: BTreeMap<String, Vec<u64>>,
    pub challenges: Challenges,
    pub top: Tops,
}

/// The latest decided requests.
#[derive(Debug, Serialize, ToSchema)]
pub struct Events {
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<TrafficEvent>,
}

/// The query's parameters, each known name at most once; an unknown one is refused.
fn query(raw: Option<String>, known: &[&str]) -> Result<BTreeMap<String, String>, ApiError> {
    let mut parameters = BTreeMap::new();
    for (name, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        if !known.contains(&name.as_ref()) {
            return Err(ApiError::bad_request(format!(
                "unknown query parameter `{}`; the parameters are {}",
                botgate_model::names::shorten(&name),
                known.join(", ")
            ))
            .on(name.into_owned()));
        }
        parameters.insert(name.into_owned(), value.into_owned());
    }
    Ok(parameters)
}

fn top(buckets: &[Counts], prefix: &str) -> Vec<TopEntry> {
    let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
    for bucket in buckets {
        for (field, count) in &bucket.0 {
            if let Some(value) = field.strip_prefix(prefix) {
                *totals.entry(value).or_default() += count;
            }
        }
    }
    let mut entries: Vec<TopEntry> = totals
        .into_iter()
        .map(|(value, count)| TopEntry {
            value: value.to_owned(),
            count,
        })
        .collect();
    entries.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.value.cmp(&b.value)));
    entries.truncate(TOP);
    entries
}

/// A website's requests over the last hour (per minute) or seven days (per hour).
#[utoipa::path(get, path = "/v1.0/website/{domain}/statistics", tag = "websites",
    params(
        ("domain" = String, Path, description = "The website's domain."),
        ("range" = Option<String>, Query, description = "`hour` (the default) or `week`."),
    ),
    responses((status = 200, description = "The website's statistics.", body = Statistics)))]
pub async fn statistics(
    State(api): State<Arc<Api>>,
    caller: Caller,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Statistics>, ApiError> {
    let domain = domain(&name)?;
    let parameters = query(raw, &["range"])?;
    let owner = reachable_owner(&api, &caller, &domain).await?;
    let week = match parameters.get("range").map_or("hour", String::as_str) {
        "hour" => false,
        "week" => true,
        other => {
            return Err(ApiError::bad_request(format!(
                "`range` is `hour` or `week`, not `{}`",
                botgate_model::names::shorten(other)
            ))
            .on("range"));
        }
    };
    let (fresh_for, buckets) = if week {
        (WEEK_FRESH_FOR, 7 * 24)
    } else {
        (HOUR_FRESH_FOR, 2)
    };
    let cached = api.statistics.entry(&domain, &owner, week, fresh_for);
    let statistics = cached
        .statistics
        .get_or_try_init(|| async {
            api.statistics.spend(&owner.partner, buckets)?;
            compute_statistics(&api, &domain, week).await
        })
        .await?;
    Ok(Json(statistics.clone()))
}

/// A website's statistics over the last hour or the last week, read from the store.
async fn compute_statistics(
    api: &Arc<Api>,
    domain: &Domain,
    week: bool,
) -> Result<Statistics, ApiError> {
    let (range, resolution, step, steps) = if week {
        ("week", Resolution::Hour, 3600, 7 * 24)
    } else {
        ("hour", Resolution::Minute, 60, 60)
    };
    let now = botgate_webhooks::now_ms() / 1000;
    let last = now / step;
    let first = last + 1 - steps;
    let read = |resolution, from, to| {
        let api = api.clone();
        let domain = domain.clone();
        async move {
            api.store
                .traffic(&domain, resolution, from, to)
                .await
                .map_err(|e| ApiError::from_store(e, "domain"))
        }
    };
    let buckets = read(resolution, first, last).await?;
    // The top lists come from hour buckets: the hours the period touches.
    let minute_hours = match resolution {
        Resolution::Minute => Some(read(Resolution::Hour, first / 60, last / 60).await?),
        Resolution::Hour => None,
    };
    let hours = minute_hours.as_deref().unwrap_or(&buckets);
    let mut by_category: BTreeMap<String, Vec<u64>> = Category::ALL
        .iter()
        .map(|category| (category.as_str().to_owned(), vec![0; buckets.len()]))
        .collect();
    let mut by_action: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut challenges = Challenges {
        shown: 0,
        solved: 0,
    };
    for (index, bucket) in buckets.iter().enumerate() {
        for (field, count) in &bucket.0 {
            if let Some(decision) = field.strip_prefix("c:")
                && let Some((category, action)) = decision.split_once(':')
            {
                if let Some(series) = by_category.get_mut(category) {
                    series[index] += count;
                }
                by_action
                    .entry(action.to_owned())
                    .or_insert_with(|| vec![0; buckets.len()])[index] += count;
            }
        }
        challenges.shown += bucket.0.get("ch:shown").copied().unwrap_or(0);
        challenges.solved += bucket.0.get("ch:solved").copied().unwrap_or(0);
    }
    let first_step = last + 1 - buckets.len() as u64;
    Ok(Statistics {
        range: range.to_owned(),
        step_seconds: step,
        times: (first_step..=last).map(|n| n * step).collect(),
        by_category,
        by_action,
        challenges,
        top: Tops {
            paths: top(hours, "p:"),
            user_agents: top(hours, "u:"),
            networks: top(hours, "n:"),
            deciders: top(hours, "d:"),
        },
    })
}

/// A website's latest decided requests, newest first, filtered by what the gateway
/// did and by category.
#[utoipa::path(get, path = "/v1.0/website/{domain}/events", tag = "websites",
    params(
        ("domain" = String, Path, description = "The website's domain."),
        ("action" = Option<String>, Query, description = "Only requests the gateway answered so (`grant`, `deny`, `captcha`, `challenge_solved`, …)."),
        ("category" = Option<String>, Query, description = "Only requests of this category."),
        ("limit" = Option<u32>, Query, description = "At most this many (1 to 200; 100 by default)."),
    ),
    responses((status = 200, description = "The latest requests.", body = Events)))]
pub async fn events(
    State(api): State<Arc<Api>>,
    caller: Caller,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Events>, ApiError> {
    let domain = domain(&name)?;
    let parameters = query(raw, &["action", "category", "limit"])?;
    reachable_owner(&api, &caller, &domain).await?;
    let category = match parameters.get("category").filter(|c| !c.is_empty()) {
        Some(text) => Some(
            text.parse::<Category>()
                .map_err(|e| ApiError::bad_request(e.to_string()).on("category"))?,
        ),
        None => None,
    };
    let action = parameters.get("action").filter(|a| !a.is_empty());
    if let Some(action) = action
        && (action.len() > 32 || !action.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
    {
        return Err(ApiError::bad_request(
            "`action` is a lower-case name such as `grant`, `deny` or `captcha`",
        )
        .on("action"));
    }
    let limit = match parameters.get("limit") {
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=botgate_store::traffic::EVENTS_KEPT).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "`limit` is a number from 1 to {}",
                    botgate_store::traffic::EVENTS_KEPT
                ))
                .on("limit")
            })?,
        None => DEFAULT_EVENTS,
    };
    // Kept as long as the hour counts, whichever backend keeps them longer.
    let oldest = botgate_webhooks::now_ms()
        .saturating_sub(botgate_store::traffic::HOUR_BUCKETS_KEPT * 3_600_000);
    let items = api
        .store
        .events(&domain, botgate_store::traffic::EVENTS_KEPT)
        .await
        .map_err(|e| ApiError::from_store(e, "domain"))?
        .into_iter()
        .filter(|event| event.time >= oldest)
        .filter(|event| action.is_none_or(|wanted| &event.action == wanted))
        .filter(|event| {
            category.is_none_or(|wanted| event.category.as_deref() == Some(wanted.as_str()))
        })
        .take(limit)
        .collect();
    Ok(Json(Events { items }))
}
