//! Per-website traffic for the dashboard: every decided request is counted (category
//! and action, challenges, top paths, user agents, client networks and deciding
//! reasons) and kept among the latest events, in the recording thread's own buffer,
//! which [`TrafficRecorder::take`] empties for the store every few seconds.
//!
//! The request path takes only its own thread's lock (nobody else's but the flush's),
//! and allocates only for a website, top-list entry or event slot it has not seen since
//! the last flush. Each buffer is bounded: [`TOP_ENTRIES`] entries per list and
//! [`EVENT_SLOTS`] events per website between flushes.

use super::outcome::Outcome;
use botgate_model::Category;
use botgate_store::{Counts, Owner, TrafficEvent, WebsiteOwner};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Top-list entries kept per list, website and thread between flushes; later new
/// entries are not counted in that list.
pub const TOP_ENTRIES: usize = 64;
/// Latest events kept per website and thread between flushes.
pub const EVENT_SLOTS: usize = 16;
/// The longest path and user agent kept, in bytes.
const LONGEST_TEXT: usize = 120;

/// The outcomes, and one more column: `captcha_passed`, a `captcha` decision for a
/// client that holds a pass (served, not challenged).
const OUTCOMES: usize = Outcome::ALL.len() + 1;
const CAPTCHA_PASSED: usize = Outcome::ALL.len();

fn outcome_name(column: usize) -> &'static str {
    Outcome::ALL
        .get(column)
        .map_or("captcha_passed", |outcome| outcome.as_str())
}
/// Category rows, the last for "no decision".
const CATEGORY_ROWS: usize = Category::ALL.len() + 1;

/// One request, as the recorder takes it.
pub struct Decided<'a> {
    pub website: &'a str,
    /// Whose website it was when the request was answered: the store keeps the counts
    /// only while the website still has this owner.
    pub owner: Owner<'a>,
    /// When it was answered, in milliseconds since the Unix epoch.
    pub time_ms: u64,
    pub category: Option<Category>,
    pub outcome: Outcome,
    pub decider: Option<&'a str>,
    pub reason: &'a str,
    pub client: std::net::IpAddr,
    pub client_text: &'a str,
    pub method: &'a str,
    pub target: &'a str,
    pub user_agent: Option<&'a [u8]>,
    pub status: u16,
    /// Whether the answer came from the origin or the cache, not the gateway.
    pub passed_on: bool,
}

/// An event slot, reused in place.
#[derive(Default)]
struct EventSlot {
    time_ms: u64,
    client: String,
    method: String,
    path: String,
    category: Option<Category>,
    /// A column of [`SiteMinute::decisions`].
    outcome: usize,
    decider: String,
    reason: String,
    status: u16,
}

/// One website's traffic in one minute, on one thread, for one owner.
struct SiteMinute {
    minute: u64,
    owner: WebsiteOwner,
    decisions: [[u64; OUTCOMES]; CATEGORY_ROWS],
    challenges_shown: u64,
    challenges_solved: u64,
    /// Paths, user agents, networks, deciders.
    tops: [TopList; 4],
    events: Vec<EventSlot>,
    /// The slot the next event goes to, once all are used.
    next_event: usize,
}

impl SiteMinute {
    fn new(minute: u64, owner: Owner<'_>) -> SiteMinute {
        SiteMinute {
            minute,
            owner: owner.into(),
            decisions: [[0; OUTCOMES]; CATEGORY_ROWS],
            challenges_shown: 0,
            challenges_solved: 0,
            tops: Default::default(),
            events: Vec::new(),
            next_event: 0,
        }
    }
}

#[derive(Default)]
struct ThreadBuffer {
    /// By website, one per owner it had since the last flush (nearly always one).
    sites: HashMap<Box<str>, Vec<SiteMinute>, foldhash::fast::RandomState>,
    /// Minutes that ended (or whose website changed hands) before the flush took them.
    ended: Vec<(Box<str>, SiteMinute)>,
    scratch: String,
}

/// One top list's counts by entry. (foldhash: the entries come from clients, but a list
/// holds at most [`TOP_ENTRIES`], so colliding keys cannot make a look-up long.)
type TopList = HashMap<Box<str>, u64, foldhash::fast::RandomState>;

/// Counts one request in `top`, unless the list is full and the entry new.
fn count_top(top: &mut TopList, entry: &str) {
    if let Some(count) = top.get_mut(entry) {
        *count += 1;
    } else if top.len() < TOP_ENTRIES {
        top.insert(entry.into(), 1);
    }
}

/// `text` cut to at most [`LONGEST_TEXT`] bytes, on a character boundary.
fn shortened(text: &str) -> &str {
    if text.len() <= LONGEST_TEXT {
        return text;
    }
    let mut end = LONGEST_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The client's network as the top list shows it: a /24 for IPv4, a /48 for IPv6.
fn network(client: std::net::IpAddr, out: &mut String) {
    use std::fmt::Write as _;
    out.clear();
    let _ = match client {
        std::net::IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            write!(out, "{a}.{b}.{c}.0/24")
        }
        std::net::IpAddr::V6(v6) => {
            let s = v6.segments();
            write!(out, "{:x}:{:x}:{:x}::/48", s[0], s[1], s[2])
        }
    };
}

fn replace(slot: &mut String, text: &str) {
    slot.clear();
    slot.push_str(text);
}

impl ThreadBuffer {
    fn record(&mut self, request: &Decided<'_>) {
        let minute = request.time_ms / 60_000;
        let owners = match self.sites.get_mut(request.website) {
            Some(owners) => owners,
            None => self.sites.entry(request.website.into()).or_default(),
        };
        let site = match owners
            .iter()
            .position(|site| site.owner.as_owner() == request.owner)
        {
            Some(at) => {
                let site = &mut owners[at];
                if site.minute != minute {
                    let ended = std::mem::replace(site, SiteMinute::new(minute, request.owner));
                    self.ended.push((request.website.into(), ended));
                }
                site
            }
            None => {
                owners.push(SiteMinute::new(minute, request.owner));
                let last = owners.len() - 1;
                &mut owners[last]
            }
        };
        let row = request.category.map_or(Category::ALL.len(), |category| {
            Category::ALL
                .iter()
                .position(|each| *each == category)
                .unwrap_or(Category::ALL.len())
        });
        let column = match request.outcome {
            Outcome::Captcha if request.passed_on => CAPTCHA_PASSED,
            outcome => outcome as usize,
        };
        site.decisions[row][column] += 1;
        match column {
            CAPTCHA_PASSED => {}
            _ if request.outcome == Outcome::Captcha => site.challenges_shown += 1,
            _ if request.outcome == Outcome::ChallengeSolved => site.challenges_solved += 1,
            _ => {}
        }
        let path = request.target.split('?').next().unwrap_or("/");
        count_top(&mut site.tops[0], shortened(path));
        if let Some(agent) = request.user_agent.and_then(|a| std::str::from_utf8(a).ok()) {
            count_top(&mut site.tops[1], shortened(agent));
        }
        network(request.client, &mut self.scratch);
        count_top(&mut site.tops[2], &self.scratch);
        if let Some(decider) = request.decider {
            self.scratch.clear();
            self.scratch.push_str(decider);
            self.scratch.push(' ');
            self.scratch.push_str(request.reason);
            count_top(&mut site.tops[3], &self.scratch);
        }
        let slot = if site.events.len() < EVENT_SLOTS {
            site.events.push(EventSlot::default());
            site.events.last_mut()
        } else {
            let at = site.next_event;
            site.next_event = (at + 1) % EVENT_SLOTS;
            site.events.get_mut(at)
        };
        if let Some(slot) = slot {
            slot.time_ms = request.time_ms;
            replace(&mut slot.client, request.client_text);
            replace(&mut slot.method, request.method);
            replace(
                &mut slot.path,
                shortened(&botgate_model::dashboard::redact_api_key(request.target)),
            );
            slot.category = request.category;
            slot.outcome = column;
            replace(&mut slot.decider, request.decider.unwrap_or(""));
            replace(&mut slot.reason, request.reason);
            slot.status = request.status;
        }
    }
}

/// One website's traffic in one minute, for one owner, ready for the store.
#[derive(Debug, PartialEq)]
pub struct Flushed {
    pub website: String,
    pub owner: WebsiteOwner,
    pub minute: u64,
    pub counts: Counts,
    /// Oldest first.
    pub events: Vec<TrafficEvent>,
}

fn flushed(website: &str, site: SiteMinute) -> Flushed {
    let mut counts = Counts::default();
    for (row, outcomes) in site.decisions.iter().enumerate() {
        let category = Category::ALL.get(row).map_or("none", |c| c.as_str());
        for (index, count) in outcomes.iter().enumerate() {
            if *count > 0 {
                let outcome = outcome_name(index);
                counts.add(&format!("c:{category}:{outcome}"), *count);
            }
        }
    }
    if site.challenges_shown > 0 {
        counts.add("ch:shown", site.challenges_shown);
    }
    if site.challenges_solved > 0 {
        counts.add("ch:solved", site.challenges_solved);
    }
    for (prefix, top) in ["p:", "u:", "n:", "d:"].iter().zip(&site.tops) {
        for (entry, count) in top {
            counts.add(&format!("{prefix}{entry}"), *count);
        }
    }
    let mut events: Vec<TrafficEvent> = site
        .events
        .into_iter()
        .map(|slot| TrafficEvent {
            time: slot.time_ms,
            client: slot.client,
            method: slot.method,
            path: slot.path,
            category: slot.category.map(|c| c.as_str().to_owned()),
            action: outcome_name(slot.outcome).to_owned(),
            decider: (!slot.decider.is_empty()).then_some(slot.decider),
            reason: slot.reason,
            status: slot.status,
        })
        .collect();
    events.sort_by_key(|event| event.time);
    Flushed {
        website: website.to_owned(),
        owner: site.owner,
        minute: site.minute,
        counts,
        events,
    }
}

/// Every data-plane thread's buffer, for one gateway.
pub struct TrafficRecorder {
    id: usize,
    buffers: Mutex<Vec<Arc<Mutex<ThreadBuffer>>>>,
}

thread_local! {
    /// This thread's buffers, by recorder (a process may run several gateways).
    static BUFFERS: RefCell<Vec<(usize, Arc<Mutex<ThreadBuffer>>)>> = const { RefCell::new(Vec::new()) };
}

static NEXT_RECORDER: AtomicUsize = AtomicUsize::new(0);

impl Default for TrafficRecorder {
    fn default() -> Self {
        TrafficRecorder {
            id: NEXT_RECORDER.fetch_add(1, Ordering::Relaxed),
            buffers: Mutex::default(),
        }
    }
}

impl TrafficRecorder {
    /// Counts one request of a website in this thread's buffer.
    pub fn record(&self, request: &Decided<'_>) {
        BUFFERS.with(|buffers| {
            let mut buffers = buffers.borrow_mut();
            let at = match buffers.iter().position(|(id, _)| *id == self.id) {
                Some(at) => at,
                None => {
                    let buffer = Arc::new(Mutex::new(ThreadBuffer::default()));
                    self.buffers
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(buffer.clone());
                    buffers.push((self.id, buffer));
                    buffers.len() - 1
                }
            };
            buffers[at]
                .1
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(request);
        });
    }

    /// Everything recorded since the last call, by website and minute, every
    /// thread's counts of the same website and minute added together.
    pub fn take(&self) -> Vec<Flushed> {
        let buffers: Vec<_> = self
            .buffers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut merged: HashMap<(String, u64, WebsiteOwner), Flushed> = HashMap::new();
        for buffer in buffers {
            let taken = std::mem::take(&mut *buffer.lock().unwrap_or_else(|e| e.into_inner()));
            let current = taken.sites.into_iter().flat_map(|(website, owners)| {
                owners.into_iter().map(move |site| (website.clone(), site))
            });
            let all = taken.ended.into_iter().chain(current);
            for (website, site) in all {
                let one = flushed(&website, site);
                match merged.entry((one.website.clone(), one.minute, one.owner.clone())) {
                    std::collections::hash_map::Entry::Occupied(mut into) => {
                        let into = into.get_mut();
                        for (field, count) in one.counts.0 {
                            into.counts.add(&field, count);
                        }
                        into.events.extend(one.events);
                        into.events.sort_by_key(|event| event.time);
                    }
                    std::collections::hash_map::Entry::Vacant(slot) => {
                        slot.insert(one);
                    }
                }
            }
        }
        let mut flushed: Vec<Flushed> = merged.into_values().collect();
        flushed.sort_by(|a, b| {
            (&a.website, a.minute, &a.owner).cmp(&(&b.website, b.minute, &b.owner))
        });
        flushed
    }
}

/// Writes what `gateway` recorded to `store` every `every`, and once more when
/// `stopped` resolves. A write that fails is logged and its counts dropped: statistics
/// never hold up the gateway.
pub async fn flush_every(
    gateway: Arc<super::Gateway>,
    store: Arc<botgate_store::AnyStore>,
    every: std::time::Duration,
    stopped: impl std::future::Future<Output = ()>,
) {
    use botgate_store::TrafficStore;
    let mut stopped = std::pin::pin!(stopped);
    loop {
        let last = tokio::select! {
            _ = tokio::time::sleep(every) => false,
            _ = &mut stopped => true,
        };
        for flushed in gateway.traffic.take() {
            let Ok(domain) = botgate_model::Domain::parse(&flushed.website) else {
                continue;
            };
            if let Err(error) = store
                .add_traffic(
                    &domain,
                    flushed.owner.as_owner(),
                    flushed.minute,
                    &flushed.counts,
                    &flushed.events,
                )
                .await
            {
                tracing::warn!(website = %domain, error = %crate::report::Report(&error), "a website's statistics could not be written; they are dropped");
            }
        }
        if last {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::LazyLock;

    static OWNERS: LazyLock<[WebsiteOwner; 2]> = LazyLock::new(|| {
        ["first", "second"].map(|name| WebsiteOwner {
            partner: botgate_model::PartnerName::parse(&format!("{name}-hoster")).unwrap(),
            user: botgate_model::UserId::parse(name).unwrap(),
        })
    });

    fn owner(which: usize) -> Owner<'static> {
        OWNERS[which].as_owner()
    }

    fn request<'a>(
        website: &'a str,
        time_ms: u64,
        outcome: Outcome,
        target: &'a str,
    ) -> Decided<'a> {
        Decided {
            website,
            owner: owner(0),
            time_ms,
            category: Some(Category::Humans),
            outcome,
            decider: Some("classifier"),
            reason: "classifier.browser",
            client: "203.0.113.7".parse().unwrap(),
            client_text: "203.0.113.7",
            method: "GET",
            target,
            user_agent: Some(b"Mozilla/5.0"),
            status: 200,
            passed_on: outcome == Outcome::Grant,
        }
    }

    #[test]
    fn requests_add_up_by_website_and_minute_across_threads() {
        let recorder = Arc::new(TrafficRecorder::default());
        let minute = 29_916_667u64;
        let at = minute * 60_000;
        recorder.record(&request("a.example", at, Outcome::Grant, "/?api-key=bgu_x"));
        recorder.record(&request("a.example", at + 1, Outcome::Captcha, "/login"));
        let mut holder = request("a.example", at + 1, Outcome::Captcha, "/login");
        holder.passed_on = true;
        recorder.record(&holder);
        let other = recorder.clone();
        std::thread::spawn(move || {
            other.record(&request("a.example", at + 2, Outcome::Grant, "/"));
            other.record(&request("a.example", at + 60_000, Outcome::Deny, "/next"));
            other.record(&request("b.example", at, Outcome::Grant, "/"));
        })
        .join()
        .unwrap();
        let flushed = recorder.take();
        let keys: Vec<(&str, u64)> = flushed
            .iter()
            .map(|f| (f.website.as_str(), f.minute))
            .collect();
        assert_eq!(
            keys,
            [
                ("a.example", minute),
                ("a.example", minute + 1),
                ("b.example", minute)
            ]
        );
        let first = &flushed[0].counts.0;
        assert_eq!(first.get("c:humans:grant"), Some(&2));
        assert_eq!(first.get("c:humans:captcha"), Some(&1));
        assert_eq!(first.get("c:humans:captcha_passed"), Some(&1));
        assert_eq!(
            first.get("ch:shown"),
            Some(&1),
            "a pass holder is not challenged"
        );
        assert_eq!(first.get("p:/"), Some(&2));
        assert_eq!(first.get("p:/login"), Some(&2));
        assert_eq!(first.get("u:Mozilla/5.0"), Some(&4));
        assert_eq!(first.get("n:203.0.113.0/24"), Some(&4));
        assert_eq!(first.get("d:classifier classifier.browser"), Some(&4));
        let paths: Vec<&str> = flushed[0].events.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["/?api-key=redacted", "/login", "/login", "/"]);
        let actions: Vec<&str> = flushed[0]
            .events
            .iter()
            .map(|e| e.action.as_str())
            .collect();
        assert_eq!(actions, ["grant", "captcha", "captcha_passed", "grant"]);
        assert!(recorder.take().is_empty(), "taken once");
    }

    #[test]
    fn lists_and_events_stay_bounded_between_flushes() {
        let recorder = TrafficRecorder::default();
        let paths: Vec<String> = (0..TOP_ENTRIES + 10).map(|n| format!("/{n}")).collect();
        for (n, path) in paths.iter().enumerate() {
            recorder.record(&request(
                "a.example",
                60_000 + n as u64,
                Outcome::Grant,
                path,
            ));
        }
        let long = format!("/{}", "é".repeat(200));
        recorder.record(&request("a.example", 60_500, Outcome::Grant, &long));
        let flushed = recorder.take();
        let counts = &flushed[0].counts.0;
        assert_eq!(
            counts.keys().filter(|k| k.starts_with("p:")).count(),
            TOP_ENTRIES
        );
        assert_eq!(
            counts.get("c:humans:grant"),
            Some(&(TOP_ENTRIES as u64 + 11))
        );
        let events = &flushed[0].events;
        assert_eq!(events.len(), EVENT_SLOTS);
        assert!(
            events.last().unwrap().path.len() <= LONGEST_TEXT,
            "{}",
            events.last().unwrap().path
        );
        assert!(events.windows(2).all(|pair| pair[0].time <= pair[1].time));
    }

    /// A website deleted and created again for someone else between two flushes: each
    /// owner's requests are flushed apart, for the store to keep only the current one's.
    #[test]
    fn each_owner_of_a_website_is_flushed_apart() {
        let recorder = TrafficRecorder::default();
        let at = 29_916_667 * 60_000;
        recorder.record(&request("a.example", at, Outcome::Grant, "/first"));
        let mut taken_over = request("a.example", at + 1, Outcome::Deny, "/second");
        taken_over.owner = owner(1);
        recorder.record(&taken_over);
        recorder.record(&request(
            "a.example",
            at + 2,
            Outcome::Grant,
            "/first-again",
        ));
        let flushed = recorder.take();
        let by_owner: Vec<(&str, &str, Vec<&str>)> = flushed
            .iter()
            .map(|f| {
                let paths = f.events.iter().map(|e| e.path.as_str()).collect();
                (f.owner.partner.as_str(), f.owner.user.as_str(), paths)
            })
            .collect();
        assert_eq!(
            by_owner,
            [
                ("first-hoster", "first", vec!["/first", "/first-again"]),
                ("second-hoster", "second", vec!["/second"]),
            ]
        );
        assert_eq!(flushed[1].counts.0.get("c:humans:deny"), Some(&1));
        assert_eq!(flushed[1].counts.0.get("p:/first"), None);
    }

    #[test]
    fn outcomes_are_listed_in_declaration_order() {
        for (index, outcome) in Outcome::ALL.iter().enumerate() {
            assert_eq!(*outcome as usize, index);
        }
    }

    #[test]
    fn networks_are_the_clients_slash_24_and_slash_48() {
        let mut out = String::new();
        network("198.51.100.200".parse().unwrap(), &mut out);
        assert_eq!(out, "198.51.100.0/24");
        network("2001:db8:aa:bb::1".parse().unwrap(), &mut out);
        assert_eq!(out, "2001:db8:aa::/48");
    }
}
