//! The query of list calls: `after` (the cursor a page's `next` gave), `limit`, and
//! for websites `user_id`; anything else is refused by name.

use crate::error::ApiError;
use botgate_model::{UserView, WebsiteView};
use serde::Serialize;
use utoipa::ToSchema;

/// Items per page when `limit` is not sent.
pub const DEFAULT_LIMIT: usize = 100;
/// The most items a page holds.
pub const MAX_LIMIT: usize = 1000;

/// A list call's query.
///
/// The handlers' `params(...)` annotations document these for OpenAPI.
#[derive(Debug, Default)]
pub struct ListQuery {
    /// Start after this item: the `next` of the previous page.
    pub after: Option<String>,
    /// Items per page, 1 to 1000; 100 when not sent.
    pub limit: Option<usize>,
    /// Only this user's websites (website listing only).
    pub user_id: Option<String>,
}

impl ListQuery {
    /// Parses a raw query string; `user_id` only when `with_user` is set.
    pub fn parse(raw: Option<&str>, with_user: bool) -> Result<ListQuery, ApiError> {
        let mut query = ListQuery::default();
        for (key, value) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            match key.as_ref() {
                "after" => query.after = Some(value.into_owned()),
                "user_id" if with_user => query.user_id = Some(value.into_owned()),
                "limit" => {
                    let limit = value
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=MAX_LIMIT).contains(n));
                    query.limit = Some(limit.ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "`limit` must be a whole number from 1 to {MAX_LIMIT}"
                        ))
                        .on("limit")
                    })?);
                }
                other => {
                    let known = if with_user {
                        "`after`, `limit` and `user_id`"
                    } else {
                        "`after` and `limit`"
                    };
                    return Err(ApiError::bad_request(format!(
                        "unknown query parameter `{}`; the parameters are {known}",
                        botgate_model::names::shorten(other)
                    ))
                    .on(botgate_model::names::shorten(other)));
                }
            }
        }
        Ok(query)
    }

    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIMIT)
    }
}

/// A page of users.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserPage {
    pub items: Vec<UserView>,
    /// Pass as `after` for the next page; `null` on the last page.
    pub next: Option<String>,
}

/// A page of websites.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebsitePage {
    pub items: Vec<WebsiteView>,
    /// Pass as `after` for the next page; `null` on the last page.
    pub next: Option<String>,
}
