//! DNS readiness: a website is ready when its domain and every subdomain resolve (A
//! and AAAA) to the gateway's public addresses, and to nothing else (a name that still
//! points partly elsewhere would send some visitors around the gateway).

use futures_util::StreamExt;
use hickory_resolver::TokioResolver;
use hickory_resolver::net::NetError;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

/// Names of one website looked up at once.
const LOOKUPS_AT_ONCE: usize = 8;

/// The longest one website's lookups take, together: a website whose names answer
/// slowly (or not at all) is not ready this round, and holds up no other website.
pub const CHECK_TIME: Duration = Duration::from_secs(15);

/// Why `names` are not ready, naming the first name that is not; `Ok` when all are.
/// The lookups take at most [`CHECK_TIME`] together.
pub async fn ready(
    resolver: &TokioResolver,
    names: &[String],
    public: &[IpAddr],
) -> Result<(), String> {
    tokio::time::timeout(CHECK_TIME, ready_within(resolver, names, public))
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "the website's names did not all resolve within {} s",
                CHECK_TIME.as_secs()
            ))
        })
}

async fn ready_within(
    resolver: &TokioResolver,
    names: &[String],
    public: &[IpAddr],
) -> Result<(), String> {
    let gateway = || {
        public
            .iter()
            .map(IpAddr::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let lookups: Vec<_> = names
        .iter()
        .map(|name| {
            let (resolver, name) = (resolver.clone(), name.clone());
            async move {
                let lookup = resolver.lookup_ip(format!("{name}.")).await;
                (name, lookup)
            }
        })
        .collect();
    let mut lookups = futures_util::stream::iter(lookups).buffered(LOOKUPS_AT_ONCE);
    while let Some((name, lookup)) = lookups.next().await {
        let found: BTreeSet<IpAddr> = match lookup {
            Ok(lookup) => lookup.iter().collect(),
            Err(err) if is_no_records(&err) => BTreeSet::new(),
            Err(err) => return Err(format!("`{name}` could not be resolved: {err}")),
        };
        if found.is_empty() {
            return Err(format!(
                "`{name}` has no A or AAAA record; point it at the gateway ({})",
                gateway()
            ));
        }
        let elsewhere: Vec<String> = found
            .iter()
            .filter(|address| !public.contains(address))
            .map(IpAddr::to_string)
            .collect();
        if !elsewhere.is_empty() {
            return Err(format!(
                "`{name}` resolves to {}, not only to the gateway ({})",
                elsewhere.join(", "),
                gateway()
            ));
        }
    }
    Ok(())
}

/// Whether the lookup failed only because the name has no such records.
fn is_no_records(err: &NetError) -> bool {
    err.is_no_records_found() || err.is_nx_domain()
}
