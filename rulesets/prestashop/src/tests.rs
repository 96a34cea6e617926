//! Unit tests of the PrestaShop rule set with realistic requests.

use super::Prestashop;
use botgate_ruleset_sdk::Category::*;
use botgate_ruleset_sdk::testing::*;

const SCRIPT_UA: &str = "python-requests/2.31.0";
/// The webservice key `Y6JXTPF7N4XKH2QVWRC9D3B8LM5ZA1EG` as Basic user name.
const WS_BASIC: &str = "Basic WTZKWFRQRjdONFhLSDJRVldSQzlEM0I4TE01WkExRUc6";
const STRIPE_SIG: &str =
    "t=1718000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd";

// --- Visitors: left to the classifier. ---

#[test]
fn no_opinion_outside_the_scope_on_generated_requests() {
    assert_scope_holds::<Prestashop>(env!("CARGO_MANIFEST_DIR"), 50_000);
}

#[test]
fn ordinary_pages_are_outside_the_scope() {
    // Product images, module assets and the theme's combined assets too.
    assert_outside_scope::<Prestashop>(ORDINARY_PAGES);
    assert_outside_scope::<Prestashop>(&[
        "/img/p/1/2/12-home_default.jpg",
        "/modules/ps_imageslider/images/sample-1.jpg",
        "/themes/classic/assets/cache/bottom-1a2b3c.js",
    ]);
}

#[test]
fn other_cms_php_entry_points_are_outside_the_scope() {
    assert_outside_scope::<Prestashop>(&[
        "/wp-login.php",
        "/index.php?id=1",
        "/remote.php/dav/files/alice/",
        "/admin.php",
        "/wp-admin/admin-ajax.php",
        "/administrator/index.php",
        "/modules/mod_login/tmpl/default.php",
    ]);
}

#[test]
fn shopper_browsing_products_is_left_alone() {
    assert_category::<Prestashop>(
        get("/en/men/1-1-hummingbird-printed-t-shirt.html").browser(),
        None,
    );
    assert_category::<Prestashop>(
        get("/index.php?id_product=1&controller=product").firefox(),
        None,
    );
}

#[test]
fn product_images_and_theme_assets_are_left_alone() {
    assert_category::<Prestashop>(get("/img/p/1/2/12-large_default.jpg").browser(), None);
    assert_category::<Prestashop>(
        get("/themes/classic/assets/cache/bottom-6e0f4a.js").browser(),
        None,
    );
}

#[test]
fn a_single_customer_login_from_a_browser_is_fine() {
    assert_category::<Prestashop>(
        post("/en/login?back=my-account")
            .browser()
            .header("origin", "https://shop.example.com"),
        None,
    );
}

#[test]
fn an_employee_logging_in_to_the_back_office_once_is_fine() {
    assert_category::<Prestashop>(
        post("/admin634qwxo3b/index.php?rand=1718000000123").browser(),
        None,
    );
}

#[test]
fn a_customer_using_the_contact_form_is_fine() {
    assert_category::<Prestashop>(
        post("/en/contact-us")
            .browser()
            .header("origin", "https://shop.example.com")
            .header("referer", "https://shop.example.com/en/contact-us"),
        None,
    );
}

#[test]
fn the_customer_returning_from_a_payment_page_is_left_alone() {
    assert_category::<Prestashop>(get("/en/module/ps_wirepayment/validation").browser(), None);
}

// --- Legitimate machine clients: services and payments. ---

#[test]
fn webservice_client_with_its_key_is_a_service() {
    assert_category::<Prestashop>(
        get("/api/products?display=full&output_format=JSON")
            .machine("GuzzleHttp/7")
            .header("authorization", WS_BASIC),
        Some(ServicesAndPayments),
    );
    assert_category::<Prestashop>(
        get("/api/orders?ws_key=Y6JXTPF7N4XKH2QVWRC9D3B8LM5ZA1EG&filter[current_state]=2")
            .machine("Shopware-Connector/2.1"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn stripe_webhook_with_signature_is_a_payment() {
    assert_category::<Prestashop>(
        post("/module/stripe_official/webhook")
            .machine("Stripe/1.0 (+https://stripe.com/docs/webhooks)")
            .header("stripe-signature", STRIPE_SIG),
        Some(ServicesAndPayments),
    );
}

#[test]
fn paypal_ipn_is_a_payment() {
    assert_category::<Prestashop>(
        post("/index.php?fc=module&module=paypal&controller=ipn")
            .machine("PayPal IPN ( https://www.paypal.com/ipn )"),
        Some(ServicesAndPayments),
    );
    assert_category::<Prestashop>(
        post("/modules/paypal/ipn.php").machine("PayPal IPN ( https://www.paypal.com/ipn )"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn signed_provider_callback_on_a_validation_script_is_a_payment() {
    assert_category::<Prestashop>(
        post("/modules/razorpay/validation.php")
            .machine("Razorpay-Webhook/v1")
            .header("x-razorpay-signature", "1f7a0c9bd3e8a1c2b4d5e6f708192a3b"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn cron_module_with_its_token_is_a_service() {
    assert_category::<Prestashop>(
        get("/modules/cronjobs/cronjobs.php?token=0c3f1e7d9a2b4c6e").machine("curl/8.5.0"),
        Some(ServicesAndPayments),
    );
    assert_category::<Prestashop>(
        get("/modules/gsitemap/gsitemap-cron.php?token=3a9f2c1b7e&id_shop=1")
            .machine("Wget/1.21.4"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn webservice_dispatcher_and_admin_api_with_their_keys_are_services() {
    assert_category::<Prestashop>(
        get("/webservice/dispatcher.php?url=products&ws_key=Y6JXTPF7N4XKH2QVWRC9D3B8LM5ZA1EG")
            .machine("GuzzleHttp/7"),
        Some(ServicesAndPayments),
    );
    assert_category::<Prestashop>(
        get("/admin-api/products").machine("GuzzleHttp/7").header(
            "authorization",
            "Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl",
        ),
        Some(ServicesAndPayments),
    );
}

#[test]
fn module_callback_scripts_with_signatures_are_payments() {
    assert_category::<Prestashop>(
        post("/modules/stripe_official/webhookhandler.php")
            .machine("Stripe/1.0 (+https://stripe.com/docs/webhooks)")
            .header("stripe-signature", STRIPE_SIG),
        Some(ServicesAndPayments),
    );
    assert_category::<Prestashop>(
        post("/modules/razorpay/notify.php")
            .machine("Razorpay-Webhook/v1")
            .header("x-razorpay-signature", "1f7a0c9bd3e8a1c2b4d5e6f708192a3b"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn faceted_search_indexer_and_search_cron_with_their_tokens_are_services() {
    assert_category::<Prestashop>(
        get("/modules/ps_facetedsearch/ps_facetedsearch-price-indexer.php?token=0c3f1e7d9a")
            .machine("curl/8.5.0"),
        Some(ServicesAndPayments),
    );
    assert_category::<Prestashop>(
        get("/admin634qwxo3b/searchcron.php?full=1&token=0c3f1e7d9a2b&id_shop=1")
            .machine("Wget/1.21.4"),
        Some(ServicesAndPayments),
    );
}

// --- Callback and API paths without the client's marks: not services. ---

#[test]
fn stripe_webhook_path_without_signature_is_not_a_payment() {
    assert_category::<Prestashop>(
        post("/module/stripe_official/webhook")
            .machine("Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
        None,
    );
}

#[test]
fn paypal_ipn_path_from_a_script_is_not_a_payment() {
    assert_category::<Prestashop>(post("/module/paypal/ipn").machine(SCRIPT_UA), None);
}

#[test]
fn webservice_without_a_key_is_not_a_service() {
    assert_category::<Prestashop>(get("/api/products").machine(SCRIPT_UA), None);
    assert_category::<Prestashop>(get("/api/products?ws_key=admin").machine(SCRIPT_UA), None);
}

#[test]
fn the_webservices_people_asked_for_by_a_script_without_a_key_is_enumeration() {
    for target in [
        "/api/customers",
        "/api/customers?ws_key=admin",
        "/api/employees/1",
        "/webservice/dispatcher.php?url=addresses",
    ] {
        assert_category::<Prestashop>(get(target).machine(SCRIPT_UA), Some(SecurityIssues));
    }
    // With the key it is the shop's own integration.
    assert_category::<Prestashop>(
        get("/api/customers")
            .machine("GuzzleHttp/7")
            .header("authorization", WS_BASIC),
        Some(ServicesAndPayments),
    );
}

#[test]
fn cron_script_without_a_token_is_not_a_service() {
    assert_category::<Prestashop>(
        get("/modules/cronjobs/cronjobs.php").machine("curl/8.5.0"),
        None,
    );
}

// --- Leaked files, installer and exploits: security issues. ---

#[test]
fn database_credentials_and_their_backups_are_probes() {
    for path in [
        "/app/config/parameters.php",
        "/app/config/parameters.php.bak",
        "/app/config/.parameters.php.swp",
        "/app/config/parameters.yml",
        "/config/settings.inc.php",
        "/shop/config/settings.inc.php~",
    ] {
        assert_category::<Prestashop>(get(path).browser(), Some(SecurityIssues));
    }
}

#[test]
fn logs_and_caches_are_probes() {
    assert_category::<Prestashop>(get("/var/logs/prod-2024-06-10.log"), Some(SecurityIssues));
    assert_category::<Prestashop>(get("/app/logs/prod.log"), Some(SecurityIssues));
    assert_category::<Prestashop>(
        get(
            "/var/cache/prod/smarty/compile/classiclayouts_layout_full_width_tpl/9f/8e/9f8e.file.layout-full-width.tpl.php",
        ),
        Some(SecurityIssues),
    );
}

#[test]
fn back_office_backups_are_probes() {
    assert_category::<Prestashop>(
        get("/admin/backups/1718000000-3f9a2c1b.sql.bz2"),
        Some(SecurityIssues),
    );
    assert_category::<Prestashop>(
        get(
            "/admin634qwxo3b/autoupgrade/backup/V8.1.6_20240610-101010-ab12cd34/auto-backupdb_000001_V8.1.6_20240610-101010-ab12cd34.sql.bz2",
        ),
        Some(SecurityIssues),
    );
}

#[test]
fn leftover_installer_is_a_probe_from_a_script() {
    // An administrator installs with a browser.
    assert_category::<Prestashop>(get("/install/index.php").browser(), None);
    assert_category::<Prestashop>(
        get("/install-dev/").machine(SCRIPT_UA),
        Some(SecurityIssues),
    );
}

#[test]
fn phpunit_in_a_module_vendor_folder_is_an_attack() {
    assert_category::<Prestashop>(
        post("/modules/ps_facetedsearch/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php")
            .machine("Mozilla/5.0 (Windows NT 10.0; Win64; x64)"),
        Some(SecurityIssues),
    );
}

#[test]
fn known_module_upload_exploits_are_attacks() {
    assert_category::<Prestashop>(
        post("/modules/columnadverts/uploadimage.php").machine(SCRIPT_UA),
        Some(SecurityIssues),
    );
    assert_category::<Prestashop>(
        post("/modules/attributewizardpro/file_upload.php").browser(),
        Some(SecurityIssues),
    );
}

#[test]
fn blockwishlist_order_sql_injection_is_an_attack() {
    assert_category::<Prestashop>(
        get("/module/blockwishlist/view?id_wishlist=1&order=product.name,%20(SELECT%20SLEEP(5))")
            .browser(),
        Some(SecurityIssues),
    );
}

#[test]
fn web_shell_in_the_upload_folder_is_an_attack() {
    assert_category::<Prestashop>(get("/upload/x.php"), Some(SecurityIssues));
    assert_category::<Prestashop>(get("/img/cms/shell.phtml"), Some(SecurityIssues));
}

#[test]
fn module_exploits_named_by_folder_or_script_are_attacks() {
    for path in [
        "/modules/videostab/ajax_videostab.php",
        "/modules/tdpsthemeoptionpanel/tdpsthemeoptionpanelajax.php",
        "/modules/bamegamenu/ajax_phpcode.php",
        "/modules/blocktestimonial/addtestimonial.php",
        "/modules/wg24themeadministration/wg24_ajax.php",
        "/modules/megamenu/uploadify/uploadify.php",
        "/modules/fieldvmegamenu/ajax/upload.php",
    ] {
        assert_category::<Prestashop>(post(path).machine(SCRIPT_UA), Some(SecurityIssues));
    }
}

#[test]
fn back_office_file_manager_from_a_script_is_a_probe() {
    assert_category::<Prestashop>(
        get("/admin634qwxo3b/filemanager/dialog.php").machine(SCRIPT_UA),
        Some(SecurityIssues),
    );
    assert_category::<Prestashop>(
        get("/admin634qwxo3b/filemanager/dialog.php").browser(),
        None,
    );
}

#[test]
fn web_shell_in_the_download_folder_is_an_attack() {
    assert_category::<Prestashop>(get("/download/cmd.php5"), Some(SecurityIssues));
    assert_category::<Prestashop>(get("/upload/index.php"), None);
}

// --- Brute force and card testing: security issues. ---

#[test]
fn back_office_login_brute_force_is_an_attack() {
    assert_category::<Prestashop>(
        post("/admin634qwxo3b/ajax-tab.php?rand=1718000000123")
            .browser()
            .behaviour(35, 2, 0),
        Some(SecurityIssues),
    );
    assert_category::<Prestashop>(
        post("/admin-dev/index.php?controller=AdminLogin")
            .machine(SCRIPT_UA)
            .behaviour(12, 1, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn customer_login_credential_stuffing_is_an_attack() {
    assert_category::<Prestashop>(
        post("/index.php?controller=authentication&back=my-account")
            .machine(SCRIPT_UA)
            .behaviour(20, 1, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn card_testing_through_a_payment_module_is_an_attack() {
    assert_category::<Prestashop>(
        post("/module/ps_checkout/create")
            .browser()
            .behaviour(30, 3, 0),
        Some(SecurityIssues),
    );
}

// --- Spam and odd clients: suspicious behaviour. ---

#[test]
fn scripted_account_registration_is_spam() {
    assert_category::<Prestashop>(
        post("/en/registration").machine(SCRIPT_UA),
        Some(SuspiciousBehaviour),
    );
    assert_category::<Prestashop>(
        post("/index.php?controller=authentication&create_account=1").machine("curl/8.5.0"),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn contact_form_burst_is_spam() {
    assert_category::<Prestashop>(
        post("/index.php?controller=contact")
            .browser()
            .header("origin", "https://shop.example.com")
            .behaviour(14, 1, 0),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn newsletter_subscription_with_a_copied_browser_agent_is_spam() {
    assert_category::<Prestashop>(
        post("/module/ps_emailsubscription/subscription").ua(CHROME_UA),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn scripted_product_review_is_spam() {
    assert_category::<Prestashop>(
        post("/index.php?fc=module&module=productcomments&controller=PostComment&id_product=3")
            .machine(SCRIPT_UA),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn scripted_back_office_login_is_suspicious() {
    assert_category::<Prestashop>(
        post("/admin634qwxo3b/index.php?controller=AdminLogin").machine("curl/8.5.0"),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn info_names_the_component_after_the_crate() {
    use botgate_ruleset_sdk::Ruleset;
    assert_eq!(Prestashop::info().name, "prestashop");
}

#[test]
fn sensitive_paths_are_judged_alike_however_spelled() {
    assert_spellings_agree::<Prestashop>(
        |target| get(target).machine("curl/8.5.0"),
        &[
            "/var/logs/prod-2024-06-10.log",
            "/install/index.php",
            "/app/logs/prod.log",
        ],
    );
}
