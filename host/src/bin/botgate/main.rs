//! The `botgate` command: the operator's and rule author's entry point.

mod cluster;
mod config;
mod fleet;
mod log_level;
#[cfg(test)]
mod options;
mod partner;
mod ruleset;
mod scaffold;
mod serve;
mod store;

use anyhow::{Context, Result};
use botgate_host::rules::{Registry, Sandbox, SandboxConfig};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
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
    /// Where compiled rule components are cached [default: $XDG_CACHE_HOME/botgate or
    /// ~/.cache/botgate].
    #[arg(long, global = true, env = "BOTGATE_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// The longest one rule component may run on one request, in milliseconds, and as
    /// long again for every 8 KiB of its target and headers; past it the component's
    /// opinion is dropped (fail-open).
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
    /// Check or show the configuration `serve` would run with.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// The store (reachable or not), the website snapshot, the loaded components and
    /// the certificates expiring within 14 days, of a running gateway when one answers.
    Status(partner::Target),
    /// Render a cluster's configuration files from its description.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Make a running gateway read its configuration again (as SIGHUP does); its log
    /// says what changed and what needs a restart.
    Reload(partner::Target),
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate a configuration file against `serve`'s options without starting: every
    /// key known, every value accepted (the file `serve` would read when none is given).
    Check {
        /// The file [default: $BOTGATE_CONFIG, or /etc/botgate/botgate.toml].
        file: Option<PathBuf>,
    },
    /// Print the effective configuration (file, then environment, then defaults) as
    /// TOML, each value with where it came from; secrets redacted.
    Show {
        /// The file [default: $BOTGATE_CONFIG, or /etc/botgate/botgate.toml when present].
        file: Option<PathBuf>,
    },
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
        /// Rule sets enabled for the website, comma-separated (the classifier and the
        /// Core Rule Set always run).
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
    /// Start a rule-set project of its own, outside this repository: the template's
    /// rules and tests renamed, this release's SDK and WIT contract beside them, and
    /// labelled requests for `ruleset test`.
    New {
        /// The rule set's name: a-z, 0-9 and `_`, starting with a letter.
        name: String,
        /// The new project's folder [default: NAME].
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Run labelled requests against a built component and report every mismatch.
    Test {
        /// The built `<name>.wasm`.
        file: PathBuf,
        /// One JSON object a line: `url`, `method`, `headers`, `ip`, `name`, and
        /// `expect`: a category or `abstain`, or `{"category", "reason",
        /// "min_confidence"}`.
        #[arg(long, value_name = "CASES.jsonl")]
        cases: PathBuf,
    },
    /// Load a directory of components and hot-reload it on every change until stopped.
    Watch {
        /// Directory of `<name>.wasm` components.
        dir: PathBuf,
    },
    #[command(flatten)]
    Fleet(fleet::FleetCommand),
}

fn main() -> Result<()> {
    // Log lines (one access line per request) are batched: see `log_writer`.
    let (log_writer, _flush_on_exit) = botgate_host::log_writer::BatchedWriter::stderr();
    log_level::init(log_writer.clone());
    let cli = parse()?;
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
        Command::Ruleset(RulesetCommand::New { name, dir }) => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            scaffold::new(&name, &dir)?;
            eprintln!(
                "{}: the rule set `{name}`; its README.md says how to test, build and push it",
                dir.display()
            );
            Ok(())
        }
        Command::Ruleset(RulesetCommand::Test { file, cases }) => {
            ruleset::test(registry()?.as_ref(), &file, &cases)
        }
        Command::Ruleset(RulesetCommand::Fleet(command)) => fleet::run(command, registry),
        Command::Config(command) => run_config(command),
        Command::Status(target) => partner::status(target),
        Command::Reload(target) => partner::reload(target),
        Command::Cluster(command) => cluster::run(command),
    }
}

/// The command line, with `serve`'s options defaulting to the configuration file's
/// values (`--config`, `BOTGATE_CONFIG`, or the default file when present).
fn parse() -> Result<Cli> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let matches = command_for(&args)?.get_matches_from(args);
    Cli::from_arg_matches(&matches).map_err(|error| error.exit())
}

/// The command that parses `args`: with the configuration file they name, when any.
fn command_for(args: &[std::ffi::OsString]) -> Result<clap::Command> {
    let mut command = Cli::command();
    if let Some(path) = config::chosen(args) {
        let serve = configured_serve(Some(&path))?.1;
        command = command.mut_subcommand("serve", |_| serve);
        // The operator's commands act on the store and gateway the file configures.
        let file = config::ConfigFile::read(&path)?;
        command = operator_defaults(command, &file, &["status", "reload"])?;
        for (parent, names) in [
            ("partner", &["create", "list", "rotate", "revoke"][..]),
            (
                "ruleset",
                &[
                    "push", "list", "activate", "rollback", "failure", "shadow", "unshadow",
                    "diff", "remove",
                ][..],
            ),
        ] {
            let sub = command.find_subcommand(parent).cloned().expect("a command");
            let sub = operator_defaults(sub, &file, names)?;
            command = command.mut_subcommand(parent, |_| sub);
        }
    }
    Ok(command)
}

/// `command` with its subcommands `names` taking their defaults from `file`.
fn operator_defaults(
    mut command: clap::Command,
    file: &config::ConfigFile,
    names: &[&str],
) -> Result<clap::Command> {
    for name in names {
        let sub = command
            .find_subcommand(name)
            .cloned()
            .expect("a subcommand");
        let sub = file.apply_to_operator(sub)?;
        command = command.mut_subcommand(name, |_| sub);
    }
    Ok(command)
}

/// `serve`'s options, with `file`'s values as their defaults.
fn configured_serve(
    file: Option<&std::path::Path>,
) -> Result<(Option<config::ConfigFile>, clap::Command)> {
    let cli = Cli::command();
    let mut serve = cli
        .find_subcommand("serve")
        .cloned()
        .expect("botgate has a serve command");
    // The options every command shares (`--cache-dir`, `--component-deadline-ms`) are
    // `serve`'s too: the file may set them (their values reach the top as a global's).
    for shared in cli.get_arguments().filter(|arg| arg.is_global_set()) {
        serve = serve.arg(shared.clone());
    }
    let Some(path) = file else {
        return Ok((None, serve));
    };
    let file = config::ConfigFile::read(path)?;
    let serve = file.apply(serve)?;
    Ok((Some(file), serve))
}

/// `serve`'s options as they are now: this process's command line and environment, and
/// the configuration file read again; with each option's effective values by name.
pub fn serve_options_now() -> Result<(
    serve::ServeArgs,
    std::collections::BTreeMap<String, Vec<String>>,
)> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let path = config::chosen(&args);
    let serve = configured_serve(path.as_deref())?.1;
    let all = Cli::command()
        .mut_subcommand("serve", |_| serve.clone())
        .try_get_matches_from(&args)
        .map_err(|error| anyhow::anyhow!("{}", error.render().to_string().trim()))?;
    let matches = all
        .subcommand_matches("serve")
        .context("this process is no `botgate serve`")?;
    let parsed = serve::ServeArgs::from_arg_matches(matches)?;
    parsed.check()?;
    Ok((parsed, config::effective(&serve, matches)))
}

fn run_config(command: ConfigCommand) -> Result<()> {
    let (file, check) = match command {
        ConfigCommand::Check { file } => (file, true),
        ConfigCommand::Show { file } => (file, false),
    };
    let path = file.or_else(|| config::chosen(&["serve".into()]));
    if check && path.is_none() {
        anyhow::bail!(
            "no configuration file: name one, set {}, or create {}",
            config::ENV,
            config::DEFAULT_PATH
        );
    }
    let (file, serve) = configured_serve(path.as_deref())?;
    // The options as `serve` would read them with no flags: the file, the environment,
    // the defaults; what they require of each other is checked too.
    let matches = serve
        .clone()
        .try_get_matches_from(["serve"])
        .map_err(|error| anyhow::anyhow!("{}", error.render().to_string().trim()))?;
    serve::ServeArgs::from_arg_matches(&matches)?.check()?;
    if check {
        if let Some(path) = path {
            println!("{}: the configuration is valid", path.display());
        }
    } else {
        // In the order `serve --help` lists the options.
        let listed = configured_serve(None)?.1;
        print!("{}", config::show(&listed, &matches, file.as_ref()));
    }
    Ok(())
}

/// Checks a configuration file as `botgate config check` does.
pub fn check_config_file(path: &std::path::Path) -> Result<()> {
    let serve = configured_serve(Some(path))?.1;
    let matches = serve
        .try_get_matches_from(["serve"])
        .map_err(|error| anyhow::anyhow!("{}", error.render().to_string().trim()))?;
    serve::ServeArgs::from_arg_matches(&matches)?.check()
}

fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("botgate"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_sets_the_options_every_command_shares() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("botgate.toml");
        std::fs::write(
            &file,
            "component-deadline-ms = 2000\ncache-dir = \"/var/cache/botgate\"\n",
        )
        .unwrap();
        let args: Vec<std::ffi::OsString> = vec![
            "botgate".into(),
            "serve".into(),
            "--config".into(),
            file.into_os_string(),
        ];
        let matches = command_for(&args).unwrap().get_matches_from(args);
        let cli = Cli::from_arg_matches(&matches).unwrap();
        assert_eq!(cli.component_deadline_ms, 2000);
        // The environment, when it names one, wins over the file.
        let wanted = std::env::var_os("BOTGATE_CACHE_DIR")
            .map_or("/var/cache/botgate".into(), PathBuf::from);
        assert_eq!(cli.cache_dir, Some(wanted));
    }
}
