//! Humans: real browsers with consistent user agent, headers and fingerprint, near
//! misses that must not fire, and the softening of weak signals by a valid pass.

use super::fixtures::*;

const BROWSER: &str = "classifier.browser";

#[test]
fn chrome_on_windows_is_human() {
    assert_opinion(chrome("/"), Humans, BROWSER);
}

#[test]
fn chrome_on_macos_is_human() {
    assert_opinion(
        chromium("/", CHROME_MAC_UA, "Google Chrome", "macOS", false, &[]),
        Humans,
        BROWSER,
    );
}

#[test]
fn chrome_on_android_is_human() {
    assert_opinion(chrome_android("/"), Humans, BROWSER);
}

#[test]
fn edge_on_windows_is_human() {
    assert_opinion(
        chromium("/", EDGE_UA, "Microsoft Edge", "Windows", false, &[]),
        Humans,
        BROWSER,
    );
}

#[test]
fn samsung_internet_is_human() {
    assert_opinion(
        chromium("/", SAMSUNG_UA, "Samsung Internet", "Android", true, &[]),
        Humans,
        BROWSER,
    );
}

#[test]
fn firefox_on_linux_is_human() {
    assert_opinion(get("/").firefox(), Humans, BROWSER);
}

#[test]
fn firefox_on_windows_is_human() {
    assert_opinion(get("/").firefox().ua(FIREFOX_WINDOWS_UA), Humans, BROWSER);
}

#[test]
fn safari_on_iphone_is_human() {
    assert_opinion(safari("/", SAFARI_IOS_UA), Humans, BROWSER);
}

#[test]
fn safari_on_macos_is_human() {
    assert_opinion(safari("/", SAFARI_MAC_UA), Humans, BROWSER);
}

#[test]
fn chrome_over_plain_http_without_client_hints_is_human() {
    assert_opinion(
        chrome_without(
            "/",
            &["sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform"],
        )
        .http(),
        Humans,
        BROWSER,
    );
}

#[test]
fn chrome_over_http3_is_human() {
    assert_opinion(
        chrome("/")
            .version(HttpVersion::Http3)
            .alpn("h3")
            .ja4("q13d0311h3_55b375c5d22e_cd85d2d88918"),
        Humans,
        BROWSER,
    );
}

#[test]
fn android_chrome_asking_for_the_desktop_site_is_human() {
    assert_opinion(
        chromium("/", CHROME_LINUX_UA, "Google Chrome", "Android", false, &[]),
        Humans,
        BROWSER,
    );
}

#[test]
fn android_webview_without_client_hints_is_human() {
    assert_opinion(
        chromium(
            "/",
            WEBVIEW_UA,
            "Android WebView",
            "Android",
            true,
            &["sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform"],
        ),
        Humans,
        BROWSER,
    );
}

#[test]
fn websocket_handshake_without_accept_is_human() {
    assert_opinion(
        chrome_without("/ws/chat", &["accept"])
            .header("upgrade", "websocket")
            .header("connection", "Upgrade")
            .version(HttpVersion::Http11),
        Humans,
        BROWSER,
    );
}

#[test]
fn browser_addressing_an_ip_without_sni_is_human() {
    assert_opinion(
        chrome("/")
            .host("203.0.113.80")
            .ja4("t13i1515h2_8daaf6152771_02713d6af862"),
        Humans,
        BROWSER,
    );
}

#[test]
fn page_assets_of_a_consistent_browser_are_not_a_crawl_pattern() {
    let mut req = chromium(
        "/static/js/chunk-7f3a.js",
        CHROME_UA,
        "Google Chrome",
        "Windows",
        false,
        &["sec-fetch-dest"],
    );
    req = req
        .header("sec-fetch-dest", "script")
        .behaviour(150, 140, 0);
    assert_opinion(req, Humans, BROWSER);
}

#[test]
fn browser_whose_large_cookie_was_cut_is_human() {
    assert_opinion(
        chrome("/account")
            .header("cookie", &format!("_ga={}", "x".repeat(4000)))
            .truncated(),
        Humans,
        BROWSER,
    );
}

#[test]
fn human_confidence_is_50() {
    assert_eq!(confidence(chrome("/")), 50);
}

// A valid challenge pass softens weak signals.

#[test]
fn valid_pass_softens_a_missing_accept_language() {
    assert_opinion(
        chrome_without("/", &["accept-language"]).challenge(ChallengePass::Valid),
        Humans,
        BROWSER,
    );
}

#[test]
fn valid_pass_softens_a_high_request_rate() {
    assert_opinion(
        chrome("/search")
            .behaviour(240, 20, 0)
            .challenge(ChallengePass::Valid),
        Humans,
        BROWSER,
    );
}

#[test]
fn valid_pass_softens_earlier_failed_challenges() {
    assert_opinion(
        chrome("/login")
            .behaviour(12, 3, 3)
            .challenge(ChallengePass::Valid),
        Humans,
        BROWSER,
    );
}

#[test]
fn valid_pass_softens_an_empty_user_agent() {
    assert_opinion(
        get("/")
            .header("accept", "*/*")
            .challenge(ChallengePass::Valid),
        Humans,
        "classifier.valid-pass",
    );
}

#[test]
fn valid_pass_softens_an_unrecognised_client() {
    assert_opinion(
        bot("Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)").challenge(ChallengePass::Valid),
        Humans,
        "classifier.valid-pass",
    );
}

#[test]
fn waited_pass_softens_a_text_browser_and_says_so() {
    assert_opinion(
        bot("Lynx/2.9.0dev.12 libwww-FM/2.14 SSL-MM/1.4.1 GNUTLS/3.7.8")
            .challenge(ChallengePass::Waited),
        Humans,
        "classifier.waited-pass",
    );
}

#[test]
fn waited_pass_does_not_soften_a_scanner() {
    assert_opinion(
        bot("sqlmap/1.8").challenge(ChallengePass::Waited),
        SecurityIssues,
        "classifier.scanner",
    );
}

// Near misses: ordinary requests that look a little like attacks.

#[test]
fn search_for_select_and_union_words_is_human() {
    assert_opinion(chrome("/search?q=select+a+union+rep"), Humans, BROWSER);
}

#[test]
fn search_for_trade_union_selection_is_human() {
    assert_opinion(
        chrome("/search?q=trade%20union%20selection%20process"),
        Humans,
        BROWSER,
    );
}

#[test]
fn blog_post_about_etc_passwd_is_human() {
    assert_opinion(chrome("/blog/how-to-use-etc-passwd"), Humans, BROWSER);
}

#[test]
fn search_for_a_javascript_book_is_human() {
    assert_opinion(
        chrome("/search?q=javascript:+the+good+parts"),
        Humans,
        BROWSER,
    );
}

#[test]
fn pipe_separated_filter_is_human() {
    assert_opinion(chrome("/shop?tags=dog|cat&sort=price"), Humans, BROWSER);
}

#[test]
fn search_with_or_is_human() {
    assert_opinion(chrome("/search?q=black+or+white+shoes"), Humans, BROWSER);
}

#[test]
fn onload_callback_parameter_is_human() {
    assert_opinion(
        chrome("/widget.js?onload=initWidget&render=explicit"),
        Humans,
        BROWSER,
    );
}

#[test]
fn blog_post_about_sleep_is_human() {
    assert_opinion(chrome("/blog/sleep-better-in-5-steps"), Humans, BROWSER);
}

#[test]
fn product_named_gold_is_human() {
    assert_opinion(chrome("/products/gold"), Humans, BROWSER);
}

#[test]
fn release_tarball_download_is_human() {
    assert_opinion(chrome("/downloads/myapp-1.2.0.tar.gz"), Humans, BROWSER);
}

#[test]
fn template_placeholder_left_in_a_link_is_human() {
    assert_opinion(chrome("/track?id={{request_id}}"), Humans, BROWSER);
}

#[test]
fn actuator_health_check_is_human() {
    assert_opinion(chrome("/actuator/health"), Humans, BROWSER);
}

#[test]
fn security_txt_is_human() {
    assert_opinion(chrome("/.well-known/security.txt"), Humans, BROWSER);
}

#[test]
fn sql_course_page_is_human() {
    assert_opinion(chrome("/courses/learn-sql"), Humans, BROWSER);
}

#[test]
fn single_relative_climb_in_a_redirect_is_human() {
    assert_opinion(chrome("/login?next=../account"), Humans, BROWSER);
}

#[test]
fn bare_wp_config_is_left_to_the_wordpress_rules() {
    assert_opinion(chrome("/wp-config.php"), Humans, BROWSER);
}

#[test]
fn javascript_void_link_is_human() {
    assert_opinion(chrome("/page?href=javascript:void(0)"), Humans, BROWSER);
}

#[test]
fn price_with_dollar_parenthesis_is_human() {
    assert_opinion(chrome("/search?q=shoes+under+$(50)"), Humans, BROWSER);
}
