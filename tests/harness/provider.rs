//! A fake infrastructure provider for the failover script: the floating-IP endpoints of
//! Hetzner Cloud, DigitalOcean and Vultr (and a generic one, `/generic/...`) on a
//! loopback port, keeping where the IP points, recording every call, checking the
//! Bearer token, and failing on demand.

use crate::receiver::{Received, serve_recording};
use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// What the fake provider holds.
#[derive(Debug, Default)]
struct State {
    /// The instance the floating IP points to.
    assigned: Option<String>,
    /// Calls still to answer with `busy_status`.
    unavailable: u32,
    /// What those calls are answered with (503 unless told).
    busy_status: Option<u16>,
    /// Answer every call with this status instead (a permanent refusal).
    refuse: Option<u16>,
    /// Hetzner's assignments under way: the action's id, the instance, and whether it
    /// was looked at (it succeeds at the second look).
    actions: Vec<(u64, String, bool)>,
    /// Hetzner's actions end in `error`, the assignment unchanged.
    actions_fail: bool,
}

/// A running fake provider; stops when dropped.
pub struct FakeProvider {
    pub address: SocketAddr,
    token: String,
    state: Arc<Mutex<State>>,
    received: Arc<Mutex<Vec<Received>>>,
    _runtime: tokio::runtime::Runtime,
}

impl FakeProvider {
    /// A provider that accepts `token`, with the floating IP assigned to `assigned`.
    pub fn start(token: &str, assigned: Option<&str>) -> anyhow::Result<FakeProvider> {
        let state = Arc::new(Mutex::new(State {
            assigned: assigned.map(str::to_owned),
            ..State::default()
        }));
        let (shared, bearer) = (state.clone(), format!("Bearer {token}"));
        let respond = move |request: &Received| {
            let mut state = shared.lock().unwrap_or_else(|e| e.into_inner());
            answer(&mut state, &bearer, request)
        };
        let (address, received, runtime) = serve_recording(0, Arc::new(respond))?;
        Ok(FakeProvider {
            address,
            token: token.to_owned(),
            state,
            received,
            _runtime: runtime,
        })
    }

    /// `http://127.0.0.1:PORT`, the API base the script is given.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// The instance the floating IP points to now.
    pub fn assigned(&self) -> Option<String> {
        self.lock().assigned.clone()
    }

    /// Points the floating IP at `instance`, as someone using the provider's panel.
    pub fn assign(&self, instance: &str) {
        self.lock().assigned = Some(instance.to_owned());
    }

    /// Answers the next `calls` calls with 503.
    pub fn unavailable_for(&self, calls: u32) {
        self.busy_for(503, calls);
    }

    /// Answers the next `calls` calls with `status` (Hetzner's 423 while another action
    /// holds the floating IP, say).
    pub fn busy_for(&self, status: u16, calls: u32) {
        let mut state = self.lock();
        state.unavailable = calls;
        state.busy_status = Some(status);
    }

    /// Lets every later Hetzner action end in `error`.
    pub fn fail_actions(&self) {
        self.lock().actions_fail = true;
    }

    /// Answers every later call with `status`.
    pub fn refuse_with(&self, status: u16) {
        self.lock().refuse = Some(status);
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The calls that changed the assignment (every method but GET).
    pub fn assignments(&self) -> Vec<Received> {
        self.calls()
            .into_iter()
            .filter(|call| call.method != "GET")
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn json(status: u16, body: serde_json::Value) -> Response<Full<Bytes>> {
    let body = match status {
        204 => Bytes::new(),
        _ => Bytes::from(body.to_string()),
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// An instance id as the provider's JSON has it: a number when it is one.
fn id_value(id: &Option<String>) -> serde_json::Value {
    match id {
        None => serde_json::Value::Null,
        Some(id) => id
            .parse::<u64>()
            .map(serde_json::Value::from)
            .unwrap_or_else(|_| serde_json::Value::from(id.clone())),
    }
}

/// The id in a request body's `field`, as text.
fn body_id(request: &Received, field: &str) -> Option<String> {
    let body: serde_json::Value = serde_json::from_str(&request.body).ok()?;
    match &body[field] {
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

fn answer(state: &mut State, bearer: &str, request: &Received) -> Response<Full<Bytes>> {
    use serde_json::json;
    if request.headers.get("authorization").map(String::as_str) != Some(bearer) {
        return json(401, json!({"error": "unauthorized"}));
    }
    if let Some(status) = state.refuse {
        return json(status, json!({"error": "refused"}));
    }
    if state.unavailable > 0 {
        state.unavailable -= 1;
        return json(
            state.busy_status.unwrap_or(503),
            json!({"error": "unavailable"}),
        );
    }
    let path = request.path.as_str();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let get = request.method == "GET";
    let post = request.method == "POST";
    match segments.as_slice() {
        ["v1", "floating_ips", _] if get => json(
            200,
            json!({"floating_ip": {"server": id_value(&state.assigned)}}),
        ),
        // Hetzner assigns in an action, which runs until a look at it finds it done.
        ["v1", "floating_ips", _, "actions", "assign"] if post => {
            match body_id(request, "server") {
                Some(id) => {
                    let action = 7000 + state.actions.len() as u64;
                    state.actions.push((action, id, false));
                    json(
                        201,
                        json!({"action": {"id": action, "command": "assign_floating_ip",
                                          "status": "running"}}),
                    )
                }
                None => json(422, json!({"error": "server missing"})),
            }
        }
        ["v1", "floating_ips", "actions", action] if get => {
            let fail = state.actions_fail;
            let found = state
                .actions
                .iter_mut()
                .find(|(id, ..)| id.to_string() == *action);
            let (status, done_with) = match found {
                None => return json(404, json!({"error": "no such action"})),
                Some((_, _, looked)) if !*looked => {
                    *looked = true;
                    ("running", None)
                }
                Some(_) if fail => ("error", None),
                Some((_, instance, _)) => ("success", Some(instance.clone())),
            };
            if let Some(instance) = done_with {
                state.assigned = Some(instance);
            }
            let error = (status == "error")
                .then(|| json!({"code": "floating_ip_assign_failed", "message": "failed"}));
            json(
                200,
                json!({"action": {"id": action.parse::<u64>().unwrap_or(0), "status": status,
                                  "error": error}}),
            )
        }
        ["v2", "reserved_ips", _] if get => {
            let droplet = state
                .assigned
                .as_ref()
                .map(|_| json!({"id": id_value(&state.assigned)}));
            json(200, json!({"reserved_ip": {"droplet": droplet}}))
        }
        ["v2", "reserved_ips", _, "actions"] if post => {
            let assign = serde_json::from_str::<serde_json::Value>(&request.body)
                .is_ok_and(|body| body["type"] == "assign");
            match body_id(request, "droplet_id") {
                Some(id) if assign => {
                    state.assigned = Some(id);
                    json(201, json!({"action": {"type": "assign_ip"}}))
                }
                _ => json(422, json!({"error": "type assign and droplet_id wanted"})),
            }
        }
        ["v2", "reserved-ips", _] if get => json(
            200,
            json!({"reserved_ip": {"instance_id": state.assigned.clone().unwrap_or_default()}}),
        ),
        ["v2", "reserved-ips", _, "attach"] if post => match body_id(request, "instance_id") {
            Some(id) => {
                state.assigned = Some(id);
                json(204, json!({}))
            }
            None => json(422, json!({"error": "instance_id missing"})),
        },
        ["generic", _] if get => json(
            200,
            json!({"address": segments[1], "target": {"instance": id_value(&state.assigned)}}),
        ),
        ["generic", .., instance] if !get => {
            state.assigned = Some((*instance).to_owned());
            json(200, json!({"ok": true}))
        }
        _ => json(
            404,
            json!({"error": format!("no {} {path}", request.method)}),
        ),
    }
}
