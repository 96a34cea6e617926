//! Nextcloud's request signals: the user agents of its own clients, DAV clients and
//! monitors, beside the SDK's shared signals (re-exported here).

use botgate_ruleset_sdk::Request;
use botgate_ruleset_sdk::ua::contains_any_ignore_case;

pub use botgate_ruleset_sdk::signals::{
    FORM_BURST, LOGIN_BURST_MACHINE, credentials, hammering, login_burst,
};

/// Nextcloud's own clients: the desktop sync client (`mirall/3.x … (Nextcloud, …)`), the
/// Files apps for Android and iOS, and Talk.
const NEXTCLOUD_CLIENTS: &[&str] = &[
    "mirall/",
    "Nextcloud-android/",
    "Nextcloud-iOS/",
    "Nextcloud-Talk",
];

/// CalDAV, CardDAV and WebDAV clients people point at Nextcloud: DAVx⁵, ICSx⁵,
/// Thunderbird, Apple's calendar and contacts daemons (iOS `dataaccessd`, macOS
/// `CalendarAgent`), GNOME Evolution and gvfs, Windows' WebDAV redirector, rclone,
/// Cyberduck, WinSCP, davfs2, Outlook CalDav Synchronizer and Zotero.
const DAV_CLIENTS: &[&str] = &[
    "DAVx5/",
    "DAVdroid/",
    "ICSx5/",
    "Thunderbird/",
    "dataaccessd/",
    "accountsd/",
    "CalendarAgent/",
    "AddressBookCore/",
    "remindd/",
    "Evolution/",
    "gvfs/",
    "Microsoft-WebDAV-MiniRedir/",
    "rclone/",
    "Cyberduck/",
    "WinSCP/",
    "davfs2/",
    "CalDavSynchronizer/",
    "Zotero/",
];

/// Uptime monitors that check `status.php`.
const MONITORS: &[&str] = &[
    "UptimeRobot/",
    "Uptime-Kuma/",
    "Pingdom.com_bot",
    "StatusCake",
    "Site24x7",
    "check_http/",
    "Zabbix",
    "Better Uptime",
    "Better Stack",
    "Blackbox Exporter",
    "Gatus/",
    "updown.io",
];

/// Whether the user agent is one of Nextcloud's own clients.
pub fn nextcloud_client(req: &Request<'_>) -> bool {
    contains_any_ignore_case(req.user_agent(), NEXTCLOUD_CLIENTS)
}

/// Whether the user agent is a known CalDAV, CardDAV or WebDAV client.
pub fn dav_client(req: &Request<'_>) -> bool {
    contains_any_ignore_case(req.user_agent(), DAV_CLIENTS)
}

/// Whether the user agent is a Nextcloud server's HTTP client (federation, OCM, setup
/// checks): `Nextcloud Server Crawler`, in recent releases `Nextcloud-Server-Crawler/X.Y.Z`.
pub fn server_crawler(req: &Request<'_>) -> bool {
    let ua = req.user_agent();
    ua.starts_with("Nextcloud Server Crawler") || ua.starts_with("Nextcloud-Server-Crawler/")
}

/// Whether the user agent is an uptime monitor's.
pub fn monitor(req: &Request<'_>) -> bool {
    contains_any_ignore_case(req.user_agent(), MONITORS)
}
