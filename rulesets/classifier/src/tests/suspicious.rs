//! Suspicious behaviour: impostor crawlers, HTTP libraries, missing headers, bursts and
//! failed challenges.

use super::fixtures::*;

const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

#[test]
fn googlebot_without_a_claim_the_host_knows_is_unverified() {
    assert_opinion(
        crawler(GOOGLEBOT, CrawlerVerification::NoClaim),
        SuspiciousBehaviour,
        "classifier.unverified-search-engine",
    );
}

#[test]
fn googlebot_failing_verification_is_an_impostor() {
    assert_opinion(
        crawler(GOOGLEBOT, CrawlerVerification::Failed),
        SuspiciousBehaviour,
        "classifier.impostor-crawler",
    );
}

#[test]
fn googlebot_pending_verification_is_unverified() {
    assert_opinion(
        crawler(GOOGLEBOT, CrawlerVerification::Pending),
        SuspiciousBehaviour,
        "classifier.unverified-search-engine",
    );
}

#[test]
fn unverified_bingbot_is_never_a_search_engine() {
    assert_opinion(
        crawler(
            "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
            CrawlerVerification::NoClaim,
        ),
        SuspiciousBehaviour,
        "classifier.unverified-search-engine",
    );
}

#[test]
fn impostor_confidence_is_85() {
    assert_eq!(
        confidence(crawler(GOOGLEBOT, CrawlerVerification::Failed)),
        85
    );
}

#[test]
fn unverified_facebookexternalhit_is_never_a_social_network() {
    assert_opinion(
        crawler(
            "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
            CrawlerVerification::NoClaim,
        ),
        SuspiciousBehaviour,
        "classifier.unverified-social-network",
    );
}

#[test]
fn twitterbot_failing_verification_is_an_impostor() {
    assert_opinion(
        crawler("Twitterbot/1.0", CrawlerVerification::Failed),
        SuspiciousBehaviour,
        "classifier.impostor-crawler",
    );
}

#[test]
fn curl_is_an_http_library() {
    assert_opinion(
        bot("curl/8.5.0"),
        SuspiciousBehaviour,
        "classifier.http-library",
    );
}

#[test]
fn python_requests_is_an_http_library() {
    assert_opinion(
        bot("python-requests/2.31.0"),
        SuspiciousBehaviour,
        "classifier.http-library",
    );
}

#[test]
fn go_http_client_is_an_http_library() {
    assert_opinion(
        bot("Go-http-client/2.0"),
        SuspiciousBehaviour,
        "classifier.http-library",
    );
}

#[test]
fn wget_is_an_http_library() {
    assert_opinion(
        bot("Wget/1.21.4"),
        SuspiciousBehaviour,
        "classifier.http-library",
    );
}

#[test]
fn java_runtime_client_is_an_http_library() {
    assert_opinion(
        bot("Java/17.0.9"),
        SuspiciousBehaviour,
        "classifier.http-library",
    );
}

#[test]
fn http_library_confidence_is_60() {
    assert_eq!(confidence(bot("python-requests/2.31.0")), 60);
}

#[test]
fn curl_flooding_is_raised_to_a_request_flood() {
    assert_opinion(
        bot("curl/8.5.0").behaviour(900, 3, 0),
        SuspiciousBehaviour,
        "classifier.request-flood",
    );
}

#[test]
fn empty_user_agent_is_suspicious() {
    assert_opinion(
        get("/").header("accept", "*/*"),
        SuspiciousBehaviour,
        "classifier.empty-user-agent",
    );
}

#[test]
fn empty_user_agent_without_accept_scores_65() {
    assert_eq!(confidence(get("/")), 65);
}

#[test]
fn browser_without_accept_language_is_suspicious() {
    assert_opinion(
        chrome_without("/", &["accept-language"]),
        SuspiciousBehaviour,
        "classifier.browser-without-accept-language",
    );
}

#[test]
fn browser_without_accept_is_suspicious() {
    assert_opinion(
        chrome_without("/", &["accept"]),
        SuspiciousBehaviour,
        "classifier.browser-without-accept",
    );
}

#[test]
fn browser_without_accept_encoding_is_suspicious() {
    assert_opinion(
        chrome_without("/", &["accept-encoding"]),
        SuspiciousBehaviour,
        "classifier.browser-without-accept-encoding",
    );
}

#[test]
fn missing_header_confidence_is_55() {
    assert_eq!(confidence(chrome_without("/", &["accept-language"])), 55);
}

#[test]
fn more_than_600_requests_a_minute_is_a_flood() {
    assert_opinion(
        chrome("/search").behaviour(750, 12, 0),
        SuspiciousBehaviour,
        "classifier.request-flood",
    );
}

#[test]
fn request_flood_is_not_softened_by_a_valid_pass() {
    assert_opinion(
        chrome("/search")
            .behaviour(750, 12, 0)
            .challenge(ChallengePass::Valid),
        SuspiciousBehaviour,
        "classifier.request-flood",
    );
}

#[test]
fn more_than_180_requests_a_minute_is_a_high_rate() {
    assert_opinion(
        chrome("/search").behaviour(240, 20, 0),
        SuspiciousBehaviour,
        "classifier.high-request-rate",
    );
}

#[test]
fn three_failed_challenges_are_suspicious() {
    assert_opinion(
        chrome("/login").behaviour(12, 3, 3),
        SuspiciousBehaviour,
        "classifier.repeated-failed-challenges",
    );
}

#[test]
fn failed_challenges_outweigh_a_missing_header() {
    assert_eq!(
        confidence(chrome_without("/login", &["accept-language"]).behaviour(12, 3, 4)),
        85
    );
}

#[test]
fn unrecognised_non_browser_client_is_suspicious() {
    assert_opinion(
        bot("Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)"),
        SuspiciousBehaviour,
        "classifier.unrecognised-client",
    );
}

#[test]
fn expired_pass_does_not_soften() {
    assert_opinion(
        chrome_without("/", &["accept-language"]).challenge(ChallengePass::Expired),
        SuspiciousBehaviour,
        "classifier.browser-without-accept-language",
    );
}

#[test]
fn url_cut_at_the_host_bound_is_oversized() {
    let query = format!("q={}", "A".repeat(16 * 1024 - 10));
    assert_opinion(
        chrome(&format!("/search?{query}")).truncated(),
        SuspiciousBehaviour,
        "classifier.oversized-url",
    );
}
