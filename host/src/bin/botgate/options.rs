//! The `botgate serve` options as a Markdown table: docs/configuration.md carries it, and a test
//! keeps that copy the same as the command's definition.

use clap::Command;

/// Where docs/configuration.md's table starts and ends.
const BEGIN: &str = "<!-- serve options: generated from the command's definition; `BOTGATE_BLESS=1 cargo test -p botgate-host --bin botgate` rewrites it -->";
const END: &str = "<!-- end of serve options -->";

/// One row per option of `serve` in a built command (its own, then those every command
/// takes): the option with its value, the environment variable, the default and the
/// help.
fn serve_table(cli: &Command) -> String {
    let serve = cli
        .find_subcommand("serve")
        .expect("botgate has a serve command");
    let mut out =
        String::from("| option | environment | default | what it does |\n|---|---|---|---|\n");
    for arg in serve.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if arg.is_hide_set() || long == "help" || long == "version" {
            continue;
        }
        let takes_value = arg.get_num_args().is_none_or(|n| n.takes_values());
        let option = match arg.get_value_names() {
            Some(names) if takes_value => format!("`--{long} {}`", names.join(" ")),
            _ if takes_value => format!("`--{long} {}`", arg.get_id().as_str().to_uppercase()),
            _ => format!("`--{long}`"),
        };
        let env = arg
            .get_env()
            .map_or("".to_owned(), |env| format!("`{}`", env.to_string_lossy()));
        let default = arg
            .get_default_values()
            .iter()
            .map(|value| value.to_string_lossy().into_owned())
            .filter(|value| value != "false")
            .collect::<Vec<_>>()
            .join(", ");
        let default = if default.is_empty() {
            String::new()
        } else {
            format!("`{default}`")
        };
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|help| help.to_string())
            .unwrap_or_default();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        let help = help.replace('|', "\\|");
        let option = option.replace('|', "\\|");
        out.push_str(&format!("| {option} | {env} | {default} | {help} |\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn readme_lists_every_serve_option_as_the_command_defines_it() {
        let mut cli = crate::Cli::command();
        cli.build();
        let table = serve_table(&cli);
        assert!(
            table.contains(
                "| `--http-listen HTTP_LISTEN` | `BOTGATE_HTTP_LISTEN` | `127.0.0.1:8180` |"
            ),
            "{table}"
        );
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
        let readme = std::fs::read_to_string(&path).unwrap();
        let (before, rest) = readme
            .split_once(BEGIN)
            .expect("docs/configuration.md has the table's start");
        let (current, after) = rest
            .split_once(END)
            .expect("docs/configuration.md has the table's end");
        let wanted = format!("\n{table}");
        if std::env::var_os("BOTGATE_BLESS").is_some() {
            std::fs::write(&path, format!("{before}{BEGIN}{wanted}{END}{after}")).unwrap();
            return;
        }
        assert!(
            current == wanted,
            "docs/configuration.md's option table differs from `botgate serve`'s options; rewrite it with \
             BOTGATE_BLESS=1 cargo test -p botgate-host --bin botgate"
        );
    }
}
