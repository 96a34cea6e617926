//! DNS readiness: a website is ready when its domain and every subdomain resolve (A
//! and AAAA) to the gateway's public addresses, and to nothing else (a name that still
//! points partly elsewhere would send some visitors around the gateway).

use hickory_resolver::TokioResolver;
use hickory_resolver::net::NetError;
use std::collections::BTreeSet;
use std::net::IpAddr;

/// Why `names` are not ready, naming the first name that is not; `Ok` when all are.
pub async fn ready(
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
    for name in names {
        let found: BTreeSet<IpAddr> = match resolver.lookup_ip(format!("{name}.")).await {
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
