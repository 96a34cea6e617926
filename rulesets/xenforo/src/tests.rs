//! Unit tests of the XenForo rule set with realistic requests.

use super::Xenforo;
use botgate_ruleset_sdk::Category::*;
use botgate_ruleset_sdk::testing::*;

const SCRIPT_UA: &str = "python-requests/2.31.0";
const ORIGIN: &str = "https://forum.example.com";
const STRIPE_SIG: &str =
    "t=1718000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd";

// --- Visitors: left to the classifier. ---

#[test]
fn no_opinion_outside_the_scope_on_generated_requests() {
    assert_scope_holds::<Xenforo>(env!("CARGO_MANIFEST_DIR"), 50_000);
}

#[test]
fn ordinary_pages_are_outside_the_scope() {
    // Avatars and attachment thumbnails under /data/ too: only PHP there is a probe.
    assert_outside_scope::<Xenforo>(ORDINARY_PAGES);
    assert_outside_scope::<Xenforo>(&[
        "/data/avatars/m/0/1.jpg?1700000000",
        "/styles/default/xenforo/logo.png",
    ]);
}

#[test]
fn other_applications_entry_points_are_outside_the_scope() {
    // Other applications' PHP entry points, logins and admin pages: no rule answers them.
    assert_outside_scope::<Xenforo>(&[
        "/wp-login.php",
        "/index.php?id=1",
        "/remote.php/dav/files/alice/",
        "/wp-admin/admin-ajax.php",
        "/administrator/index.php",
        "/user/login",
        "/wp-config.php.bak",
    ]);
}

#[test]
fn member_reading_a_thread_is_left_alone() {
    assert_category::<Xenforo>(get("/threads/welcome-to-the-forum.12/").browser(), None);
    assert_category::<Xenforo>(get("/index.php?threads/welcome.12/page-3").firefox(), None);
}

#[test]
fn styles_avatars_and_attachments_are_left_alone() {
    assert_category::<Xenforo>(
        get("/css.php?css=public%3Anormalize.css%2Cpublic%3Acore.less&s=1&l=1&d=1718000000")
            .browser(),
        None,
    );
    assert_category::<Xenforo>(get("/data/avatars/m/0/1.jpg?1718000000").browser(), None);
}

#[test]
fn a_single_browser_login_is_not_an_attack() {
    assert_category::<Xenforo>(post("/login/login").browser(), None);
}

#[test]
fn a_member_replying_from_a_browser_is_fine() {
    assert_category::<Xenforo>(
        post("/threads/welcome-to-the-forum.12/add-reply")
            .browser()
            .header("origin", ORIGIN)
            .header("x-requested-with", "XMLHttpRequest"),
        None,
    );
}

#[test]
fn visitors_browsers_running_jobs_are_left_alone() {
    assert_category::<Xenforo>(post("/job.php").browser().header("origin", ORIGIN), None);
}

#[test]
fn the_mention_autocomplete_in_the_editor_is_fine() {
    assert_category::<Xenforo>(
        get("/members/find?q=jo&_xfResponseType=json")
            .browser()
            .header("x-requested-with", "XMLHttpRequest"),
        None,
    );
}

#[test]
fn an_admin_upgrading_from_a_browser_is_fine() {
    assert_category::<Xenforo>(get("/install/index.php?upgrade/").browser(), None);
}

// --- Legitimate machine clients: services and payments. ---

#[test]
fn api_client_with_its_key_is_a_service() {
    assert_category::<Xenforo>(
        post("/api/threads/")
            .machine("Discourse-Importer/1.0")
            .header("xf-api-key", "Tz8vN4kQ2mX7pL9sR3wY6bJ1cF5hD0aE")
            .header("xf-api-user", "1"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn stripe_payment_callback_with_signature_is_a_payment() {
    assert_category::<Xenforo>(
        post("/payment_callback.php?_xfProvider=stripe")
            .machine("Stripe/1.0 (+https://stripe.com/docs/webhooks)")
            .header("stripe-signature", STRIPE_SIG),
        Some(ServicesAndPayments),
    );
}

#[test]
fn paypal_ipn_callback_is_a_payment() {
    assert_category::<Xenforo>(
        post("/payment_callback.php?_xfProvider=paypal")
            .machine("PayPal IPN ( https://www.paypal.com/ipn )"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn job_runner_from_a_cron_service_is_a_service() {
    assert_category::<Xenforo>(
        get("/job.php")
            .machine("Mozilla/5.0 (compatible; cron-job.org/1.2; +https://cron-job.org/en/faq/)"),
        Some(ServicesAndPayments),
    );
    assert_category::<Xenforo>(
        post("/job.php").machine("curl/8.5.0").ip("127.0.0.1"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn feed_reader_on_the_forum_feed_is_a_service() {
    assert_category::<Xenforo>(
        get("/forums/-/index.rss")
            .machine("Inoreader/1.0 (+http://www.inoreader.com/feed-fetcher; 3 subscribers)"),
        Some(ServicesAndPayments),
    );
}

// --- Callback and API paths without the client's marks: not services. ---

#[test]
fn stripe_callback_without_signature_is_not_a_payment() {
    assert_category::<Xenforo>(
        post("/payment_callback.php?_xfProvider=stripe")
            .machine("Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
        None,
    );
}

#[test]
fn api_path_without_a_key_is_not_a_service() {
    assert_category::<Xenforo>(get("/api/users/").machine(SCRIPT_UA), None);
}

// --- Leaked files, installer and protected folders: security issues. ---

#[test]
fn config_and_its_backups_are_probes() {
    for path in [
        "/src/config.php",
        "/forum/src/config.php",
        "/src/config.php.bak",
        "/src/.config.php.swp",
        "/src/config.php~",
        "/library/config.php",
        "/.wp-config.php.swp",
    ] {
        assert_category::<Xenforo>(get(path).browser(), Some(SecurityIssues));
    }
}

#[test]
fn internal_data_is_a_probe() {
    assert_category::<Xenforo>(
        get("/internal_data/attachments/0/123-4f1e2d3c4b5a69788796a5b4c3d2e1f0.data"),
        Some(SecurityIssues),
    );
    assert_category::<Xenforo>(get("/internal_data/install-lock.php"), Some(SecurityIssues));
}

#[test]
fn source_folders_and_cli_runner_are_probes() {
    assert_category::<Xenforo>(get("/src/XF/App.php"), Some(SecurityIssues));
    assert_category::<Xenforo>(get("/cmd.php"), Some(SecurityIssues));
}

#[test]
fn php_in_the_data_folder_is_a_web_shell_probe() {
    assert_category::<Xenforo>(get("/data/avatars/l/0/shell.php"), Some(SecurityIssues));
}

#[test]
fn installer_probed_by_a_script_is_an_attack() {
    assert_category::<Xenforo>(
        get("/install/index.php?install/").machine(SCRIPT_UA),
        Some(SecurityIssues),
    );
}

// --- Brute force and enumeration: security issues. ---

#[test]
fn login_brute_force_is_an_attack() {
    assert_category::<Xenforo>(
        post("/login/login").browser().behaviour(30, 2, 0),
        Some(SecurityIssues),
    );
    assert_category::<Xenforo>(
        post("/index.php?login/login")
            .machine(SCRIPT_UA)
            .behaviour(10, 1, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn admin_control_panel_brute_force_is_an_attack() {
    assert_category::<Xenforo>(
        post("/admin.php?login/login").browser().behaviour(40, 1, 0),
        Some(SecurityIssues),
    );
    assert_category::<Xenforo>(
        post("/forum/admin.php?login").machine(SCRIPT_UA),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn two_step_code_guessing_is_an_attack() {
    assert_category::<Xenforo>(
        post("/login/two-step?_xfRedirect=%2F&remember=1")
            .browser()
            .behaviour(20, 1, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn member_search_from_a_script_is_enumeration() {
    assert_category::<Xenforo>(
        get("/index.php?members/find&q=ad&_xfResponseType=json").machine(SCRIPT_UA),
        Some(SecurityIssues),
    );
}

#[test]
fn script_walking_member_profiles_is_enumeration() {
    assert_category::<Xenforo>(
        get("/members/4711/")
            .machine("Go-http-client/1.1")
            .behaviour(120, 118, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn job_runner_flood_is_an_attack() {
    assert_category::<Xenforo>(
        post("/job.php").machine(SCRIPT_UA).behaviour(300, 1, 0),
        Some(SecurityIssues),
    );
}

// --- Spam and odd clients: suspicious behaviour. ---

#[test]
fn scripted_registration_is_spam() {
    assert_category::<Xenforo>(
        post("/register/register").machine(SCRIPT_UA),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn reply_burst_is_spam() {
    assert_category::<Xenforo>(
        post("/threads/buy-cheap-watches.99/add-reply")
            .browser()
            .header("origin", ORIGIN)
            .behaviour(40, 4, 0),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn new_thread_with_a_copied_browser_agent_is_spam() {
    assert_category::<Xenforo>(
        post("/forums/off-topic.7/post-thread").ua(CHROME_UA),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn scripted_direct_messages_are_spam() {
    assert_category::<Xenforo>(
        post("/direct-messages/add").machine(SCRIPT_UA),
        Some(SuspiciousBehaviour),
    );
    assert_category::<Xenforo>(
        post("/index.php?conversations/add").machine(SCRIPT_UA),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn scripted_contact_form_is_spam() {
    assert_category::<Xenforo>(
        post("/misc/contact").machine("curl/8.5.0"),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn password_reset_burst_is_suspicious() {
    assert_category::<Xenforo>(
        post("/lost-password/").browser().behaviour(12, 1, 0),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn scripted_login_is_suspicious() {
    assert_category::<Xenforo>(
        post("/login/login").machine(SCRIPT_UA),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn info_names_the_component_after_the_crate() {
    use botgate_ruleset_sdk::Ruleset;
    assert_eq!(Xenforo::info().name, "xenforo");
}

#[test]
fn sensitive_paths_are_judged_alike_however_spelled() {
    assert_spellings_agree::<Xenforo>(
        |target| get(target).machine("curl/8.5.0"),
        &[
            "/internal_data/install-lock.php",
            "/src/XF/App.php",
            "/data/avatars/l/0/shell.php",
        ],
    );
}
