//! `/v1.0/website`: create, retrieve, update (only what is sent changes), list and
//! delete websites, within the caller's tenancy.

use crate::Api;
use crate::auth::Caller;
use crate::bodies::{WebsiteBody, WebsiteCreate, WebsiteRequest};
use crate::error::ApiError;
use crate::listing::{ListQuery, WebsitePage};
use crate::payload::Payload;
use crate::webhooks;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use botgate_model::report::Report;
use botgate_model::{
    CertsIssuer, Domain, KNOWN_RULESETS, PartnerName, Status, UserId, Website, WebsiteView,
};
use botgate_store::{
    AccountStore, RulesetStore, StoreError, WebsiteLimits, WebsiteRecord, WebsiteStore,
};
use std::sync::Arc;

/// The `status_reason` of a website until the provisioner's first DNS check.
const WAITING_FOR_DNS: &str = "waiting for the domain and subdomains to resolve to the gateway";

/// What a website waits for first when its setup begins.
fn setup_reason(api: &Api) -> String {
    if api.config.dns_check {
        WAITING_FOR_DNS
    } else {
        "waiting for a certificate"
    }
    .to_owned()
}

/// Conditional writes retried after a concurrent change before giving up with 409.
const UPDATE_ATTEMPTS: usize = 8;

/// The fields a user key may send in an update: the dashboard changes settings and
/// uploads the website's own certificate.
const USER_KEY_FIELDS: [&str; 3] = ["domain", "settings", "certificate"];

/// The most different `callbackUrl`s a website in `setup` collects for the end of its
/// work; sending one it holds already adds nothing.
pub const MAX_PENDING_CALLBACKS: usize = 16;

/// The refusal of a `callbackUrl` past the most the partner's websites in `setup` may
/// hold ([`botgate_webhooks::HELD_PER_PARTNER`]): nothing of the request is written.
fn callbacks_full() -> ApiError {
    webhooks::callback_refused(format!(
        "{} `callbackUrl`s wait for this partner's websites to leave `setup` already, the \
         most allowed; nothing was changed: send the request without `callbackUrl`, or \
         again once some of that work has finished",
        botgate_webhooks::HELD_PER_PARTNER
    ))
}

pub(crate) fn domain(domain: &str) -> Result<Domain, ApiError> {
    Domain::parse(domain).map_err(|invalid| ApiError::from(invalid.at("domain")))
}

/// Refuses switching on a rule set of another name than the nine (one `before` did not
/// have on) that no component has: run by this gateway or pushed to the store.
async fn check_rulesets(
    api: &Api,
    before: Option<&Website>,
    after: &Website,
) -> Result<(), ApiError> {
    let unknown: Vec<&str> = after
        .settings
        .rulesets
        .others()
        .filter(|name| !before.is_some_and(|b| b.settings.rulesets.enabled(name)))
        .filter(|name| !api.config.rule_components.runs(name))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let pushed = api
        .store
        .pushed_rulesets()
        .await
        .map_err(|e| ApiError::from_store(e, "settings.rulesets"))?;
    let missing = unknown
        .into_iter()
        .find(|name| !pushed.records.iter().any(|p| p.name == *name));
    match missing {
        None => Ok(()),
        Some(name) => Err(ApiError::unprocessable(format!(
            "no rule component named `{name}` runs on this gateway or was pushed to its \
             store; the specification's rule sets are {}",
            KNOWN_RULESETS.join(", ")
        ))
        .on(format!("settings.rulesets.{name}"))),
    }
}

/// Refuses a website that names a host the gateway serves itself (a mounted service),
/// as if another website held it.
fn check_reserved(api: &Api, website: &Website) -> Result<(), ApiError> {
    let domain = website.domain.as_str();
    for host in website.host_names() {
        if api.config.reserved_hosts.contains(&host) {
            let field = if host == domain {
                "domain"
            } else {
                "subdomain"
            };
            return Err(
                ApiError::new(StatusCode::CONFLICT, format!("`{host}` already exists")).on(field),
            );
        }
    }
    Ok(())
}

/// Refuses a website whose origins the gateway's origin policy does not allow.
fn check_origins(api: &Api, website: &Website) -> Result<(), ApiError> {
    let policy = api.config.origins.get();
    for ip in &website.ip {
        if let Err(refusal) = policy.check(*ip) {
            return Err(
                ApiError::unprocessable(format!("`{ip}` cannot be an origin: {refusal}")).on("ip"),
            );
        }
    }
    Ok(())
}

/// Refuses (429, naming the limit) a change that would start a certificate issuance
/// over a limit: the partner's, the website's, and with `by_user` that user's own
/// key's. Counted only once the change is written ([`record_issuance`]), so a refused
/// or failed request costs nobody an issuance; concurrent requests may pass the check
/// together and go over by as many.
async fn check_issuance(
    api: &Api,
    partner: &PartnerName,
    domain: &Domain,
    by_user: Option<&UserId>,
) -> Result<(), ApiError> {
    let now = botgate_webhooks::now_ms();
    let field = "settings.loadbalancer.certs_issuer";
    let full = api
        .config
        .issuance
        .full_window(api.store.as_ref(), partner, domain, by_user, now)
        .await
        .map_err(|e| ApiError::from_store(e, field))?;
    match full {
        None => Ok(()),
        Some(window) => Err(ApiError {
            retry_after: Some(window.ends_ms.saturating_sub(now).div_ceil(1000)),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "this change would start a certificate issuance, and the limit of {} per \
                     {} is reached; retry after the time in `Retry-After`",
                    window.limit, window.per
                ),
            )
            .on(field)
        }),
    }
}

/// Counts one certificate issuance, written already, in its windows.
async fn record_issuance(
    api: &Api,
    partner: &PartnerName,
    domain: &Domain,
    by_user: Option<&UserId>,
) {
    let now = botgate_webhooks::now_ms();
    // Checked before the change was written; what it passes now is past.
    let counted = api
        .config
        .issuance
        .take(api.store.as_ref(), partner, domain, by_user, now)
        .await;
    if let Err(err) = counted {
        tracing::warn!(error = %Report(&err), %domain, "cannot count a certificate issuance");
    }
}

fn no_such_website(domain: &Domain) -> ApiError {
    ApiError::not_found(format!("no website `{domain}`")).on("domain")
}

/// The website of `domain` if the caller reaches it; 404 otherwise, exactly as if it
/// did not exist.
pub(crate) async fn reachable(
    api: &Api,
    caller: &Caller,
    domain: &Domain,
) -> Result<WebsiteRecord, ApiError> {
    match api.store.website(domain).await {
        Ok(found) => found
            .filter(|record| caller.reaches(record.owner()))
            .ok_or_else(|| no_such_website(domain)),
        // Only its owner learns that the record exists and cannot be read.
        Err(unreadable @ StoreError::Corrupt { .. }) => {
            let owner = api.store.website_owner(domain).await.ok().flatten();
            let owns = owner.is_some_and(|owner| caller.reaches(owner.as_owner()));
            Err(if owns {
                ApiError::from_store(unreadable, "domain")
            } else {
                no_such_website(domain)
            })
        }
        Err(error) => Err(ApiError::from_store(error, "domain")),
    }
}

/// The owner of the website of `domain` if the caller reaches it (the record itself is
/// not read); 404 otherwise, exactly as if it did not exist.
pub(crate) async fn reachable_owner(
    api: &Api,
    caller: &Caller,
    domain: &Domain,
) -> Result<botgate_store::WebsiteOwner, ApiError> {
    api.store
        .website_owner(domain)
        .await
        .map_err(|error| ApiError::from_store(error, "domain"))?
        .filter(|owner| caller.reaches(owner.as_owner()))
        .ok_or_else(|| no_such_website(domain))
}

/// Creates a website under one of the partner's users.
#[utoipa::path(post, path = "/v1.0/website", tag = "websites",
    request_body(content(
        (WebsiteCreate = "application/json"),
        (WebsiteCreate = "application/x-www-form-urlencoded"),
    )),
    responses((status = 201, description = "The website as stored.", body = WebsiteView)))]
pub async fn create_website(
    State(api): State<Arc<Api>>,
    caller: Caller,
    payload: Payload,
) -> Result<(StatusCode, Json<WebsiteView>), ApiError> {
    let partner = caller.require_partner("creating websites")?;
    let WebsiteRequest {
        input,
        callback_url,
    } = payload.parse::<WebsiteBody>()?.into_request()?;
    let mut website = api
        .patterns
        .spend(partner.name.as_str(), || Website::create(input))??;
    check_reserved(&api, &website)?;
    check_rulesets(&api, None, &website).await?;
    check_origins(&api, &website)?;
    let wants_certificate =
        api.config.acme && website.settings.loadbalancer.certs_issuer == CertsIssuer::Acme;
    // A paused website's work waits until it is asked to be online.
    if api.config.dns_check || wants_certificate {
        website.begin_setup(botgate_webhooks::now_ms(), setup_reason(&api));
    }
    let issues = wants_certificate && website.status != Status::Paused;
    if issues {
        check_issuance(&api, &partner.name, &website.domain, None).await?;
    }
    if let Some(pending) = &mut website.pending {
        pending.issue_certificate |= wants_certificate;
        if let Some(url) = &callback_url {
            pending.callbacks.push(url.to_string());
        }
    }
    if callback_url.is_some() {
        webhooks::check_room(&api, &partner.name).await?;
    }
    let limits = WebsiteLimits {
        websites: api.config.quotas.websites,
        held_callbacks: botgate_webhooks::HELD_PER_PARTNER,
    };
    let record = api
        .store
        .create_website_within(&partner.name, &website, limits)
        .await
        .map_err(|e| match e {
            StoreError::NotFound(_) => ApiError::unprocessable(format!(
                "no user `{}`; create the user first",
                website.user_id
            ))
            .on("user_id"),
            StoreError::Full(_) => callbacks_full(),
            e => ApiError::from_store(e, "domain"),
        })?;
    if issues {
        record_issuance(&api, &partner.name, &record.website.domain, None).await;
    }
    let view = record.website.view();
    // Nothing pending: the change has finished, and the webhook goes now.
    if let (None, Some(url)) = (&record.website.pending, &callback_url) {
        webhooks::queue(&api, &partner.name, url, &view).await?;
    }
    Ok((StatusCode::CREATED, Json(view)))
}

/// Retrieves a website.
#[utoipa::path(get, path = "/v1.0/website/{domain}", tag = "websites",
    params(("domain" = String, Path, description = "The website's domain (Unicode or ASCII).")),
    responses((status = 200, description = "The website.", body = WebsiteView)))]
pub async fn get_website(
    State(api): State<Arc<Api>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<WebsiteView>, ApiError> {
    let record = reachable(&api, &caller, &domain(&name)?).await?;
    Ok(Json(record.website.view()))
}

/// Updates a website: only the fields sent change, and only the keys sent inside
/// `settings`. A user key may change `settings` only.
#[utoipa::path(put, path = "/v1.0/website/{domain}", tag = "websites",
    params(("domain" = String, Path, description = "The website's domain (Unicode or ASCII).")),
    request_body(content(
        (WebsiteBody = "application/json"),
        (WebsiteBody = "application/x-www-form-urlencoded"),
    )),
    responses((status = 200, description = "The website as stored after the change.", body = WebsiteView)))]
pub async fn update_website(
    State(api): State<Arc<Api>>,
    caller: Caller,
    Path(name): Path<String>,
    payload: Payload,
) -> Result<Json<WebsiteView>, ApiError> {
    let domain = domain(&name)?;
    let request = payload.parse::<WebsiteBody>()?.into_request()?;
    if let Caller::User(_) = caller
        && let Some(field) = request
            .fields_sent()
            .into_iter()
            .find(|field| !USER_KEY_FIELDS.contains(field))
    {
        return Err(ApiError::forbidden(format!(
            "a user key changes `settings` and the `certificate` only; `{field}` needs the \
             partner's key"
        ))
        .on(field));
    }
    // A user's own key counts its issuances in its own window besides its partner's.
    let by_user = match &caller {
        Caller::User(user) => Some(&user.id),
        Caller::Partner(_) => None,
    };
    for _ in 0..UPDATE_ATTEMPTS {
        let record = reachable(&api, &caller, &domain).await?;
        let mut website = record.website.clone();
        api.patterns.spend(record.partner.as_str(), || {
            website.apply(request.input.clone())
        })??;
        check_rulesets(&api, Some(&record.website), &website).await?;
        if request.input.ip.is_some() || request.input.ipv6.is_some() {
            check_origins(&api, &website)?;
        }
        // New names wait for DNS again; so does a website in error asked to be online.
        let retry = record.website.status == Status::Error
            && request.input.status.as_deref().map(str::trim) == Some("online");
        let names_changed = website.host_names() != record.website.host_names();
        if names_changed {
            check_reserved(&api, &website)?;
        }
        let acme = website.settings.loadbalancer.certs_issuer == CertsIssuer::Acme;
        let to_acme =
            acme && record.website.settings.loadbalancer.certs_issuer != CertsIssuer::Acme;
        let needs_dns = api.config.dns_check && (names_changed || retry);
        let needs_certificate = api.config.acme && acme && (to_acme || names_changed || retry);
        // A new issuance (one already waiting is not counted again).
        let waiting = record
            .website
            .pending
            .as_ref()
            .is_some_and(|pending| pending.issue_certificate);
        // Work that waited while the website was paused starts when it is online again
        // (a paused website's issuance is counted then).
        let resumed = record.website.status == Status::Paused && website.status == Status::Setup;
        let issues = website.status != Status::Paused
            && ((needs_certificate && !waiting) || (resumed && waiting));
        if needs_dns || needs_certificate || resumed {
            website.begin_setup(botgate_webhooks::now_ms(), setup_reason(&api));
        }
        if issues {
            check_issuance(&api, &record.partner, &website.domain, by_user).await?;
        }
        // A website held in `setup`, asked to be online with its work done, is online.
        let released = website.settle();
        if let Some(pending) = &mut website.pending {
            pending.issue_certificate |= needs_certificate;
            if let Some(url) = request.callback_url.as_ref().map(url::Url::as_str)
                && !pending.callbacks.iter().any(|held| held == url)
            {
                if pending.callbacks.len() >= MAX_PENDING_CALLBACKS {
                    return Err(ApiError::unprocessable(format!(
                        "{MAX_PENDING_CALLBACKS} different `callbackUrl`s wait for this \
                         website's change to finish already; send one of them, or none"
                    ))
                    .on("callbackUrl"));
                }
                pending.callbacks.push(url.to_owned());
            }
        }
        if request.callback_url.is_some() {
            webhooks::check_room(&api, &record.partner).await?;
        }
        let stored = if website == record.website {
            record
        } else {
            let written = api.store.update_website_within(
                &website,
                record.revision,
                botgate_webhooks::HELD_PER_PARTNER,
            );
            match written.await {
                Ok(updated) => {
                    if issues {
                        record_issuance(&api, &updated.partner, &domain, by_user).await;
                    }
                    updated
                }
                Err(StoreError::Stale(_)) => continue,
                Err(StoreError::NotFound(_)) => return Err(no_such_website(&domain)),
                Err(StoreError::Full(_)) => return Err(callbacks_full()),
                Err(e) => return Err(ApiError::from_store(e, "domain")),
            }
        };
        let view = stored.website.view();
        for url in &released {
            if let Ok(url) = url::Url::parse(url) {
                webhooks::queue_accepted(&api, &stored.partner, &url, &view).await?;
            }
        }
        if let (None, Some(url)) = (&stored.website.pending, &request.callback_url) {
            webhooks::queue(&api, &stored.partner, url, &view).await?;
        }
        return Ok(Json(view));
    }
    Err(ApiError::from_store(
        StoreError::Stale(format!("website {domain}")),
        "domain",
    ))
}

/// Lists the caller's websites in domain order, a page at a time: a partner's (all,
/// or one user's), or a user key's own.
#[utoipa::path(get, path = "/v1.0/website", tag = "websites",
    params(("after" = Option<String>, Query, description = "The `next` of the previous page."),
           ("limit" = Option<usize>, Query, minimum = 1, maximum = 1000, description = "Websites per page (100 when not sent)."),
           ("user_id" = Option<String>, Query, description = "Only this user's websites.")),
    responses((status = 200, description = "A page of websites.", body = WebsitePage)))]
pub async fn list_websites(
    State(api): State<Arc<Api>>,
    caller: Caller,
    RawQuery(query): RawQuery,
) -> Result<Json<WebsitePage>, ApiError> {
    let query = ListQuery::parse(query.as_deref(), true)?;
    let asked = query
        .user_id
        .as_deref()
        .map(|id| UserId::parse(id).map_err(|invalid| ApiError::from(invalid.at("user_id"))))
        .transpose()?;
    let no_such_user = |id: &UserId| ApiError::not_found(format!("no user `{id}`")).on("user_id");
    let user = match (&caller, asked) {
        (Caller::User(user), Some(asked)) if asked != user.id => return Err(no_such_user(&asked)),
        (Caller::User(user), _) => Some(user.id.clone()),
        (Caller::Partner(partner), Some(asked)) => {
            let exists = api
                .store
                .user(&partner.name, &asked)
                .await
                .map_err(|e| ApiError::from_store(e, "user_id"))?
                .is_some();
            if !exists {
                return Err(no_such_user(&asked));
            }
            Some(asked)
        }
        (Caller::Partner(_), None) => None,
    };
    let page = api
        .store
        .websites(
            caller.partner(),
            user.as_ref(),
            query.after.as_deref(),
            query.limit(),
        )
        .await
        .map_err(|e| ApiError::from_store(e, "after"))?;
    Ok(Json(WebsitePage {
        items: page.items.iter().map(|r| r.website.view()).collect(),
        next: page.next,
    }))
}

/// Deletes a website; the answer is the website as it was.
#[utoipa::path(delete, path = "/v1.0/website/{domain}", tag = "websites",
    params(("domain" = String, Path, description = "The website's domain (Unicode or ASCII).")),
    responses((status = 200, description = "The website is deleted; this is what it was.", body = WebsiteView)))]
pub async fn delete_website(
    State(api): State<Arc<Api>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<WebsiteView>, ApiError> {
    caller.require_partner("deleting websites")?;
    let domain = domain(&name)?;
    for _ in 0..UPDATE_ATTEMPTS {
        let record = reachable(&api, &caller, &domain).await?;
        // Only the website just read: one changed since is read (and its owner
        // checked) again, and a website of the name created since by another owner is
        // never this caller's to delete.
        match api
            .store
            .delete_website(&domain, Some(record.revision))
            .await
        {
            Ok(()) => return Ok(Json(record.website.view())),
            Err(StoreError::Stale(_)) => continue,
            Err(StoreError::NotFound(_)) => return Err(no_such_website(&domain)),
            Err(e) => return Err(ApiError::from_store(e, "domain")),
        }
    }
    Err(ApiError::from_store(
        StoreError::Stale(format!("website {domain}")),
        "domain",
    ))
}
