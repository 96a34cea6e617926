//! The configuration file: every `serve` option under its flag's name without the
//! dashes (`http-listen = "0.0.0.0:8180"`, `trusted-proxy = ["10.0.0.0/8"]`,
//! `no-acme = true`). Flags win over environment variables, which win over the file,
//! which wins over the built-in defaults: the file's values become the options'
//! defaults before the command line is read. `botgate config check` validates a file;
//! `botgate config show` prints the effective configuration with secrets redacted.

use anyhow::{Context, Result, bail};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The file read when no `--config` (or `BOTGATE_CONFIG`) names one, if it exists.
pub const DEFAULT_PATH: &str = "/etc/botgate/botgate.toml";
/// The variable that names the file.
pub const ENV: &str = "BOTGATE_CONFIG";

/// One setting of the file: its key, its line, and its value(s) as text.
#[derive(Debug)]
struct Setting {
    key: String,
    line: usize,
    values: Vec<String>,
}

/// A configuration file, read and checked against the `serve` options.
#[derive(Debug)]
pub struct ConfigFile {
    path: PathBuf,
    settings: Vec<Setting>,
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// A TOML value as the command-line text(s) it stands for; `None` for a table or
/// date, which no option takes.
fn as_text(value: &toml_edit::Value) -> Option<Vec<String>> {
    use toml_edit::Value;
    Some(match value {
        Value::String(s) => vec![s.value().clone()],
        Value::Integer(i) => vec![i.value().to_string()],
        Value::Float(f) => vec![f.value().to_string()],
        Value::Boolean(b) => vec![b.value().to_string()],
        Value::Array(array) => {
            let mut items = Vec::new();
            for item in array.iter() {
                match as_text(item)?.as_slice() {
                    [one] if !item.is_array() => items.push(one.clone()),
                    _ => return None,
                }
            }
            items
        }
        Value::Datetime(_) | Value::InlineTable(_) => return None,
    })
}

impl ConfigFile {
    /// Reads `path`: a TOML table of options; a syntax error names its line.
    pub fn read(path: &Path) -> Result<ConfigFile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the configuration file {}", path.display()))?;
        let document = toml_edit::Document::parse(text.as_str()).map_err(|error| {
            let line = error.span().map_or(1, |span| line_of(&text, span.start));
            anyhow::anyhow!(
                "{}:{line}: not valid TOML: {}",
                path.display(),
                error.message()
            )
        })?;
        let mut settings = Vec::new();
        for (key, item) in document.as_table().iter() {
            let line = document
                .as_table()
                .key(key)
                .and_then(|key| key.span())
                .map_or(1, |span| line_of(&text, span.start));
            let values = item.as_value().and_then(as_text).with_context(|| {
                format!(
                    "{}:{line}: `{key}` must be a string, a number, a boolean or an array of \
                     them (options are not grouped in tables)",
                    path.display()
                )
            })?;
            settings.push(Setting {
                key: key.to_owned(),
                line,
                values,
            });
        }
        Ok(ConfigFile {
            path: path.to_owned(),
            settings,
        })
    }

    /// Whether the file sets the option `long`.
    fn sets(&self, long: &str) -> bool {
        self.settings.iter().any(|setting| setting.key == long)
    }

    /// `serve` with the file's values as its options' defaults. An unknown key, or a
    /// value its option refuses, is an error naming the key and its line.
    pub fn apply(&self, serve: Command) -> Result<Command> {
        self.apply_to(serve, true)
    }

    /// An operator's command (`partner …`, `status`) with the file's store options as
    /// defaults, and the admin listener's address as `--admin-url`: it acts on the
    /// store and the gateway the file configures. Other keys are `serve`'s alone.
    pub fn apply_to_operator(&self, command: Command) -> Result<Command> {
        let mut command = self.apply_to(command, false)?;
        let admin = self
            .settings
            .iter()
            .find(|setting| setting.key == "admin-listen");
        if let Some(admin) = admin
            && option(&command, "admin-url").is_some()
        {
            let url = format!("http://{}", admin.values.join(""));
            command = command.mut_arg("admin_url", |arg| arg.default_value(url));
        }
        Ok(command)
    }

    fn apply_to(&self, mut serve: Command, strict: bool) -> Result<Command> {
        for setting in &self.settings {
            let at = format!("{}:{}", self.path.display(), setting.line);
            let Some(arg) = option(&serve, &setting.key) else {
                if !strict {
                    continue;
                }
                bail!(
                    "{at}: unknown key `{}`; the keys are `botgate serve`'s options without \
                     the leading dashes (see `botgate serve --help`)",
                    setting.key
                );
            };
            let flag = !arg.get_action().takes_values();
            let repeatable = matches!(arg.get_action(), ArgAction::Append);
            match (flag, setting.values.as_slice()) {
                (true, [value]) if value == "true" || value == "false" => {}
                (true, _) => bail!("{at}: `{}` must be true or false", setting.key),
                (false, [_]) => {}
                (false, _) if repeatable => {}
                (false, _) => bail!("{at}: `{}` takes one value, not a list", setting.key),
            }
            if !flag {
                // The option's own parser, alone: what it refuses on the command line it
                // refuses here, in the same words.
                let alone = Command::new("botgate").no_binary_name(true).arg(
                    Arg::new("value")
                        .long(setting.key.clone())
                        .value_parser(arg.get_value_parser().clone())
                        .action(ArgAction::Set),
                );
                for value in &setting.values {
                    let checked = alone.clone().try_get_matches_from([
                        OsString::from(format!("--{}", setting.key)),
                        OsString::from(value),
                    ]);
                    if let Err(error) = checked {
                        let error = error.render().to_string();
                        let reason: Vec<&str> = error
                            .lines()
                            .map(|line| line.trim().trim_start_matches("error: "))
                            .filter(|line| !line.is_empty() && !line.starts_with("For more"))
                            .collect();
                        bail!("{at}: `{}`: {}", setting.key, reason.join(" "));
                    }
                }
            }
            let id = arg.get_id().clone();
            let values = setting.values.clone();
            serve = serve.mut_arg(id, |arg| arg.default_values(values));
        }
        Ok(serve)
    }
}

/// The `serve` option whose long name is `key`.
fn option<'a>(serve: &'a Command, key: &str) -> Option<&'a Arg> {
    serve
        .get_arguments()
        .filter(|arg| !matches!(arg.get_id().as_str(), "help" | "version" | "config"))
        .find(|arg| arg.get_long() == Some(key))
}

/// The commands that read the configuration file.
pub const READERS: [&str; 5] = ["serve", "partner", "status", "reload", "ruleset"];

/// The file a command of [`READERS`] reads: `--config FILE` on the command line (after
/// the command), else `BOTGATE_CONFIG`, else [`DEFAULT_PATH`] when it exists.
pub fn chosen(args: &[OsString]) -> Option<PathBuf> {
    let command = args
        .iter()
        .skip(1)
        .position(|arg| READERS.iter().any(|reader| arg == reader))?;
    let mut rest = args[command + 2..].iter();
    while let Some(arg) = rest.next() {
        let arg = arg.to_string_lossy();
        if arg == "--config" {
            return rest.next().map(PathBuf::from);
        }
        if let Some(path) = arg.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    std::env::var_os(ENV)
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from(DEFAULT_PATH)).filter(|path| path.exists()))
}

/// Whether an option holds a secret: its environment value is hidden in `--help`.
fn secret(arg: &Arg) -> bool {
    arg.is_hide_env_values_set()
}

/// `value` of `arg` as it may be shown: a secret option's redacted whole, a password
/// in a URL (its user information or a query parameter such as `pass`) replaced, also
/// in a `NAME=URL` value.
fn shown(arg: &Arg, value: &str) -> String {
    if secret(arg) {
        return "<redacted>".to_owned();
    }
    match value.split_once('=') {
        Some((name, url)) if !name.contains([':', '/', '?']) => {
            format!("{name}={}", redact_url(url))
        }
        _ => redact_url(value),
    }
}

/// `url` with the password of its user information, and the values of its query's
/// password-like parameters, replaced.
fn redact_url(value: &str) -> String {
    let Ok(mut url) = url::Url::parse(value) else {
        return value.to_owned();
    };
    let secret_parameter = |name: &str| {
        let name = name.to_ascii_lowercase();
        ["pass", "password", "token", "secret", "key"]
            .iter()
            .any(|word| name == *word || name.ends_with(&format!("_{word}")))
    };
    let redacted_query = url
        .query_pairs()
        .any(|(name, _)| secret_parameter(&name))
        .then(|| {
            let pairs: Vec<(String, String)> = url
                .query_pairs()
                .map(|(name, value)| match secret_parameter(&name) {
                    true => (name.into_owned(), "redacted".to_owned()),
                    false => (name.into_owned(), value.into_owned()),
                })
                .collect();
            pairs
        });
    if url.password().is_none() && redacted_query.is_none() {
        return value.to_owned();
    }
    if url.password().is_some() {
        let _ = url.set_password(Some("redacted"));
    }
    if let Some(pairs) = redacted_query {
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    url.to_string()
}

/// `values` (by option name, as [`effective`] gives them) as they may be logged.
pub fn redacted(
    values: &std::collections::BTreeMap<String, Vec<String>>,
) -> std::collections::BTreeMap<String, Vec<String>> {
    use clap::CommandFactory;
    let cli = crate::Cli::command();
    let serve = cli.find_subcommand("serve").expect("the serve command");
    values
        .iter()
        .map(|(key, values)| {
            let values = match option(serve, key) {
                Some(arg) => values.iter().map(|value| shown(arg, value)).collect(),
                None => values.clone(),
            };
            (key.clone(), values)
        })
        .collect()
}

/// The effective configuration of `serve` as TOML: every option, its value (secrets
/// redacted) and where it came from.
pub fn show(serve: &Command, matches: &ArgMatches, file: Option<&ConfigFile>) -> String {
    let mut out = String::new();
    for arg in serve.get_arguments() {
        let (Some(long), id) = (arg.get_long(), arg.get_id().as_str()) else {
            continue;
        };
        if matches!(id, "help" | "version" | "config") {
            continue;
        }
        let Some(values) = matches.get_raw(id) else {
            out.push_str(&format!("# {long}: not set\n"));
            continue;
        };
        let values: Vec<String> = values
            .map(|value| shown(arg, &value.to_string_lossy()))
            .collect();
        let source = match matches.value_source(id) {
            Some(ValueSource::CommandLine) => "command line".to_owned(),
            Some(ValueSource::EnvVariable) => "environment".to_owned(),
            _ => match file.filter(|file| file.sets(long)) {
                Some(file) => file.path.display().to_string(),
                None => "default".to_owned(),
            },
        };
        // Numbers bare, everything else a TOML string.
        let quoted = |value: &String| match value.parse::<i64>() {
            Ok(number) => number.to_string(),
            Err(_) => toml_edit::Value::from(value.as_str()).to_string(),
        };
        let flag = !arg.get_action().takes_values();
        let value = match (flag, matches!(arg.get_action(), ArgAction::Append)) {
            (true, _) => values.join(""),
            (false, true) => format!(
                "[{}]",
                values.iter().map(quoted).collect::<Vec<_>>().join(", ")
            ),
            (false, false) => values.first().map(quoted).unwrap_or_default(),
        };
        out.push_str(&format!("{long} = {} # {source}\n", value.trim()));
    }
    out
}

/// Every option's effective values (as text), by name: what a reload compares.
pub fn effective(
    serve: &Command,
    matches: &ArgMatches,
) -> std::collections::BTreeMap<String, Vec<String>> {
    serve
        .get_arguments()
        .filter_map(|arg| {
            let long = arg.get_long()?;
            let values = matches.get_raw(arg.get_id().as_str())?;
            Some((
                long.to_owned(),
                values
                    .map(|value| value.to_string_lossy().into_owned())
                    .collect(),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_left_out_of_the_logged_options() {
        let values = [
            ("redis-password", "hunter2"),
            (
                "redis-url",
                "redis+unix:///run/redis.sock?db=0&pass=hunter2",
            ),
            (
                "crawler-networks",
                "mybot=https://:hunter2@lists.example/n.json",
            ),
            ("api-rate", "20"),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), vec![value.to_owned()]))
        .collect();
        let logged = format!("{:?}", redacted(&values));
        assert!(!logged.contains("hunter2"), "{logged}");
        assert!(logged.contains("pass=redacted"), "{logged}");
        assert!(logged.contains("\"20\""), "{logged}");
    }
}
