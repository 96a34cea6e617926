//! The diagnostic log's filter: `--log-level` when given, else `RUST_LOG`, else `info`;
//! set again by a reload while `serve` runs.

use botgate_host::log_writer::BatchedWriter;
use std::sync::OnceLock;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Registry, reload};

/// Where the filter in force is swapped.
static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Libraries whose lines are quieter than the rest unless asked for by name: the
/// compiler's and runtime's own, and rustls's warnings, which are a visitor's protocol
/// oddities (an IP address as SNI, a warning alert): a line per connection a visitor
/// makes, of no use to the operator.
const QUIET: [(&str, &str); 3] = [
    ("wasmtime", "warn"),
    ("cranelift", "warn"),
    ("rustls", "error"),
];

/// Starts the log into `writer`, filtered by `RUST_LOG` or `info`.
pub fn init(writer: BatchedWriter) {
    let (filter, handle) = reload::Layer::new(filter(None).unwrap_or_else(|_| "info".into()));
    let _ = FILTER.set(handle);
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
        )
        .init();
}

/// The filter `level` (an `EnvFilter` directive list, `info` or
/// `warn,botgate_host::gateway=debug`) names; without it, `RUST_LOG`'s or `info`.
pub fn filter(level: Option<&str>) -> Result<EnvFilter, String> {
    let (text, source) = match level {
        Some(level) => (level.to_owned(), "--log-level"),
        None => match std::env::var("RUST_LOG") {
            Ok(text) => (text, "RUST_LOG"),
            Err(_) => ("info".to_owned(), "the default"),
        },
    };
    let mut directives = text.clone();
    for (target, level) in QUIET {
        if !text.contains(target) {
            directives.push_str(&format!(",{target}={level}"));
        }
    }
    EnvFilter::try_new(&directives)
        .map_err(|err| format!("{source} {text:?} is no log filter: {err}"))
}

/// Filters the log by `level` from the next line on.
pub fn set(level: Option<&str>) -> Result<(), String> {
    let filter = filter(level)?;
    match FILTER.get() {
        Some(handle) => handle.reload(filter).map_err(|err| err.to_string()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::filter;

    #[test]
    fn rustls_warnings_are_quiet_unless_asked_for() {
        let quiet = filter(Some("info")).unwrap().to_string();
        assert!(quiet.contains("rustls=error"), "{quiet}");
        assert!(quiet.contains("wasmtime=warn"), "{quiet}");
        let asked = filter(Some("info,rustls=debug")).unwrap().to_string();
        assert!(!asked.contains("rustls=error"), "{asked}");
    }
}
