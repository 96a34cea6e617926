//! Services and payments: monitors, feed readers, ad crawlers, payment callbacks,
//! certificate validation and mobile apps.

use super::fixtures::*;

#[test]
fn uptimerobot_is_monitoring() {
    assert_opinion(
        bot("Mozilla/5.0 (compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)"),
        ServicesAndPayments,
        "classifier.monitoring",
    );
}

#[test]
fn pingdom_is_monitoring() {
    assert_opinion(
        bot("Pingdom.com_bot_version_1.4_(http://www.pingdom.com/)"),
        ServicesAndPayments,
        "classifier.monitoring",
    );
}

#[test]
fn new_relic_synthetics_is_monitoring_not_the_icbot_inside_it() {
    assert_opinion(
        bot("Mozilla/5.0 (compatible; NewRelicbot/2.1; +http://www.newrelic.com)"),
        ServicesAndPayments,
        "classifier.monitoring",
    );
}

#[test]
fn w3c_link_checker_on_libwww_perl_is_monitoring() {
    assert_opinion(
        bot("W3C-checklink/4.5 [4.160] libwww-perl/5.823"),
        ServicesAndPayments,
        "classifier.monitoring",
    );
}

#[test]
fn feedly_is_a_feed_reader() {
    assert_opinion(
        get("/feed.xml").machine(
            "Feedly/1.0 (+http://www.feedly.com/fetcher.html; 42 subscribers; like FeedFetcher-Google)",
        ),
        ServicesAndPayments,
        "classifier.feed-reader",
    );
}

#[test]
fn adsense_mediapartners_is_advertising() {
    assert_opinion(
        bot("Mediapartners-Google"),
        ServicesAndPayments,
        "classifier.advertising-crawler",
    );
}

#[test]
fn stripe_webhook_is_a_known_service() {
    assert_opinion(
        post("/webhooks/stripe").machine("Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
        ServicesAndPayments,
        "classifier.known-service",
    );
}

#[test]
fn paypal_ipn_is_a_known_service() {
    assert_opinion(
        post("/paypal/ipn").machine("PayPal IPN ( https://www.paypal.com/ipn )"),
        ServicesAndPayments,
        "classifier.known-service",
    );
}

#[test]
fn lets_encrypt_validation_is_a_known_service_not_a_scanner() {
    assert_opinion(
        get("/.well-known/acme-challenge/LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0").machine(
            "Mozilla/5.0 (compatible; Let's Encrypt validation server; +https://www.letsencrypt.org)",
        ),
        ServicesAndPayments,
        "classifier.known-service",
    );
}

#[test]
fn ios_app_cfnetwork_is_a_mobile_app_client() {
    assert_opinion(
        get("/api/v2/cart").machine("MyShop/5021 CFNetwork/1496.0.7 Darwin/23.5.0"),
        ServicesAndPayments,
        "classifier.mobile-app-client",
    );
}

#[test]
fn android_app_dalvik_is_a_mobile_app_client() {
    assert_opinion(
        get("/api/v2/cart")
            .machine("Dalvik/2.1.0 (Linux; U; Android 13; SM-A546B Build/TP1A.220624.014)"),
        ServicesAndPayments,
        "classifier.mobile-app-client",
    );
}

#[test]
fn monitor_on_a_browser_user_agent_suffix_is_monitoring() {
    assert_opinion(
        get("/health").machine("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/86.0.4240.111 Safari/537.36 StatusCake"),
        ServicesAndPayments,
        "classifier.monitoring",
    );
}
