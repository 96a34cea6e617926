//! The country and autonomous system of a client address, from the operator's MaxMind
//! DB files (`--geoip-db`: GeoLite2 or GeoIP2 Country or City, and ASN, or any database
//! with the same fields), for websites' custom rules. Read whole into memory; a reload
//! reads them again (the files `geoipupdate` replaces) and swaps them in at once.

use arc_swap::ArcSwap;
use serde::Deserialize;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the databases say of one address; `None` where none of them knows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Geo {
    /// ISO 3166-1 alpha-2, upper case.
    pub country: Option<[u8; 2]>,
    pub asn: Option<u32>,
}

/// A database that cannot be used; the gateway does not start, a reload is refused.
#[derive(Debug, thiserror::Error)]
pub enum GeoIpError {
    #[error("GeoIP database {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: maxminddb::MaxMindDbError,
    },
}

/// The fields read of a record: `country.iso_code` (Country and City databases, with
/// `registered_country` where the country is missing) and `autonomous_system_number`
/// (ASN databases).
#[derive(Deserialize)]
struct Record<'a> {
    #[serde(borrow, default)]
    country: Option<Country<'a>>,
    #[serde(borrow, default)]
    registered_country: Option<Country<'a>>,
    #[serde(default)]
    autonomous_system_number: Option<u32>,
}

#[derive(Deserialize)]
struct Country<'a> {
    #[serde(borrow, default)]
    iso_code: Option<&'a str>,
}

/// The databases in use, in the order given; the first that knows a field answers it.
#[derive(Default)]
pub struct GeoIp {
    databases: ArcSwap<Vec<maxminddb::Reader<Vec<u8>>>>,
}

/// Databases read and checked, not yet in use.
pub struct GeoDatabases(Vec<maxminddb::Reader<Vec<u8>>>);

impl GeoDatabases {
    /// Reads and checks every file of `paths`.
    pub fn read(paths: &[PathBuf]) -> Result<GeoDatabases, GeoIpError> {
        paths
            .iter()
            .map(|path| open(path))
            .collect::<Result<_, _>>()
            .map(GeoDatabases)
    }
}

fn open(path: &Path) -> Result<maxminddb::Reader<Vec<u8>>, GeoIpError> {
    maxminddb::Reader::open_readfile(path).map_err(|source| GeoIpError::Open {
        path: path.to_owned(),
        source,
    })
}

impl GeoIp {
    /// Databases read from `paths` (none: every lookup answers unknown).
    pub fn open(paths: &[PathBuf]) -> Result<GeoIp, GeoIpError> {
        let geoip = GeoIp::default();
        geoip.install(GeoDatabases::read(paths)?);
        Ok(geoip)
    }

    /// Puts `databases` in use for the lookups from now on.
    pub fn install(&self, databases: GeoDatabases) {
        self.databases.store(Arc::new(databases.0));
    }

    /// The country and ASN of `ip`, as far as the databases know them.
    pub fn lookup(&self, ip: IpAddr) -> Geo {
        let databases = self.databases.load();
        let mut geo = Geo::default();
        for reader in databases.iter() {
            let Ok(found) = reader.lookup(ip) else {
                continue;
            };
            let Ok(Some(record)) = found.decode::<Record<'_>>() else {
                continue;
            };
            if geo.country.is_none() {
                geo.country = [record.country, record.registered_country]
                    .into_iter()
                    .flatten()
                    .find_map(|c| c.iso_code.and_then(country_code));
            }
            if geo.asn.is_none() {
                geo.asn = record.autonomous_system_number;
            }
            if geo.country.is_some() && geo.asn.is_some() {
                break;
            }
        }
        geo
    }
}

fn country_code(iso: &str) -> Option<[u8; 2]> {
    match iso.as_bytes() {
        [a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => {
            Some([a.to_ascii_uppercase(), b.to_ascii_uppercase()])
        }
        _ => None,
    }
}
