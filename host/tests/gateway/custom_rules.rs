//! Websites' custom rules through the binary: conditions on the client (address,
//! country and ASN from a GeoIP database built here) and the request, their precedence
//! over the rule components, the one reading of the path, what the access log and the
//! metrics say, the API's checks, and a reload that reads the database again.

use super::*;
use maxminddb_writer::Database;
use maxminddb_writer::metadata::IpVersion;
use maxminddb_writer::paths::IpAddrWithMask;
use serde::Serialize;
use std::net::IpAddr;

#[derive(Serialize)]
struct Country {
    iso_code: &'static str,
}

/// One network's record, with the fields of GeoLite2 Country and ASN in one.
#[derive(Serialize)]
struct Record {
    #[serde(skip_serializing_if = "Option::is_none")]
    country: Option<Country>,
    #[serde(skip_serializing_if = "Option::is_none")]
    autonomous_system_number: Option<u32>,
}

/// Writes an IPv6 MaxMind DB of `networks` (network, country, ASN) to `path`.
fn geoip_database(path: &Path, networks: &[(&str, Option<&'static str>, Option<u32>)]) {
    let mut db = Database::default();
    db.metadata.ip_version = IpVersion::V6;
    db.metadata.binary_format_major_version = 2;
    db.metadata.database_type = "botgate-test-GeoIP".into();
    for (network, country, asn) in networks {
        let (address, prefix) = network.split_once('/').unwrap();
        let (address, prefix): (IpAddr, u8) = (address.parse().unwrap(), prefix.parse().unwrap());
        // IPv4 lives under ::/96 in an IPv6 database.
        let (address, prefix) = match address {
            IpAddr::V4(v4) => (IpAddr::V6(v4.to_ipv6_compatible()), prefix + 96),
            v6 => (v6, prefix),
        };
        let data = db
            .insert_value(Record {
                country: country.map(|iso_code| Country { iso_code }),
                autonomous_system_number: *asn,
            })
            .unwrap();
        db.insert_node(IpAddrWithMask::new(address, prefix), data);
    }
    let file = std::fs::File::create(path).unwrap();
    db.write_to(std::io::BufWriter::new(file)).unwrap();
}

/// A request from `client`, through the trusted proxy 127.0.0.2.
fn from(gateway: &Gateway, client: &str, request: Outgoing<'_>) -> Answer {
    let preamble = match client.parse::<IpAddr>().unwrap() {
        IpAddr::V4(_) => proxy_header(&format!("{client}:40000"), gateway.http),
        // PROXY v2 names both ends in one family.
        IpAddr::V6(_) => proxy_header(
            &format!("[{client}]:40000"),
            format!("[::1]:{}", gateway.http.port()).parse().unwrap(),
        ),
    };
    let visit = Visit {
        source: Some([127, 0, 0, 2].into()),
        preamble,
        ..Visit::default()
    };
    visitor::send(gateway.http, &visit, request).unwrap()
}

fn rule(conditions: Value, outcome: Value) -> Value {
    let mut rule = json!({ "conditions": conditions });
    for (key, value) in outcome.as_object().unwrap() {
        rule[key] = value.clone();
    }
    rule
}

#[test]
fn custom_rules_decide_before_the_components_and_are_named_in_the_log_and_metrics() {
    let origin = origin("site");
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("geo.mmdb");
    geoip_database(
        &database,
        &[
            ("203.0.113.0/24", Some("DE"), Some(64500)),
            ("198.51.100.0/24", Some("US"), Some(64501)),
            ("2001:db8::/32", Some("FR"), None),
        ],
    );
    let file = dir.path().join("botgate.toml");
    let geoip = database.display().to_string();
    std::fs::write(
        &file,
        format!("geoip-db = [\"{geoip}\"]\ntrusted-proxy = [\"127.0.0.2/32\"]\n"),
    )
    .unwrap();
    let config = file.display().to_string();
    let gateway = gateway(origin.address.port(), &["--config", &config]);
    let host = "rules.example";
    let mut settings = loadbalancer(&["bot_protection"]);
    settings["custom_rules"] = json!([
        rule(
            json!([{"field": "ip", "operator": "in_network", "value": ["192.0.2.0/24"]}]),
            json!({"action": "grant", "description": "the office"})
        ),
        rule(
            json!([{"field": "country", "operator": "is_any_of", "value": ["de", "FR"]}]),
            json!({"action": "deny"})
        ),
        rule(
            json!([
                {"field": "asn", "operator": "is_any_of", "value": [64501, "AS64999"]},
                {"field": "path", "operator": "starts_with", "value": "/Admin"},
            ]),
            json!({"action": "captcha"})
        ),
        rule(
            json!([{"field": "header", "name": "X-Debug", "operator": "is", "value": "on"}]),
            json!({"category": "security_issues"})
        ),
        rule(
            json!([
                {"field": "user_agent", "operator": "matches", "value": r"^curl/\d"},
                {"field": "method", "operator": "is_any_of", "value": ["post", "put"]},
            ]),
            json!({"category": "content_scrapers"})
        ),
    ]);
    add_website(
        &gateway,
        json!({"domain": host, "ip": ["127.0.0.1"], "settings": settings}),
    )
    .unwrap();
    let before = origin.requests();

    // The office passes with what the Core Rule Set would deny: custom rules come first.
    let attack = "/?id=1%20union%20select%20password%20from%20users--";
    let office = from(&gateway, "192.0.2.9", Outgoing::get(host, attack).browser());
    assert_eq!(office.status, 200, "{}", office.text());
    let line = access_line(&gateway, attack);
    assert!(
        line.contains("action=\"grant\"")
            && line.contains("decider=\"custom\"")
            && line.contains("reason=custom.1 "),
        "{line}"
    );
    // Outside the office the components decide as ever.
    assert_eq!(
        from(
            &gateway,
            "100.64.0.1",
            Outgoing::get(host, attack).browser()
        )
        .status,
        403
    );

    // By country, from the database.
    let german = from(
        &gateway,
        "203.0.113.5",
        Outgoing::get(host, "/de").browser(),
    );
    assert_eq!(german.status, 403);
    let line = access_line(&gateway, "/de");
    assert!(
        line.contains("category=\"none\"")
            && line.contains("action=\"deny\"")
            && line.contains("reason=custom.2 "),
        "{line}"
    );
    let french = from(
        &gateway,
        "2001:db8::5",
        Outgoing::get(host, "/fr").browser(),
    );
    assert_eq!(french.status, 403, "an IPv6 client's country");
    assert!(access_line(&gateway, "/fr").contains("reason=custom.2 "));
    // By ASN and path, in the one reading of the path the components have.
    for target in ["/admin/", "/%41dmin/x", "//ADMIN/x", "/x/../admin"] {
        let answer = from(
            &gateway,
            "198.51.100.7",
            Outgoing::get(host, target).browser(),
        );
        assert_eq!(answer.status, 403, "{target}");
        assert!(answer.text().contains("challenge"), "{target}: a challenge");
        assert!(access_line(&gateway, target).contains("reason=custom.3 "));
    }
    // (Another client of the network: the first failed four challenges.)
    assert_eq!(
        from(
            &gateway,
            "198.51.100.8",
            Outgoing::get(host, "/shop/").browser()
        )
        .status,
        200
    );
    // An address the database does not know holds no country or ASN condition.
    assert_eq!(
        from(
            &gateway,
            "100.64.0.2",
            Outgoing::get(host, "/admin/").browser()
        )
        .status,
        200
    );
    // A category, whose action the policy gives.
    let debug = from(
        &gateway,
        "100.64.0.3",
        Outgoing::get(host, "/debug")
            .browser()
            .header("x-debug", "ON"),
    );
    assert_eq!(debug.status, 403);
    // A header sent twice holds the condition by either value.
    let twice = from(
        &gateway,
        "100.64.0.4",
        Outgoing::get(host, "/debug-twice")
            .browser()
            .header("x-debug", "off")
            .header("x-debug", "on"),
    );
    assert_eq!(twice.status, 403);
    let line = access_line(&gateway, "/debug");
    assert!(
        line.contains("category=\"security_issues\"") && line.contains("reason=custom.4 "),
        "{line}"
    );
    assert_eq!(origin.requests(), before + 3, "the granted ones only");

    let metrics = Client::new(&format!("http://{}", gateway.admin), None)
        .get("/metrics")
        .unwrap()
        .text;
    for (reason, action) in [
        ("custom.1", "grant"),
        ("custom.2", "deny"),
        ("custom.3", "captcha"),
        ("custom.4", "deny"),
    ] {
        assert!(
            metrics.lines().any(|line| line.starts_with(&format!(
                "botgate_decisions_total{{decider=\"custom\",reason=\"{reason}\",action=\"{action}\"}}"
            ))),
            "{reason}: {metrics}"
        );
    }

    // Monitoring mode: the rule is logged with what it would do, and the request passes.
    let shown = update_settings(
        &gateway,
        host,
        json!({"loadbalancer": {"monitoring_mode": true}}),
    );
    assert_eq!(
        shown["settings"]["custom_rules"].as_array().unwrap().len(),
        5,
        "kept"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while from(
        &gateway,
        "203.0.113.5",
        Outgoing::get(host, "/watched").browser(),
    )
    .status
        != 200
    {
        assert!(Instant::now() < deadline, "monitoring mode not applied");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The answer can come before its access line is written: wait for that line, not
    // the last one written for the target (an earlier request's).
    let line = log_line(&gateway, |line| {
        line.contains("botgate::access")
            && line.contains("target=/watched ")
            && line.contains("action=\"would_deny\"")
    });
    assert!(line.contains("reason=custom.2 "), "{line}");

    // A reload reads the database again: the network is now Austrian.
    geoip_database(&database, &[("203.0.113.0/24", Some("AT"), None)]);
    super::operator::sighup(&gateway);
    let _ = log_line(&gateway, |line| line.contains("configuration reloaded"));
    update_settings(
        &gateway,
        host,
        json!({"loadbalancer": {"monitoring_mode": false}}),
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = from(
            &gateway,
            "203.0.113.5",
            Outgoing::get(host, "/again").browser(),
        );
        if answer.status == 200 && access_line(&gateway, "/again").contains("action=\"grant\"") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new database is not used: {}",
            gateway.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Servlet containers drop `;` parameters from every segment, so `/admin;x/panel` is
/// their `/admin/panel`: a rule about `/admin/` must hold for it, and a granting rule
/// must not hold for what such an origin reads as another path.
#[test]
fn a_path_parameter_hides_no_path_from_the_custom_rules() {
    let origin = origin("servlet");
    let gateway = gateway(origin.address.port(), &[]);
    let host = "servlet.example";
    let mut settings = loadbalancer(&["bot_protection"]);
    settings["custom_rules"] = json!([
        rule(
            json!([{"field": "path", "operator": "contains", "value": "public"}]),
            json!({"action": "grant"})
        ),
        rule(
            json!([{"field": "path", "operator": "starts_with", "value": "/admin/"}]),
            json!({"action": "deny"})
        ),
    ]);
    add_website(
        &gateway,
        json!({"domain": host, "ip": ["127.0.0.1"], "settings": settings}),
    )
    .unwrap();
    let before = origin.requests();
    for target in [
        "/admin/panel",
        "/admin;x/panel",
        "/ADMIN;jsessionid=1/panel",
        "/admin;public/panel",
        "/admin/panel;public",
    ] {
        let answer = send(gateway.http, Outgoing::get(host, target).browser()).unwrap();
        assert_eq!(answer.status, 403, "{target}: {}", answer.text());
        let line = access_line(&gateway, target);
        assert!(line.contains("reason=custom.2 "), "{target}: {line}");
    }
    // An encoded `;` is a separator to some servers and part of a name to others.
    let encoded = send(
        gateway.http,
        Outgoing::get(host, "/admin%3Bx/panel").browser(),
    )
    .unwrap();
    assert_eq!(encoded.status, 400, "{}", encoded.text());
    assert_eq!(
        origin.requests(),
        before,
        "no denied path reached the origin"
    );
    // A path both readings grant, and one no rule is about, pass as sent.
    for (target, reason) in [("/public;v=2/logo", "custom.1"), ("/shop;x/cart", "")] {
        let answer = send(gateway.http, Outgoing::get(host, target).browser()).unwrap();
        assert_eq!(answer.status, 200, "{target}: {}", answer.text());
        let line = access_line(&gateway, target);
        assert!(
            reason.is_empty() || line.contains(&format!("reason={reason} ")),
            "{target}: {line}"
        );
    }
    assert_eq!(origin.requests(), before + 2);
}

#[test]
fn the_api_refuses_bad_custom_rules_naming_the_field() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "strict.example", "ip": ["127.0.0.1"]}),
    )
    .unwrap();
    let client = partner(&gateway);
    let cases = [
        (
            json!([rule(
                json!([{"field": "ip", "operator": "contains", "value": "10."}]),
                json!({"action": "deny"})
            )]),
            "settings.custom_rules[0].conditions[0].operator",
        ),
        (
            json!([rule(
                json!([{"field": "path", "operator": "matches", "value": "(a"}]),
                json!({"action": "deny"})
            )]),
            "settings.custom_rules[0].conditions[0].value",
        ),
        (
            json!([rule(
                json!([{"field": "method", "operator": "is", "value": "GET"}]),
                json!({})
            )]),
            "settings.custom_rules[0]",
        ),
        (json!("deny all"), "settings.custom_rules"),
    ];
    for (rules, field) in cases {
        let reply = client
            .put_json(
                "/v1.0/website/strict.example",
                &json!({"settings": {"custom_rules": rules}}),
            )
            .unwrap();
        assert!(matches!(reply.status, 400 | 422), "{rules}: {reply:?}");
        let text = reply.text.clone();
        assert!(text.contains(field), "{rules}: {text}");
    }
    // Nothing of a refused update was kept.
    let shown = client.get("/v1.0/website/strict.example").unwrap().json();
    assert_eq!(shown["settings"]["custom_rules"], json!([]), "{shown}");
}

#[test]
fn a_geoip_database_that_cannot_be_read_stops_the_start_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("not-a-database.mmdb");
    std::fs::write(&bad, b"this is not a MaxMind DB").unwrap();
    let bad = bad.display().to_string();
    let err = Gateway::start_protecting(
        binary(),
        GatewayStore::Embedded,
        &["hoster"],
        &["--geoip-db", &bad],
    )
    .err()
    .expect("refused");
    let message = format!("{err:#}");
    assert!(
        message.contains("GeoIP database") && message.contains("not-a-database.mmdb"),
        "{message}"
    );
}
