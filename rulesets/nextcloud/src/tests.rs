//! Unit tests of the Nextcloud rule set with realistic requests.

use super::Nextcloud;
use botgate_ruleset_sdk::Category::*;
use botgate_ruleset_sdk::testing::*;

const DESKTOP_UA: &str = "Mozilla/5.0 (Windows) mirall/3.13.2stable-Win64 (build 20240520) (Nextcloud, windows-10.0.22631 ClientArchitecture: x86_64 OsArchitecture: x86_64)";
const ANDROID_UA: &str = "Mozilla/5.0 (Android) Nextcloud-android/3.29.1";
const IOS_UA: &str = "Mozilla/5.0 (iOS) Nextcloud-iOS/5.5.3";
const DAVX5_UA: &str = "DAVx5/4.4.2-ose (2024/06/10; dav4jvm; okhttp/4.12.0) Android/14";
const APPLE_CAL_UA: &str = "iOS/17.5.1 (21F90) dataaccessd/1.0";
const APP_PASSWORD: &str = "Basic YWxpY2U6Q2xQV2YtYnF3Q3gtTmZ0ZEItN1R5a1otWWZuR3A=";
const SCRIPT_UA: &str = "python-requests/2.31.0";

// --- Visitors: left to the classifier. ---

#[test]
fn no_opinion_outside_the_scope_on_generated_requests() {
    assert_scope_holds::<Nextcloud>(env!("CARGO_MANIFEST_DIR"), 50_000);
}

#[test]
fn ordinary_pages_are_outside_the_scope() {
    assert_outside_scope::<Nextcloud>(ORDINARY_PAGES);
    assert_outside_scope::<Nextcloud>(&["/img/logo.svg"]);
}

#[test]
fn browser_opening_the_files_app_is_left_alone() {
    assert_category::<Nextcloud>(get("/apps/files/").browser(), None);
    assert_category::<Nextcloud>(get("/index.php/apps/dashboard/").firefox(), None);
}

#[test]
fn static_assets_are_left_alone() {
    assert_category::<Nextcloud>(get("/core/css/server.css?v=2f0e3a6d").browser(), None);
    assert_category::<Nextcloud>(get("/dist/core-main.js?v=8a1b2c").browser(), None);
}

#[test]
fn a_single_browser_login_is_not_an_attack() {
    assert_category::<Nextcloud>(post("/login").browser(), None);
    assert_category::<Nextcloud>(post("/nextcloud/index.php/login").firefox(), None);
}

#[test]
fn web_ui_webdav_with_a_session_cookie_is_left_to_the_classifier() {
    assert_category::<Nextcloud>(
        request("PROPFIND", "/remote.php/dav/files/alice/Documents/")
            .browser()
            .header("cookie", "oc_sessionPassphrase=abc; nc_session_id=def")
            .header("requesttoken", "Zm9vYmFy"),
        None,
    );
}

#[test]
fn admin_setup_check_of_the_data_folder_is_not_a_probe() {
    assert_category::<Nextcloud>(
        get("/data/.ocdata?t=1718000000").machine("Nextcloud Server Crawler"),
        None,
    );
    assert_category::<Nextcloud>(get("/data/htaccesstest.txt").browser(), None);
}

// --- Legitimate machine clients: services. ---

#[test]
fn desktop_client_syncing_over_webdav_is_a_service() {
    assert_category::<Nextcloud>(
        request("PROPFIND", "/remote.php/dav/files/alice/")
            .machine(DESKTOP_UA)
            .header("authorization", APP_PASSWORD)
            .header("depth", "1")
            .behaviour(240, 180, 0),
        Some(ServicesAndPayments),
    );
    assert_category::<Nextcloud>(
        request("PUT", "/remote.php/dav/uploads/alice/4183021/00001")
            .machine(DESKTOP_UA)
            .header("authorization", APP_PASSWORD),
        Some(ServicesAndPayments),
    );
}

#[test]
fn android_app_uploading_is_a_service() {
    assert_category::<Nextcloud>(
        request("MOVE", "/remote.php/webdav/Photos/IMG_2024.jpg")
            .machine(ANDROID_UA)
            .header("authorization", APP_PASSWORD)
            .header(
                "destination",
                "https://cloud.example.com/remote.php/webdav/Photos/2024/IMG_2024.jpg",
            ),
        Some(ServicesAndPayments),
    );
}

#[test]
fn caldav_clients_discovering_and_syncing_are_services() {
    assert_category::<Nextcloud>(
        request("PROPFIND", "/.well-known/caldav").machine(APPLE_CAL_UA),
        Some(ServicesAndPayments),
    );
    assert_category::<Nextcloud>(
        request("REPORT", "/remote.php/dav/calendars/alice/personal/")
            .machine(DAVX5_UA)
            .header("authorization", APP_PASSWORD),
        Some(ServicesAndPayments),
    );
    assert_category::<Nextcloud>(
        request(
            "PROPFIND",
            "/remote.php/dav/addressbooks/users/alice/contacts/",
        )
        .machine("Mozilla/5.0 (X11; Linux x86_64; rv:115.0) Gecko/20100101 Thunderbird/115.12.0")
        .header("authorization", APP_PASSWORD),
        Some(ServicesAndPayments),
    );
}

#[test]
fn webdav_client_with_credentials_at_a_normal_rate_is_a_service() {
    assert_category::<Nextcloud>(
        request("MKCOL", "/remote.php/dav/files/backup/2024-06-10/")
            .machine("curl/8.5.0")
            .header("authorization", APP_PASSWORD),
        Some(ServicesAndPayments),
    );
}

#[test]
fn ocs_api_client_with_credentials_is_a_service() {
    assert_category::<Nextcloud>(
        get("/ocs/v2.php/cloud/users?search=&limit=50&format=json")
            .machine(SCRIPT_UA)
            .header("ocs-apirequest", "true")
            .header("authorization", APP_PASSWORD),
        Some(ServicesAndPayments),
    );
    assert_category::<Nextcloud>(
        get("/ocs/v2.php/apps/notifications/api/v2/notifications")
            .machine(IOS_UA)
            .header("ocs-apirequest", "true")
            .header("authorization", APP_PASSWORD),
        Some(ServicesAndPayments),
    );
}

#[test]
fn client_apps_on_their_other_endpoints_are_services() {
    assert_category::<Nextcloud>(
        get("/index.php/avatar/alice/64")
            .machine(DESKTOP_UA)
            .header("authorization", APP_PASSWORD),
        Some(ServicesAndPayments),
    );
    assert_category::<Nextcloud>(
        get("/core/preview?fileId=1234&x=256&y=256&a=true")
            .machine(ANDROID_UA)
            .header("cookie", "oc_sessionPassphrase=abc; nc_session_id=def"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn login_flow_v2_polling_by_the_desktop_client_is_a_service() {
    assert_category::<Nextcloud>(
        post("/index.php/login/v2/poll")
            .machine(DESKTOP_UA)
            .behaviour(40, 2, 0),
        Some(ServicesAndPayments),
    );
}

#[test]
fn serverinfo_monitoring_with_its_token_is_a_service() {
    assert_category::<Nextcloud>(
        get("/ocs/v2.php/apps/serverinfo/api/v1/info?format=json")
            .machine("Prometheus/2.52.0")
            .header("nc-token", "9f7c1e2ab34d"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn uptime_monitor_on_status_php_is_a_service() {
    assert_category::<Nextcloud>(
        get("/status.php")
            .machine("Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn webcron_is_a_service() {
    assert_category::<Nextcloud>(
        get("/cron.php")
            .machine("Mozilla/5.0 (compatible; cron-job.org/1.2; +https://cron-job.org/en/faq/)"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn federated_share_from_another_server_is_a_service() {
    assert_category::<Nextcloud>(
        post("/ocm/shares").machine("Nextcloud Server Crawler"),
        Some(ServicesAndPayments),
    );
}

#[test]
fn news_app_api_client_is_a_service() {
    assert_category::<Nextcloud>(
        get("/index.php/apps/news/api/v1-3/items?type=3&getRead=false&batchSize=-1")
            .machine("NewsFlash/3.3.3")
            .header("authorization", APP_PASSWORD),
        Some(ServicesAndPayments),
    );
}

#[test]
fn syncing_a_users_file_named_like_a_server_file_is_not_a_probe() {
    assert_category::<Nextcloud>(
        request("PUT", "/remote.php/dav/files/alice/Logs/nextcloud.log")
            .machine(DESKTOP_UA)
            .header("authorization", APP_PASSWORD),
        Some(ServicesAndPayments),
    );
}

#[test]
fn owncloud_signed_url_forgery_on_webdav_is_an_attack() {
    assert_category::<Nextcloud>(
        get("/remote.php/dav/files/admin/?OC-Credential=admin&OC-Verb=GET&OC-Expires=60&OC-Date=2023-11-28T00:00:00.000Z&OC-Signature=deadbeef")
            .machine(SCRIPT_UA),
        Some(SecurityIssues),
    );
}

// --- API paths without the client's marks: not services. ---

#[test]
fn webdav_path_without_credentials_from_a_script_is_not_a_service() {
    assert_category::<Nextcloud>(
        request("PROPFIND", "/remote.php/dav/files/alice/").machine(SCRIPT_UA),
        None,
    );
}

#[test]
fn status_php_from_an_unknown_script_is_not_a_service() {
    assert_category::<Nextcloud>(get("/status.php").machine("Go-http-client/1.1"), None);
}

#[test]
fn ocs_without_the_api_header_is_not_a_service() {
    assert_category::<Nextcloud>(
        get("/ocs/v2.php/apps/files_sharing/api/v1/shares")
            .machine(SCRIPT_UA)
            .header("authorization", APP_PASSWORD),
        None,
    );
}

// --- Leaked files, installer, updater and exploits: security issues. ---

#[test]
fn config_files_and_their_backups_are_probes() {
    for path in [
        "/config/config.php",
        "/config/config.php.bak",
        "/config/.config.php.swp",
        "/nextcloud/config/config.php~",
        "/config/s3.config.php",
        "/config/CAN_INSTALL",
    ] {
        assert_category::<Nextcloud>(get(path).browser(), Some(SecurityIssues));
    }
}

#[test]
fn data_folder_logs_database_and_files_are_probes() {
    assert_category::<Nextcloud>(get("/data/nextcloud.log"), Some(SecurityIssues));
    assert_category::<Nextcloud>(get("/data/owncloud.db").browser(), Some(SecurityIssues));
    assert_category::<Nextcloud>(
        get("/data/.ocdata").machine("Mozilla/5.0 zgrab/0.x"),
        Some(SecurityIssues),
    );
    assert_category::<Nextcloud>(
        get("/nextcloud/data/admin/files/passwords.kdbx"),
        Some(SecurityIssues),
    );
}

#[test]
fn protected_code_folders_and_cli_tools_are_probes() {
    assert_category::<Nextcloud>(
        get("/3rdparty/phpunit/phpunit/src/Util/PHP/eval-stdin.php"),
        Some(SecurityIssues),
    );
    assert_category::<Nextcloud>(get("/occ"), Some(SecurityIssues));
    assert_category::<Nextcloud>(get("/lib/base.php"), Some(SecurityIssues));
}

#[test]
fn installer_and_updater_probes_are_attacks() {
    assert_category::<Nextcloud>(get("/setup-nextcloud.php"), Some(SecurityIssues));
    assert_category::<Nextcloud>(
        get("/updater/index.php").machine(SCRIPT_UA),
        Some(SecurityIssues),
    );
}

#[test]
fn admin_running_the_web_updater_is_fine() {
    assert_category::<Nextcloud>(
        post("/updater/index.php")
            .browser()
            .header("x-updater-auth", "a1b2c3d4e5f6")
            .behaviour(14, 2, 0),
        None,
    );
}

#[test]
fn updater_password_guessing_is_an_attack() {
    assert_category::<Nextcloud>(
        post("/updater/index.php").browser().behaviour(20, 1, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn owncloud_graphapi_exploit_probe_is_an_attack() {
    assert_category::<Nextcloud>(
        get("/apps/graphapi/vendor/microsoft/microsoft-graph/tests/GetPhpInfo.php/.css"),
        Some(SecurityIssues),
    );
}

// --- Brute force and enumeration: security issues. ---

#[test]
fn login_brute_force_is_an_attack() {
    assert_category::<Nextcloud>(
        post("/index.php/login").browser().behaviour(45, 3, 0),
        Some(SecurityIssues),
    );
    assert_category::<Nextcloud>(
        post("/login").machine(SCRIPT_UA).behaviour(10, 1, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn borrowed_client_agent_does_not_excuse_login_brute_force() {
    assert_category::<Nextcloud>(
        post("/login").machine(ANDROID_UA).behaviour(30, 1, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn webdav_basic_auth_guessing_from_a_script_is_an_attack() {
    assert_category::<Nextcloud>(
        request("PROPFIND", "/remote.php/webdav/")
            .machine(SCRIPT_UA)
            .header("authorization", "Basic YWRtaW46cGFzc3dvcmQxMjM=")
            .behaviour(60, 1, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn share_password_brute_force_is_an_attack() {
    assert_category::<Nextcloud>(
        post("/s/k3Rn7pQm2xYz/authenticate/showShare")
            .browser()
            .behaviour(30, 2, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn share_token_guessing_is_an_attack() {
    assert_category::<Nextcloud>(
        get("/s/aB3dE5fG7hJ9kL1")
            .machine(SCRIPT_UA)
            .behaviour(80, 80, 0),
        Some(SecurityIssues),
    );
}

#[test]
fn unauthenticated_user_listing_is_enumeration() {
    assert_category::<Nextcloud>(
        get("/ocs/v1.php/cloud/users")
            .machine("curl/8.5.0")
            .header("ocs-apirequest", "true"),
        Some(SecurityIssues),
    );
    assert_category::<Nextcloud>(
        get("/ocs/v2.php/core/autocomplete/get?search=a&itemType=files"),
        Some(SecurityIssues),
    );
}

#[test]
fn two_factor_code_guessing_is_an_attack() {
    assert_category::<Nextcloud>(
        post("/index.php/login/challenge/totp")
            .browser()
            .behaviour(25, 2, 0),
        Some(SecurityIssues),
    );
}

// --- Spam and odd clients: suspicious behaviour. ---

#[test]
fn scripted_login_is_suspicious() {
    assert_category::<Nextcloud>(post("/login").machine(SCRIPT_UA), Some(SuspiciousBehaviour));
}

#[test]
fn scripted_registration_is_spam() {
    assert_category::<Nextcloud>(
        post("/index.php/apps/registration/").machine("curl/8.5.0"),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn public_form_submission_burst_is_spam() {
    assert_category::<Nextcloud>(
        post("/ocs/v2.php/apps/forms/api/v3/forms/12/submissions")
            .browser()
            .header("origin", "https://cloud.example.com")
            .header("ocs-apirequest", "true")
            .behaviour(25, 2, 0),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn password_reset_from_a_script_is_suspicious() {
    assert_category::<Nextcloud>(
        post("/lostpassword/email").machine(SCRIPT_UA),
        Some(SuspiciousBehaviour),
    );
}

#[test]
fn info_names_the_component_after_the_crate() {
    use botgate_ruleset_sdk::Ruleset;
    assert_eq!(Nextcloud::info().name, "nextcloud");
}

#[test]
fn sensitive_paths_are_judged_alike_however_spelled() {
    assert_spellings_agree::<Nextcloud>(
        |target| get(target).machine("curl/8.5.0"),
        &["/data/nextcloud.log", "/data/owncloud.db", "/occ"],
    );
}
