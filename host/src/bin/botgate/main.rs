//! The `botgate` command: the operator's and rule author's entry point.

#[cfg(test)]
mod options;
mod partner;
mod ruleset;
mod serve;
mod store;

use anyhow::Result;
use botgate_host::rules::{Registry, Sandbox, SandboxConfig};
use clap::{Parser, Subcommand};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// mimalloc: the data plane allocates and frees small buffers and header maps on both
/// cores for every request; glibc's malloc spent measurably more on them (benches/README.md, load
/// benchmark).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// botgate: a bot-protection gateway with sandboxed WebAssembly rule components.
#[derive(Parser)]
#[command(name = "botgate", version, about)]
struct Cli {
    /// Where compiled rule components are cached [env: BOTGATE_CACHE_DIR; default:
    /// $XDG_CACHE_HOME/botgate or ~/.cache/botgate].
    #[arg(long, global = true)]
    cache_dir: Option<PathBuf>,
    /// The longest one rule component may run on one request, in milliseconds; past
    /// it the component's opinion is dropped (fail-open).
    #[arg(
        long,
        global = true,
        env = "BOTGATE_COMPONENT_DEADLINE_MS",
        default_value = "20"
    )]
    component_deadline_ms: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway: the HTTP and HTTPS listeners that protect and proxy websites,
    /// the management API and the admin listener (metrics, health), on the store.
    Serve(Box<serve::ServeArgs>),
    /// Manage partners (the hosting providers that call the API).
    #[command(subcommand)]
    Partner(partner::PartnerCommand),
    /// Work with rule components (Wasm rule sets).
    #[command(subcommand)]
    Ruleset(RulesetCommand),
}

#[derive(Subcommand)]
enum RulesetCommand {
    /// Validate rule components as the gateway would load them: compile, check the
    /// world and imports, check `info`, run the smoke request.
    Check {
        /// `.wasm` files; each file's stem is the component's name.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Decide one request with the components of a directory, and show every opinion.
    Eval {
        /// Directory of `<name>.wasm` components.
        #[arg(long)]
        dir: PathBuf,
        /// Rule sets enabled for the website, comma-separated (the classifier always runs).
        #[arg(long, value_delimiter = ',')]
        enable: Vec<String>,
        /// Request method.
        #[arg(short = 'X', long, default_value = "GET")]
        method: String,
        /// A request header, `name: value`; repeat for more.
        #[arg(short = 'H', long = "header")]
        headers: Vec<String>,
        /// The client address.
        #[arg(long, default_value = "203.0.113.10")]
        ip: IpAddr,
        /// The request URL, `https://host/path?query`.
        url: String,
    },
    /// Load a directory of components and hot-reload it on every change until stopped.
    Watch {
        /// Directory of `<name>.wasm` components.
        dir: PathBuf,
    },
}

fn main() -> Result<()> {
    // Log lines (one access line per request) are batched: see `log_writer`.
    let (log_writer, _flush_on_exit) = botgate_host::log_writer::BatchedWriter::stderr();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,wasmtime=warn,cranelift=warn".into()),
        )
        .with_writer(log_writer.clone())
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let cache_dir = cli.cache_dir.or_else(default_cache_dir);
    let deadline_ms = cli.component_deadline_ms;
    let registry = || -> Result<Arc<Registry>> {
        let sandbox = Sandbox::new(SandboxConfig {
            call_deadline: std::time::Duration::from_millis(deadline_ms.max(1)),
            ..SandboxConfig::default()
        })
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
        Ok(Arc::new(Registry::new(sandbox, cache_dir.clone())))
    };
    match cli.command {
        Command::Serve(args) => serve::run(*args, registry()?, log_writer),
        Command::Partner(command) => partner::run(command),
        Command::Ruleset(RulesetCommand::Check { files }) => {
            ruleset::check(registry()?.as_ref(), &files)
        }
        Command::Ruleset(RulesetCommand::Eval {
            dir,
            enable,
            method,
            headers,
            ip,
            url,
        }) => ruleset::eval(
            registry()?.as_ref(),
            dir,
            &enable,
            &method,
            &headers,
            ip,
            &url,
        ),
        Command::Ruleset(RulesetCommand::Watch { dir }) => ruleset::watch(registry()?, dir),
    }
}

fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("BOTGATE_CACHE_DIR") {
        return Some(dir.into());
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("botgate"))
}
