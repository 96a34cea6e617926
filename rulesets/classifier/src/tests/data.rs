//! The crawler data: every example user agent in the JSON is recognised, the table
//! keeps the file's order and classes, and no entry matches a real browser.

use super::fixtures::*;
use crate::crawlers::{self, Class, ENTRIES, REGEX_SOURCES};
use serde_json::Value;

/// The data file, loaded natively at test time.
fn data() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/crawler-user-agents.json");
    let text = std::fs::read_to_string(path).expect("read the crawler data");
    serde_json::from_str(&text).expect("the crawler data is a JSON array")
}

/// Examples that name two crawlers of different categories, as (own pattern, winning
/// pattern): the winner follows the documented rules (tag order, longer token).
const TWO_CRAWLERS: &[(&str, &str)] = &[
    // `Daumoa/4.0 (Following Mediapartners-Google)`: Daum's search crawler.
    ("Mediapartners-Google", "daumoa"),
    // `linkdexbot/Nutch-1.0-dev`: built on Nutch, a search-engine crawler.
    ("linkdex", "Nutch"),
    // Siteimprove's crawler names both its SEO and its monitoring product.
    ("Siteimprove\\.com", "SiteCheck-sitecrawl"),
    // `NetResearchServer/4.0(loopimprovements.com/robot.html)`.
    ("loopimprovements\\.com", "netresearchserver"),
    // YextBot rendering with HeadlessChrome is automation.
    ("YextBot\\/", "HeadlessChrome"),
];

/// The category a table class gives.
fn category_of(class: Class) -> Option<Category> {
    crate::table_opinion(class).map(|(category, _, _)| category)
}

#[test]
fn every_example_user_agent_is_matched_by_its_entry() {
    let data = data();
    assert_eq!(data.len(), ENTRIES.len(), "the table follows the data file");
    let mut examples = 0;
    let mut other_category = Vec::new();
    for (index, entry) in data.iter().enumerate() {
        let pattern = entry["pattern"].as_str().unwrap();
        for example in entry["instances"].as_array().unwrap() {
            let ua = example.as_str().unwrap();
            examples += 1;
            let matching = crawlers::matching_entries(ua);
            assert!(
                matching.contains(&(index as u16)),
                "entry {index} ({pattern:?}) does not match its example {ua:?}; matches {matching:?}"
            );
            let class = ENTRIES[index].class;
            if class == Class::Ignored {
                continue;
            }
            let winner = crawlers::scan(ua).entry.unwrap_or_else(|| {
                panic!("example {ua:?} of entry {index} ({pattern:?}) resolves to no entry")
            });
            let winner = usize::from(winner);
            if category_of(ENTRIES[winner].class) != category_of(class) {
                let winning_pattern = data[winner]["pattern"].as_str().unwrap();
                other_category.push((pattern, winning_pattern, ua));
            }
        }
    }
    assert!(examples > 2000, "only {examples} examples checked");
    let unexpected: Vec<_> = other_category
        .iter()
        .filter(|(own, won, _)| !TWO_CRAWLERS.contains(&(own, won)))
        .collect();
    assert!(
        unexpected.is_empty(),
        "examples classed through another entry of another category: {unexpected:#?}"
    );
}

#[test]
fn table_classes_follow_the_documented_tag_priority() {
    const PRIORITY: &[(&str, Class)] = &[
        ("scanner", Class::Scanner),
        ("browser-automation", Class::Automation),
        ("ai-crawler", Class::AiCrawler),
        ("search-engine", Class::SearchEngine),
        ("social-preview", Class::SocialPreview),
        ("archiver", Class::Archiver),
        ("academic", Class::Academic),
        ("seo", Class::Seo),
        ("advertising", Class::Advertising),
        ("monitoring", Class::Monitoring),
        ("feed-reader", Class::FeedReader),
        ("http-library", Class::HttpLibrary),
    ];
    let mut corrected = 0;
    for (index, entry) in data().iter().enumerate() {
        let tags: Vec<&str> = entry["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        let expected = PRIORITY
            .iter()
            .find(|(tag, _)| tags.contains(tag))
            .unwrap()
            .1;
        let class = ENTRIES[index].class;
        if class == Class::Service || class == Class::Ignored {
            corrected += 1;
        } else {
            assert_eq!(class, expected, "entry {index} tagged {tags:?}");
        }
    }
    assert!(corrected <= 40, "{corrected} corrected entries");
}

#[test]
fn every_regex_dfa_deserialises_and_matches_its_examples() {
    let data = data();
    for (index, entry) in ENTRIES.iter().enumerate() {
        let Some(slot) = entry.regex else { continue };
        assert!(
            crawlers::regex_dfa_checks(slot),
            "the DFA of {} does not deserialise",
            REGEX_SOURCES[usize::from(slot)]
        );
        for example in data[index]["instances"].as_array().unwrap() {
            let ua = example.as_str().unwrap();
            assert!(
                crawlers::regex_matches(slot, ua),
                "{} on {ua}",
                REGEX_SOURCES[usize::from(slot)]
            );
        }
    }
}

#[test]
fn regex_dfas_keep_anchors_and_ignore_case() {
    let slot = |source: &str| {
        REGEX_SOURCES
            .iter()
            .position(|s| *s == source)
            .map(|i| i as u16)
            .unwrap()
    };
    let curl = slot("^curl");
    assert!(crawlers::regex_matches(curl, "curl/8.5.0"));
    assert!(crawlers::regex_matches(curl, "CURL/7.0"));
    assert!(!crawlers::regex_matches(
        curl,
        "PHP-Curl-Class/4.13.0 curl/7.68"
    ));
    let adsbot = slot("AdsBot-Google([^-]|$)");
    assert!(crawlers::regex_matches(
        adsbot,
        "AdsBot-Google (+http://www.google.com/adsbot.html)"
    ));
    assert!(crawlers::regex_matches(adsbot, "AdsBot-Google"));
    assert!(!crawlers::regex_matches(
        adsbot,
        "AdsBot-Google-Mobile-Apps"
    ));
}

/// Real browser and app user agents that no entry may match.
const REAL_CLIENTS: &[&str] = &[
    CHROME_UA,
    CHROME_MAC_UA,
    CHROME_ANDROID_UA,
    CHROME_LINUX_UA,
    EDGE_UA,
    SAMSUNG_UA,
    SAFARI_MAC_UA,
    SAFARI_IOS_UA,
    FIREFOX_UA,
    FIREFOX_WINDOWS_UA,
    WEBVIEW_UA,
    "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36 OPR/115.0.0.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 YaBrowser/24.6.0.0 Safari/537.36",
    "Mozilla/5.0 (Linux; U; Android 12; en-US; RMX3085 Build/SP1A.210812.016) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/100.0.4896.58 UCBrowser/13.6.8.1314 Mobile Safari/537.36",
    "Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/133.0 Mobile/15E148 Safari/605.1.15",
    "Mozilla/5.0 (iPad; CPU OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36 EdgA/131.0.0.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/480.0.0.38.107;FBBV/652345123;FBDV/iPhone15,2;FBMD/iPhone;FBSN/iOS;FBSV/17.6;FBSS/3;FBID/phone;FBLC/en_US;FBOP/5]",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8 Build/AP2A.240805.005; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/127.0.6533.103 Mobile Safari/537.36 Instagram 343.0.0.33.101 Android (34/14; 420dpi; 1080x2400; Google/google; Pixel 8; shiba; shiba; en_US; 620812305)",
    "Mozilla/5.0 (Linux; Android 12; NOH-NX9 Build/HUAWEINOH-NX9; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/99.0.4844.88 HuaweiBrowser/14.0.5.300 Mobile Safari/537.36",
    "Mozilla/5.0 (Linux; U; Android 13; en-gb; 2201117TG Build/TKQ1.221114.001) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/112.0.5615.136 Mobile Safari/537.36 XiaoMi/MiuiBrowser/14.2.0-g",
    "Mozilla/5.0 (Linux; Android 9; KFTRWI) AppleWebKit/537.36 (KHTML, like Gecko) Silk/118.5.2 like Chrome/118.0.5993.159 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:115.0) Gecko/20100101 Thunderbird/115.5.0 Lightning/115.5.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Whale/3.27.254.15 Safari/537.36",
    "Mozilla/5.0 (SMART-TV; LINUX; Tizen 6.5) AppleWebKit/537.36 (KHTML, like Gecko) 85.0.4183.93/6.5 TV Safari/537.36",
    "Mozilla/5.0 (PlayStation; PlayStation 5/2.26) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.0 Safari/605.1.15",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Slack/4.41.105 Chrome/130.0.6723.191 Electron/33.2.1 Safari/537.36 Sonic Slack_SSB/4.41.105",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) discord/1.0.9173 Chrome/128.0.6613.186 Electron/32.2.2 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) GSA/343.0.695551749 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 15; CPH2557 Build/AP3A.240617.008; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/130.0.6723.107 Mobile Safari/537.36",
    "MyShop/5021 CFNetwork/1496.0.7 Darwin/23.5.0",
    "Dalvik/2.1.0 (Linux; U; Android 13; SM-A546B Build/TP1A.220624.014)",
];

#[test]
fn no_entry_gives_an_opinion_on_real_browsers_and_apps() {
    for ua in REAL_CLIENTS {
        assert_eq!(
            crawlers::scan(ua).entry,
            None,
            "{ua} matched {:?}",
            crawlers::matching_entries(ua)
        );
    }
}

#[test]
fn browser_test_from_the_scan_equals_the_sdk_on_every_known_user_agent() {
    use botgate_ruleset_sdk::ua;
    let data = data();
    let examples = data
        .iter()
        .flat_map(|e| e["instances"].as_array().unwrap().iter())
        .map(|v| v.as_str().unwrap());
    let odd_case = [
        "Mozilla/5.0 (Windows NT 10.0) chrome/131.0 safari/537.36",
        "Mozilla/5.0 (X11; Linux x86_64) FIREFOX/133.0",
        "Mozilla/5.0 (iPhone) AppleWebKit/605.1.15 CRIOS/131 Safari/604.1",
        "Mozilla/5.0 (Windows NT 10.0) Chrome/131.0 Safari/537.36 BOT",
        "",
    ];
    for ua in REAL_CLIENTS.iter().copied().chain(examples).chain(odd_case) {
        let scan = crawlers::scan(ua);
        assert_eq!(scan.is_browser(ua), ua::is_browser(ua), "{ua}");
        assert_eq!(scan.browser_family(ua), ua::browser_family(ua), "{ua}");
    }
}

#[test]
fn the_user_agent_memo_answers_what_a_fresh_scan_answers() {
    let data = data();
    let examples: Vec<&str> = data
        .iter()
        .flat_map(|e| e["instances"].as_array().unwrap().iter())
        .map(|v| v.as_str().unwrap())
        .chain(REAL_CLIENTS.iter().copied())
        .collect();
    assert!(examples.len() > 64 * 4, "enough user agents to share slots");
    // Twice through, in two orders: hits, misses and slots taken over by another
    // user agent all give the fresh answer.
    for ua in examples.iter().chain(examples.iter().rev()) {
        let (memo, fresh) = (crawlers::scan(ua), crawlers::scan_fresh(ua));
        assert_eq!(
            (memo.entry, memo.markers()),
            (fresh.entry, fresh.markers()),
            "{ua}"
        );
    }
}

#[test]
fn automata_are_built_and_stay_within_their_memory_budget() {
    let user_agents = crawlers::automaton().expect("the user-agent automaton builds");
    let attacks = crate::attacks::automaton().expect("the attack automaton builds");
    println!(
        "user-agent automaton: {} KiB, attack automaton: {} KiB",
        user_agents.memory_usage() / 1024,
        attacks.memory_usage() / 1024
    );
    assert!(user_agents.memory_usage() < 6 << 20);
    assert!(attacks.memory_usage() < 1 << 20);
}

#[test]
fn platforms_come_from_the_scan() {
    use crate::fingerprint::Platform;
    for (ua, platform) in [
        (CHROME_UA, Platform::Windows),
        (CHROME_MAC_UA, Platform::MacOs),
        (CHROME_ANDROID_UA, Platform::Android),
        (CHROME_LINUX_UA, Platform::Linux),
        (SAFARI_IOS_UA, Platform::Other),
        (
            "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
            Platform::Other,
        ),
    ] {
        assert_eq!(crawlers::scan(ua).platform(), platform, "{ua}");
    }
}
