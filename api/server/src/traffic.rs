//! `/v1.0/website/{domain}/statistics` and `/v1.0/website/{domain}/events`: what the
//! gateways of the cluster counted for a website and its latest decided requests, as
//! the dashboard shows them (and any partner or user key may read them).

use crate::Api;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::websites::{domain, reachable};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use botgate_model::Category;
use botgate_store::{Counts, Resolution, TrafficEvent, TrafficStore};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use utoipa::ToSchema;

/// Entries in each top list.
const TOP: usize = 10;
/// Events answered unless `limit` says otherwise.
const DEFAULT_EVENTS: usize = 100;

/// A top list's entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopEntry {
    pub value: String,
    pub count: u64,
}

/// Challenges shown and solved in the period.
#[derive(Debug, Serialize, ToSchema)]
pub struct Challenges {
    pub shown: u64,
    pub solved: u64,
}

/// The top lists of the period (of the whole hours it touches).
#[derive(Debug, Serialize, ToSchema)]
pub struct Tops {
    pub paths: Vec<TopEntry>,
    pub user_agents: Vec<TopEntry>,
    /// Client networks: /24 for IPv4, /48 for IPv6.
    pub networks: Vec<TopEntry>,
    /// The deciding component and its reason.
    pub deciders: Vec<TopEntry>,
}

/// A website's traffic over a period, counted by every gateway.
#[derive(Debug, Serialize, ToSchema)]
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
    reachable(&api, &caller, &domain).await?;
    let range = parameters.get("range").map_or("hour", String::as_str);
    let (resolution, step, steps) = match range {
        "hour" => (Resolution::Minute, 60, 60),
        "week" => (Resolution::Hour, 3600, 7 * 24),
        other => {
            return Err(ApiError::bad_request(format!(
                "`range` is `hour` or `week`, not `{}`",
                botgate_model::names::shorten(other)
            ))
            .on("range"));
        }
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
    Ok(Json(Statistics {
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
    }))
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
    reachable(&api, &caller, &domain).await?;
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
