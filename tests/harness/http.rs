//! A small blocking HTTP client for API tests: every status is an answer (not an
//! error), bodies are JSON or forms, and each reply keeps its status, headers and body.

use anyhow::{Context, Result};
use serde_json::Value;

/// A reply from the API.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub text: String,
}

impl Reply {
    /// The body as JSON (`Value::Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    /// A header's value, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What a request carries.
pub enum Body<'a> {
    None,
    Json(&'a Value),
    Form(&'a [(&'a str, &'a str)]),
    Raw(&'a str, &'a [u8]),
}

/// A client of one API base URL with an optional bearer key.
#[derive(Clone)]
pub struct Client {
    base: String,
    key: Option<String>,
    agent: ureq::Agent,
}

impl Client {
    pub fn new(base: &str, key: Option<&str>) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(std::time::Duration::from_secs(30)))
            .build()
            .into();
        Client {
            base: base.trim_end_matches('/').to_owned(),
            key: key.map(str::to_owned),
            agent,
        }
    }

    /// The same API with another key.
    pub fn with_key(&self, key: &str) -> Client {
        Client {
            key: Some(key.to_owned()),
            ..self.clone()
        }
    }

    /// Sends `method path` with `body`, and extra headers.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        body: Body<'_>,
        headers: &[(&str, &str)],
    ) -> Result<Reply> {
        let mut request = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(key) = &self.key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let bytes = match body {
            Body::None => Vec::new(),
            Body::Json(value) => {
                request = request.header("content-type", "application/json");
                serde_json::to_vec(value)?
            }
            Body::Form(pairs) => {
                request = request.header("content-type", "application/x-www-form-urlencoded");
                pairs
                    .iter()
                    .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
                    .collect::<Vec<_>>()
                    .join("&")
                    .into_bytes()
            }
            Body::Raw(content_type, bytes) => {
                request = request.header("content-type", content_type);
                bytes.to_vec()
            }
        };
        let mut response = self
            .agent
            .run(request.body(bytes)?)
            .with_context(|| format!("{method} {path}"))?;
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_owned()))
            .collect();
        Ok(Reply {
            status: response.status().as_u16(),
            headers,
            text: response.body_mut().read_to_string().unwrap_or_default(),
        })
    }

    pub fn get(&self, path: &str) -> Result<Reply> {
        self.send("GET", path, Body::None, &[])
    }

    pub fn delete(&self, path: &str) -> Result<Reply> {
        self.send("DELETE", path, Body::None, &[])
    }

    pub fn post_json(&self, path: &str, body: &Value) -> Result<Reply> {
        self.send("POST", path, Body::Json(body), &[])
    }

    pub fn put_json(&self, path: &str, body: &Value) -> Result<Reply> {
        self.send("PUT", path, Body::Json(body), &[])
    }

    pub fn post_form(&self, path: &str, pairs: &[(&str, &str)]) -> Result<Reply> {
        self.send("POST", path, Body::Form(pairs), &[])
    }

    pub fn put_form(&self, path: &str, pairs: &[(&str, &str)]) -> Result<Reply> {
        self.send("PUT", path, Body::Form(pairs), &[])
    }
}

/// Percent-encodes a form value (everything but unreserved characters).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A self-signed certificate and its key for `names`, PEM.
pub fn self_signed(names: &[&str]) -> Result<(String, String)> {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let certified = rcgen::generate_simple_self_signed(names)?;
    Ok((certified.cert.pem(), certified.signing_key.serialize_pem()))
}
