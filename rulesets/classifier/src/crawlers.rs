//! The known-crawler table (generated at build time from `data/crawler-user-agents.json`)
//! and the one-pass user-agent scan that finds table entries and built-in markers.
//!
//! One Aho-Corasick automaton (built once per instance, searched over one ASCII
//! lower-case copy of the user agent) holds every entry's needles plus the built-in
//! [`Marker`] tokens, among them the SDK's browser and non-browser tokens, so
//! `is_browser` and `browser_family` come out of the same pass. A needle hit nominates
//! its entries; an entry whose pattern is a real regex is confirmed by that regex, run
//! as a DFA build.rs compiled (deserialised on first use and cached). When several
//! entries match, a match starting inside a longer match is dropped (`ICBot/` inside
//! `NewRelicbot/`), then the class priority decides (scanner first), then the longer
//! match, then file order.

use crate::fingerprint::Platform;
use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use botgate_ruleset_sdk::ua::BrowserFamily;
use regex_automata::Input;
use regex_automata::dfa::Automaton;
use regex_automata::dfa::dense::DFA;
use std::sync::OnceLock;

/// What a table entry is, from its tags (see the crate doc for the mapping).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// `scanner`: vulnerability and port scanners, probes.
    Scanner,
    /// `browser-automation`: headless browsers and browsing agents.
    Automation,
    /// `ai-crawler`: crawlers feeding AI models and answer engines.
    AiCrawler,
    /// `search-engine`: a claim the host must verify.
    SearchEngine,
    /// `social-preview`: a claim the host must verify.
    SocialPreview,
    /// `archiver`: web archives.
    Archiver,
    /// `academic`: research crawlers.
    Academic,
    /// `seo`: SEO, marketing and data-collection crawlers.
    Seo,
    /// `advertising`: ad verification and ad-network crawlers.
    Advertising,
    /// `monitoring`: uptime and performance monitors.
    Monitoring,
    /// `feed-reader`: RSS and podcast readers.
    FeedReader,
    /// `http-library`: generic HTTP clients and scraping frameworks.
    HttpLibrary,
    /// A corrected entry: certificate validators, payment callbacks, webhooks and
    /// services the site owner hires (see `CORRECTIONS` in build.rs).
    Service,
    /// A corrected entry that gives no opinion (its pattern matches real browsers).
    Ignored,
}

impl Class {
    /// The order in which classes win when several entries match one user agent; the
    /// same order build.rs applies to an entry's several tags.
    fn rank(self) -> u8 {
        match self {
            Class::Scanner => 0,
            Class::Automation => 1,
            Class::AiCrawler => 2,
            Class::SearchEngine => 3,
            Class::SocialPreview => 4,
            Class::Archiver => 5,
            Class::Academic => 6,
            Class::Seo => 7,
            Class::Advertising => 8,
            Class::Service => 9,
            Class::Monitoring => 10,
            Class::FeedReader => 11,
            Class::HttpLibrary => 12,
            Class::Ignored => 13,
        }
    }
}

/// One data entry.
pub(crate) struct Entry {
    /// The entry's class.
    pub(crate) class: Class,
    /// Its index in [`REGEX_SOURCES`] when a needle hit needs confirming.
    pub(crate) regex: Option<u16>,
}

/// One distinct needle.
pub(crate) struct Needle {
    /// The needle, lower case.
    pub(crate) text: &'static str,
    /// Whether it must start a token (short needles beginning with a letter or digit).
    pub(crate) boundary: bool,
    /// The entries it nominates.
    pub(crate) entries: &'static [u16],
}

/// Bytes with the 4-byte alignment a serialised DFA needs.
#[repr(C)]
pub(crate) struct Aligned<B: ?Sized> {
    pub(crate) _align: [u32; 0],
    pub(crate) bytes: B,
}

include!(concat!(env!("OUT_DIR"), "/crawler_table.rs"));

/// Tokens outside the data that the same scan looks for, as bits of [`UaScan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Marker {
    /// `Electron/`: a browser shell; automation when no `Chrome/` token comes with it.
    Electron = 1,
    /// WebDriver and its drivers.
    WebDriver = 1 << 1,
    /// `headless` outside the data's `HeadlessChrome`.
    Headless = 1 << 2,
    /// Other browser-automation runtimes.
    Automation = 1 << 3,
    /// A mobile app's HTTP stack (iOS `CFNetwork`, Android `Dalvik`).
    MobileApp = 1 << 4,
    /// Attack tools the data lacks (Nuclei, gobuster, ffuf...).
    Scanner = 1 << 5,
    /// Payment callbacks the data lacks (PayPal IPN without `PayPal/`).
    Service = 1 << 6,
    /// A non-browser marker of `botgate_ruleset_sdk::ua::is_browser` (`bot`, `curl`...).
    NonBrowser = 1 << 7,
    /// A word with which a client declares itself a crawler.
    CrawlerWord = 1 << 8,
    /// `Chrome/`: a browser token of `botgate_ruleset_sdk::ua` (found ignoring case,
    /// like the tokens below; the SDK's family test then checks the exact case).
    Chrome = 1 << 9,
    /// `Firefox/`.
    Firefox = 1 << 10,
    /// `Safari/`.
    Safari = 1 << 11,
    /// `Edg/`.
    Edge = 1 << 12,
    /// `OPR/`.
    Opera = 1 << 13,
    /// `FxiOS/`: Firefox on iOS.
    FirefoxIos = 1 << 14,
    /// `CriOS/`: Chrome on iOS (WebKit, so not Chromium).
    ChromeIos = 1 << 15,
    /// `Android`: the platform tokens, for the client-hint platform check.
    Android = 1 << 16,
    /// `Windows NT`.
    WindowsNt = 1 << 17,
    /// `iPhone`, `iPad`.
    AppleMobile = 1 << 18,
    /// `CrOS`.
    ChromeOs = 1 << 19,
    /// `Macintosh`, `Mac OS X`.
    Mac = 1 << 20,
    /// `Linux`, `X11`.
    Linux = 1 << 21,
    /// A marker of a PHP object-injection payload ([`OBJECT_INJECTION`]).
    ObjectInjection = 1 << 22,
}

/// Markers of a PHP object-injection payload (lower case; found ignoring case): the
/// gadget chain of the Joomla session exploit (CVE-2015-8562),
/// `}__test|O:21:"JDatabaseDriverMysqli"…`, which scanners still send to every site in
/// `User-Agent` or `X-Forwarded-For`. In the user agent the scan below finds them (and
/// its memo remembers the answer); `X-Forwarded-For` is searched on its own.
pub(crate) const OBJECT_INJECTION: [&str; 4] = [
    "jdatabasedrivermysql",
    "jsimplepiefactory",
    "disconnecthandlers",
    "}__test",
];

/// Any browser token of `botgate_ruleset_sdk::ua::is_browser`.
const BROWSER_TOKENS: u32 = Marker::Chrome as u32
    | Marker::Firefox as u32
    | Marker::Safari as u32
    | Marker::Edge as u32
    | Marker::Opera as u32;

use Marker as M;

/// The built-in marker tokens (lower case) and the marker bits each one sets.
const MARKERS: &[(&str, u32)] = &[
    ("electron/", M::Electron as u32),
    ("webdriver", M::WebDriver as u32),
    ("chromedriver", M::WebDriver as u32),
    ("geckodriver", M::WebDriver as u32),
    ("msedgedriver", M::WebDriver as u32),
    ("headless", M::Headless as u32 | M::NonBrowser as u32),
    ("jsdom/", M::Automation as u32),
    ("slimerjs", M::Automation as u32),
    ("htmlunit", M::Automation as u32),
    ("nightmare", M::Automation as u32),
    ("cypress/", M::Automation as u32),
    ("cfnetwork/", M::MobileApp as u32),
    ("dalvik/", M::MobileApp as u32),
    ("nuclei", M::Scanner as u32),
    ("gobuster", M::Scanner as u32),
    ("fuzz faster u fool", M::Scanner as u32),
    ("dirsearch", M::Scanner as u32),
    ("feroxbuster", M::Scanner as u32),
    ("wfuzz", M::Scanner as u32),
    ("netsparker", M::Scanner as u32),
    ("arachni", M::Scanner as u32),
    ("w3af", M::Scanner as u32),
    ("skipfish", M::Scanner as u32),
    ("commix", M::Scanner as u32),
    ("jorgee", M::Scanner as u32),
    ("morfeus", M::Scanner as u32),
    ("dotdotpwn", M::Scanner as u32),
    ("havij", M::Scanner as u32),
    ("sqlninja", M::Scanner as u32),
    ("fimap", M::Scanner as u32),
    ("hello, world", M::Scanner as u32),
    ("paypal ipn", M::Service as u32),
    // The SDK's browser test (`ua::is_browser`), computed in this same pass.
    ("chrome/", M::Chrome as u32),
    ("firefox/", M::Firefox as u32),
    ("safari/", M::Safari as u32),
    ("edg/", M::Edge as u32),
    ("opr/", M::Opera as u32),
    ("fxios/", M::FirefoxIos as u32),
    ("crios/", M::ChromeIos as u32),
    ("android", M::Android as u32),
    ("windows nt", M::WindowsNt as u32),
    ("iphone", M::AppleMobile as u32),
    ("ipad", M::AppleMobile as u32),
    ("cros", M::ChromeOs as u32),
    ("macintosh", M::Mac as u32),
    ("mac os x", M::Mac as u32),
    ("linux", M::Linux as u32),
    ("x11", M::Linux as u32),
    ("bot", M::NonBrowser as u32 | M::CrawlerWord as u32),
    ("crawl", M::NonBrowser as u32 | M::CrawlerWord as u32),
    ("spider", M::NonBrowser as u32 | M::CrawlerWord as u32),
    ("slurp", M::NonBrowser as u32 | M::CrawlerWord as u32),
    ("+http", M::NonBrowser as u32 | M::CrawlerWord as u32),
    ("http://", M::NonBrowser as u32),
    ("https://", M::NonBrowser as u32),
    ("phantomjs", M::NonBrowser as u32),
    ("python", M::NonBrowser as u32),
    ("curl", M::NonBrowser as u32),
    ("wget", M::NonBrowser as u32),
    ("java/", M::NonBrowser as u32),
    ("go-http", M::NonBrowser as u32),
    ("okhttp", M::NonBrowser as u32),
    ("scrapy", M::NonBrowser as u32),
    ("libwww", M::NonBrowser as u32),
    ("httpclient", M::NonBrowser as u32),
    ("scrape", M::CrawlerWord as u32),
    ("archiver", M::CrawlerWord as u32),
    (OBJECT_INJECTION[0], M::ObjectInjection as u32),
    (OBJECT_INJECTION[1], M::ObjectInjection as u32),
    (OBJECT_INJECTION[2], M::ObjectInjection as u32),
    (OBJECT_INJECTION[3], M::ObjectInjection as u32),
];

/// The result of scanning one user agent.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct UaScan {
    /// The winning table entry, if any entry (other than an ignored one) matched.
    pub(crate) entry: Option<u16>,
    /// The [`Marker`] bits found.
    markers: u32,
}

impl UaScan {
    /// The class of the winning entry.
    pub(crate) fn class(&self) -> Option<Class> {
        self.entry.map(|e| ENTRIES[usize::from(e)].class)
    }

    /// Every [`Marker`] bit found.
    #[cfg(test)]
    pub(crate) fn markers(&self) -> u32 {
        self.markers
    }

    /// Whether `marker` was found.
    pub(crate) fn has(&self, marker: Marker) -> bool {
        self.markers & marker as u32 != 0
    }

    /// Whether `ua` contains `token` (case-sensitively, as the SDK checks), knowing
    /// whether the scan found it ignoring case.
    fn contains(&self, ua: &str, marker: Marker, token: &str) -> bool {
        self.has(marker) && botgate_ruleset_sdk::ua::contains(ua, token)
    }

    /// `botgate_ruleset_sdk::ua::is_browser(ua)`, from this scan's markers (the SDK's
    /// version searches the user agent once per marker).
    pub(crate) fn is_browser(&self, ua: &str) -> bool {
        ua.starts_with("Mozilla/5.0 (")
            && self.markers & BROWSER_TOKENS != 0
            && !self.has(Marker::NonBrowser)
    }

    /// The platform the user agent claims, from this scan's markers (Android before
    /// Windows before iOS and Chrome OS before macOS before Linux).
    pub(crate) fn platform(&self) -> Platform {
        if self.has(Marker::Android) {
            Platform::Android
        } else if self.has(Marker::WindowsNt) {
            Platform::Windows
        } else if self.has(Marker::AppleMobile) || self.has(Marker::ChromeOs) {
            Platform::Other
        } else if self.has(Marker::Mac) {
            Platform::MacOs
        } else if self.has(Marker::Linux) {
            Platform::Linux
        } else {
            Platform::Other
        }
    }

    /// `botgate_ruleset_sdk::ua::browser_family(ua)`, from this scan's markers.
    pub(crate) fn browser_family(&self, ua: &str) -> Option<BrowserFamily> {
        if !self.is_browser(ua) {
            None
        } else if self.contains(ua, Marker::Firefox, "Firefox/")
            || self.contains(ua, Marker::FirefoxIos, "FxiOS/")
        {
            Some(BrowserFamily::Firefox)
        } else if self.contains(ua, Marker::Chrome, "Chrome/")
            && !self.contains(ua, Marker::ChromeIos, "CriOS/")
        {
            Some(BrowserFamily::Chromium)
        } else if self.contains(ua, Marker::Safari, "Safari/") {
            Some(BrowserFamily::Safari)
        } else {
            None
        }
    }
}

/// The automaton over all needles followed by all markers (all lower case), searched
/// over an ASCII-lower-cased copy of the user agent, which makes the search ASCII
/// case-insensitive. A DFA: about 3.5 MB and 15 ms to build once per instance (during
/// the host's warm-up call), three times fewer instructions per byte than the NFA the
/// builder would pick (which needs 0.4 MB). `None` only if it could not be built (it
/// then matches nothing rather than trapping).
pub(crate) fn automaton() -> Option<&'static AhoCorasick> {
    static AUTOMATON: OnceLock<Option<AhoCorasick>> = OnceLock::new();
    AUTOMATON
        .get_or_init(|| {
            let patterns = NEEDLES
                .iter()
                .map(|n| n.text)
                .chain(MARKERS.iter().map(|(text, _)| *text));
            AhoCorasick::builder()
                .kind(Some(AhoCorasickKind::DFA))
                .match_kind(MatchKind::Standard)
                .build(patterns)
                .ok()
        })
        .as_ref()
}

/// The DFA of regex slot `slot`, deserialised (and checked) on first use; `None` if the
/// bytes do not check out, which then matches nothing rather than trapping.
fn regex(slot: u16) -> Option<&'static DFA<&'static [u32]>> {
    static CACHE: [OnceLock<Option<DFA<&'static [u32]>>>; REGEX_COUNT] =
        [const { OnceLock::new() }; REGEX_COUNT];
    let slot = usize::from(slot);
    CACHE
        .get(slot)?
        .get_or_init(|| {
            DFA::from_bytes(&REGEX_DFAS[slot].bytes)
                .ok()
                .map(|(dfa, _)| dfa)
        })
        .as_ref()
}

/// Whether the DFA of `slot` deserialises (for the data tests).
#[cfg(test)]
pub(crate) fn regex_dfa_checks(slot: u16) -> bool {
    regex(slot).is_some()
}

/// Whether the regex of `slot` matches `ua`.
pub(crate) fn regex_matches(slot: u16, ua: &str) -> bool {
    regex(slot).is_some_and(|dfa| matches!(dfa.try_search_fwd(&Input::new(ua)), Ok(Some(_))))
}

/// A matched entry and the span it matched.
#[derive(Clone, Copy, Debug, Default)]
struct Candidate {
    entry: u16,
    start: u16,
    end: u16,
}

impl Candidate {
    fn class(&self) -> Class {
        ENTRIES[usize::from(self.entry)].class
    }

    fn len(&self) -> u16 {
        self.end - self.start
    }
}

/// The most candidates kept for one user agent; real user agents match one or two.
const MAX_CANDIDATES: usize = 8;

/// The confirmed candidates of one user agent, without allocating.
#[derive(Default)]
struct Candidates {
    items: [Candidate; MAX_CANDIDATES],
    len: usize,
}

impl Candidates {
    fn as_slice(&self) -> &[Candidate] {
        &self.items[..self.len]
    }

    /// Confirms `entry`, nominated by a needle at `start..end`, and keeps it. When the
    /// buffer is full, it takes the place of the lowest-ranked candidate if it outranks
    /// it, so a user agent stuffed with crawler names cannot push a scanner out.
    fn offer(&mut self, ua: &str, entry: u16, start: usize, end: usize) {
        if self.as_slice().iter().any(|c| c.entry == entry) {
            return;
        }
        let rank = ENTRIES[usize::from(entry)].class.rank();
        let slot = if self.len < MAX_CANDIDATES {
            self.len
        } else {
            match (0..MAX_CANDIDATES).max_by_key(|&i| self.items[i].class().rank()) {
                Some(worst) if self.items[worst].class().rank() > rank => worst,
                _ => return,
            }
        };
        // A regex entry keeps the span of its needle, the pattern's longest literal.
        if let Some(regex) = ENTRIES[usize::from(entry)].regex
            && !regex_matches(regex, ua)
        {
            return;
        }
        // The host bounds headers to 16 KiB, so spans fit in `u16`.
        let clamp = |n: usize| u16::try_from(n).unwrap_or(u16::MAX);
        self.items[slot] = Candidate {
            entry,
            start: clamp(start),
            end: clamp(end),
        };
        self.len = self.len.max(slot + 1);
    }
}

/// Finds every table entry matching `ua` and returns the markers in it.
fn candidates(ua: &str, found: &mut Candidates) -> u32 {
    let mut markers = 0;
    if ua.is_empty() {
        return markers;
    }
    if let Some(automaton) = automaton() {
        // The one lower-case copy of the user agent (ASCII only, so spans carry over).
        let lower = ua.to_ascii_lowercase();
        let bytes = lower.as_bytes();
        for m in automaton.find_overlapping_iter(&lower) {
            let id = m.pattern().as_usize();
            let Some(needle) = NEEDLES.get(id) else {
                if let Some((_, bits)) = MARKERS.get(id - NEEDLES.len()) {
                    markers |= bits;
                }
                continue;
            };
            if needle.boundary && m.start() > 0 && bytes[m.start() - 1].is_ascii_alphanumeric() {
                continue;
            }
            for &entry in needle.entries {
                found.offer(ua, entry, m.start(), m.end());
            }
        }
    }
    for &entry in &NEEDLELESS {
        found.offer(ua, entry, 0, 0);
    }
    markers
}

/// The winning candidate: ignored entries drop out, and so does a match that starts
/// inside a longer match starting no later (`ICBot/` in `NewRelicbot/`, `Fetch/` in
/// `node-fetch/`: the longer token names the client); then the lowest class rank wins,
/// then the longer match, then file order.
fn resolve(found: &Candidates) -> Option<u16> {
    let all = found.as_slice();
    let live = |c: &&Candidate| c.class() != Class::Ignored;
    all.iter()
        .filter(live)
        .filter(|b| {
            !all.iter().filter(live).any(|a| {
                a.entry != b.entry && a.start <= b.start && b.start < a.end && a.len() > b.len()
            })
        })
        .min_by_key(|c| (c.class().rank(), u16::MAX - c.len(), c.entry))
        .map(|c| c.entry)
}

/// Scans `ua` once: the winning table entry and the built-in markers.
fn scan_uncached(ua: &str) -> UaScan {
    let mut found = Candidates::default();
    let markers = candidates(ua, &mut found);
    UaScan {
        entry: resolve(&found),
        markers,
    }
}

/// Slots of the user-agent memo: a power of two.
const MEMO_SLOTS: usize = 64;

/// The scans of recently seen user agents, one per slot by hash (direct-mapped), kept
/// by the instance between calls: real traffic repeats a few hundred user agents, and
/// the scan is the classifier's largest cost. At most 64 user agents of at most 8 KiB
/// each (the host's bound on a header value) are kept.
struct Memo {
    slots: [Option<(Box<str>, UaScan)>; MEMO_SLOTS],
}

std::thread_local! {
    static MEMO: std::cell::RefCell<Memo> =
        const { std::cell::RefCell::new(Memo { slots: [const { None }; MEMO_SLOTS] }) };
}

/// The memo's slot hash: deterministic (no random state, no WASI) and eight bytes a
/// step (a multiply-rotate over little-endian words, as FxHash does), since it runs over
/// every request's user agent. A collision only costs a scan: the slot keeps the user
/// agent to confirm a hit.
fn slot_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let step =
        |hash: u64, word: [u8; 8]| (hash.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    let mut words = bytes.chunks_exact(8);
    let mut hash = (&mut words).fold(bytes.len() as u64, |hash, word| {
        step(hash, word.try_into().expect("eight bytes"))
    });
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    hash = step(hash, tail);
    // The high bits are the well-mixed ones.
    hash >> 32
}

/// Whether `a` and `b` are equal, compared eight bytes a step: WebAssembly's `memcmp`
/// (wasi-libc's, which `==` on slices calls) walks one byte at a time, and this runs on
/// every request's user agent.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (a_words, b_words) = (a.chunks_exact(8), b.chunks_exact(8));
    let tails_equal = a_words.remainder() == b_words.remainder();
    let word = |w: &[u8]| u64::from_ne_bytes(w.try_into().expect("eight bytes"));
    tails_equal && a_words.zip(b_words).all(|(x, y)| word(x) == word(y))
}

#[cfg(test)]
#[test]
fn same_bytes_is_equality() {
    let ua = b"Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0";
    for len in 0..=ua.len() {
        let a = &ua[..len];
        assert!(same_bytes(a, a));
        if len < ua.len() {
            assert!(
                !same_bytes(a, &ua[..len + 1]),
                "{len} against {} bytes",
                len + 1
            );
        }
        for at in 0..len {
            let mut other = a.to_vec();
            other[at] ^= 1;
            assert!(!same_bytes(a, &other), "{len} bytes, differing at {at}");
        }
    }
}

/// [`scan_uncached`], answered from the memo when `ua` was scanned lately. The scan
/// is a pure function of `ua`, so the memo changes no answer.
pub(crate) fn scan(ua: &str) -> UaScan {
    let slot = (slot_hash(ua.as_bytes()) as usize) & (MEMO_SLOTS - 1);
    let known = MEMO.with(|memo| match &memo.borrow().slots[slot] {
        Some((seen, scan)) if same_bytes(seen.as_bytes(), ua.as_bytes()) => Some(*scan),
        _ => None,
    });
    if let Some(scan) = known {
        return scan;
    }
    let scan = scan_uncached(ua);
    MEMO.with(|memo| memo.borrow_mut().slots[slot] = Some((Box::from(ua), scan)));
    scan
}

/// [`scan_uncached`], for the test that the memo changes no answer.
#[cfg(test)]
pub(crate) fn scan_fresh(ua: &str) -> UaScan {
    scan_uncached(ua)
}

/// Every entry whose pattern matches `ua`, before resolution (for the data tests).
#[cfg(test)]
pub(crate) fn matching_entries(ua: &str) -> Vec<u16> {
    let mut found = Candidates::default();
    candidates(ua, &mut found);
    found.as_slice().iter().map(|c| c.entry).collect()
}
