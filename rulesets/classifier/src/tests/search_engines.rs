//! Search engines: only crawlers whose claim the host verified.

use super::fixtures::*;

const VERIFIED: &str = "classifier.verified-search-engine";

fn verified(ua: &str) -> RequestBuilder {
    crawler(ua, CrawlerVerification::VerifiedSearchEngine)
}

#[test]
fn verified_googlebot_desktop() {
    assert_opinion(
        verified("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"),
        SearchEngines,
        VERIFIED,
    );
}

#[test]
fn verified_googlebot_smartphone() {
    assert_opinion(
        verified(
            "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.69 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        ),
        SearchEngines,
        VERIFIED,
    );
}

#[test]
fn verified_bingbot() {
    assert_opinion(
        verified(
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36",
        ),
        SearchEngines,
        VERIFIED,
    );
}

#[test]
fn verified_yandexbot() {
    assert_opinion(
        verified("Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)"),
        SearchEngines,
        VERIFIED,
    );
}

#[test]
fn verified_baiduspider() {
    assert_opinion(
        verified(
            "Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)",
        ),
        SearchEngines,
        VERIFIED,
    );
}

#[test]
fn verified_duckduckbot() {
    assert_opinion(
        verified("DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)"),
        SearchEngines,
        VERIFIED,
    );
}

#[test]
fn verified_applebot() {
    assert_opinion(
        verified(
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)",
        ),
        SearchEngines,
        VERIFIED,
    );
}

#[test]
fn verified_perplexitybot_is_a_search_engine() {
    assert_opinion(
        verified(
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; +https://perplexity.ai/perplexitybot)",
        ),
        SearchEngines,
        VERIFIED,
    );
}

#[test]
fn host_verification_is_honoured_for_a_user_agent_not_in_the_table() {
    assert_opinion(
        verified("Mozilla/5.0 (compatible; ExampleSearch-Indexer/4.2)"),
        SearchEngines,
        VERIFIED,
    );
}

#[test]
fn verified_google_inspection_tool_with_a_browser_user_agent() {
    assert_opinion(
        chrome("/").crawler(CrawlerVerification::VerifiedSearchEngine),
        SearchEngines,
        VERIFIED,
    );
}

#[test]
fn verified_search_engine_confidence_is_95() {
    assert_eq!(
        confidence(verified(
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
        )),
        95
    );
}
