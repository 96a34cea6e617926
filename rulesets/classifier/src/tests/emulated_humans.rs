//! Emulated humans: automation markers and browsers whose user agent, client hints,
//! TLS fingerprint and HTTP version disagree.

use super::fixtures::*;

#[test]
fn headless_chrome_user_agent_is_automation() {
    assert_opinion(
        chrome("/").ua(HEADLESS_UA),
        EmulatedHumans,
        "classifier.automation-tool",
    );
}

#[test]
fn phantomjs_is_automation() {
    assert_opinion(
        bot(
            "Mozilla/5.0 (Unknown; Linux x86_64) AppleWebKit/538.1 (KHTML, like Gecko) PhantomJS/2.1.1 Safari/538.1",
        ),
        EmulatedHumans,
        "classifier.automation-tool",
    );
}

#[test]
fn puppeteer_marker_is_automation() {
    assert_opinion(
        chrome("/").ua("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Puppeteer"),
        EmulatedHumans,
        "classifier.automation-tool",
    );
}

#[test]
fn playwright_marker_is_automation() {
    assert_opinion(
        chrome("/").ua("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Playwright/1.40"),
        EmulatedHumans,
        "classifier.automation-tool",
    );
}

#[test]
fn selenium_marker_is_automation() {
    assert_opinion(
        chrome("/").ua("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Selenium"),
        EmulatedHumans,
        "classifier.automation-tool",
    );
}

#[test]
fn chromedriver_marker_is_webdriver() {
    assert_opinion(
        chrome("/").ua("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 chromedriver/131.0"),
        EmulatedHumans,
        "classifier.webdriver",
    );
}

#[test]
fn jsdom_is_an_automation_runtime() {
    assert_opinion(
        bot("Mozilla/5.0 (linux) AppleWebKit/537.36 (KHTML, like Gecko) jsdom/22.1.0"),
        EmulatedHumans,
        "classifier.automation-runtime",
    );
}

#[test]
fn electron_without_chrome_token_is_an_electron_shell() {
    assert_opinion(
        chrome("/").ua("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_12_3) AppleWebKit/537.36 (KHTML, like Gecko) Electron/1.6.2 Safari/537.36"),
        EmulatedHumans,
        "classifier.electron-shell",
    );
}

#[test]
fn headless_brand_in_client_hints_is_automation() {
    assert_opinion(
        chromium("/", CHROME_UA, "HeadlessChrome", "Windows", false, &[]),
        EmulatedHumans,
        "classifier.headless-client-hints",
    );
}

#[test]
fn chrome_over_https_without_client_hints_is_inconsistent() {
    assert_opinion(
        chrome_without(
            "/",
            &["sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform"],
        ),
        EmulatedHumans,
        "classifier.chromium-without-client-hints",
    );
}

#[test]
fn edge_without_client_hints_is_inconsistent() {
    assert_opinion(
        chromium(
            "/",
            EDGE_UA,
            "Microsoft Edge",
            "Windows",
            false,
            &["sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform"],
        ),
        EmulatedHumans,
        "classifier.chromium-without-client-hints",
    );
}

#[test]
fn windows_user_agent_with_macos_hint_is_a_platform_mismatch() {
    assert_opinion(
        chromium("/", CHROME_UA, "Google Chrome", "macOS", false, &[]),
        EmulatedHumans,
        "classifier.client-hints-platform-mismatch",
    );
}

#[test]
fn android_user_agent_with_windows_hint_is_a_platform_mismatch() {
    assert_opinion(
        chromium(
            "/",
            CHROME_ANDROID_UA,
            "Google Chrome",
            "Windows",
            true,
            &[],
        ),
        EmulatedHumans,
        "classifier.client-hints-platform-mismatch",
    );
}

#[test]
fn firefox_sending_client_hints_is_inconsistent() {
    assert_opinion(
        get("/").firefox().header(
            "sec-ch-ua",
            "\"Google Chrome\";v=\"131\", \"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\"",
        ),
        EmulatedHumans,
        "classifier.client-hints-from-non-chromium",
    );
}

#[test]
fn safari_sending_client_hints_is_inconsistent() {
    assert_opinion(
        safari("/", SAFARI_MAC_UA).header("sec-ch-ua", "\"Chromium\";v=\"131\""),
        EmulatedHumans,
        "classifier.client-hints-from-non-chromium",
    );
}

#[test]
fn chrome_user_agent_with_curl_fingerprint_lacks_h2() {
    assert_opinion(
        chrome("/").ja4(CURL_JA4),
        EmulatedHumans,
        "classifier.browser-tls-without-h2",
    );
}

#[test]
fn chrome_user_agent_with_python_fingerprint_lacks_h2() {
    assert_opinion(
        chrome("/pricing").ja4(PYTHON_JA4),
        EmulatedHumans,
        "classifier.browser-tls-without-h2",
    );
}

#[test]
fn chrome_user_agent_without_any_alpn_lacks_h2() {
    assert_opinion(
        chrome("/").ja4("t13d171500_5b57614c22b0_3d5424432f57"),
        EmulatedHumans,
        "classifier.browser-tls-without-h2",
    );
}

#[test]
fn firefox_user_agent_offering_only_tls12_is_legacy_tls() {
    assert_opinion(
        get("/")
            .firefox()
            .ja4("t12d1209h2_d34a8e72043a_b39be8c56a14"),
        EmulatedHumans,
        "classifier.browser-tls-legacy-version",
    );
}

#[test]
fn safari_user_agent_without_sni_is_inconsistent() {
    assert_opinion(
        safari("/", SAFARI_IOS_UA).ja4("t13i2014h2_a09f3c656075_14788d8d241b"),
        EmulatedHumans,
        "classifier.browser-tls-without-sni",
    );
}

#[test]
fn browser_user_agent_over_http10_is_inconsistent() {
    assert_opinion(
        chrome("/").version(HttpVersion::Http10),
        EmulatedHumans,
        "classifier.browser-http10",
    );
}

#[test]
fn consistency_is_not_softened_by_a_valid_pass() {
    assert_opinion(
        chrome("/").ja4(CURL_JA4).challenge(ChallengePass::Valid),
        EmulatedHumans,
        "classifier.browser-tls-without-h2",
    );
}

#[test]
fn consistency_outweighs_a_missing_header() {
    assert_opinion(
        chrome_without("/", &["sec-ch-ua", "accept-language"]),
        EmulatedHumans,
        "classifier.chromium-without-client-hints",
    );
}
