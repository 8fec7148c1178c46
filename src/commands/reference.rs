//! The configuration reference (`docs/configuration.md`), written from the command line's own
//! definitions, so the documented flags, environment variables, defaults and help are the ones the
//! binary has (`tests/docs.rs` fails when the file differs).

use clap::{Arg, Command};

/// The reference of every command of `cli`, as Markdown.
pub fn markdown(cli: &Command) -> String {
    let mut cli = cli.clone();
    cli.build(); // settles what clap derives late, e.g. how many values an argument takes
    let mut out = String::from(
        "# Configuration reference\n\n\
         Written from the command line's definitions (`KSA_BLESS=1 cargo test --test docs` writes it again; \
         `tests/docs.rs` fails when it drifts). Every setting of `run` is also a key of the TOML file given \
         with `--config` (the flag's name without `--`: `roll-bytes = \"128MiB\"`; `--topic` is `topics`, \
         `--kafka` is the `[kafka]` table) and an environment variable; flags win over the environment, which \
         wins over the file, which wins over the defaults. `kafka-s3-archiver COMMAND --help` shows the same.\n",
    );
    let globals: Vec<&Arg> = cli.get_arguments().filter(|a| a.is_global_set()).collect();
    if !globals.is_empty() {
        out.push_str("\n## Every command\n\n");
        table(&mut out, &globals);
    }
    for command in cli.get_subcommands().filter(|c| c.get_name() != "help") {
        out.push_str(&format!("\n## `{}`\n\n", command.get_name()));
        if let Some(about) = command.get_about() {
            out.push_str(&format!("{}\n", one_line(&about.to_string())));
        }
        let args: Vec<&Arg> = command
            .get_arguments()
            .filter(|a| !a.is_hide_set() && a.get_id() != "help" && !a.is_global_set())
            .collect();
        let mut headings: Vec<Option<&str>> = Vec::new();
        for arg in &args {
            if !headings.contains(&arg.get_help_heading()) {
                headings.push(arg.get_help_heading());
            }
        }
        for heading in headings {
            let group: Vec<&Arg> = args.iter().copied().filter(|a| a.get_help_heading() == heading).collect();
            out.push('\n');
            if let Some(heading) = heading {
                out.push_str(&format!("### {heading}\n\n"));
            }
            table(&mut out, &group);
        }
        if command.get_name() == "run" {
            out.push_str(&per_topic());
        }
    }
    out
}

/// `run`'s per-topic tables: the rules, and the keys they take (`config::PER_TOPIC_KEYS`).
fn per_topic() -> String {
    let keys: Vec<String> = crate::config::PER_TOPIC_KEYS.iter().map(|k| format!("`{k}`")).collect();
    format!(
        "\n### Per-topic settings\n\n\
         The config file can give some topics files of their own. A `[topic.\"NAME\"]` table applies to that \
         topic (one that `run` archives: named by `topics`, or matched by `topic-regex`); a `[topic.\"^REGEX\"]` \
         table (its name starts with `^`) to every topic the regular expression matches. A topic takes its own \
         table if it has one, else the first table in the file whose expression matches it, else the top-level \
         settings. A table's keys override the top-level settings (whether from the file, the environment or the \
         flags) for its topics; what it leaves out comes from them, except that a table setting `value-format` \
         takes `value-schema` and `dlq-topic` from itself only. Each table is checked as the top level is, \
         and an error names the table. Tables come from the file only. A table takes {}; any other key is refused \
         (it is a setting of the whole instance). `run --print-config` shows each table with every per-topic \
         setting in effect for its topics.\n\n\
         ```toml\n\
         topics = [\"orders\", \"clicks\"]\n\
         topic-regex = \"^logs-.*\"\n\
         format = \"parquet\"                    # every topic, unless its table says otherwise\n\n\
         [topic.\"orders\"]\n\
         value-format = \"json\"\n\
         value-schema = \"/etc/ksa/order.avsc\"\n\
         dlq-topic = \"orders-dlq\"\n\
         roll-records = 100000\n\n\
         [topic.\"^logs-.*\"]\n\
         format = \"jsonl\"\n\
         compression = \"zstd\"\n\
         time-buckets = \"hour\"\n\
         ```\n",
        keys.join(", ")
    )
}

fn table(out: &mut String, args: &[&Arg]) {
    out.push_str("| flag | environment | default | what it does |\n|---|---|---|---|\n");
    for arg in args {
        let (help, default) = help_and_default(arg);
        let env = arg.get_env().map(|e| format!("`{}`", e.to_string_lossy())).unwrap_or_default();
        out.push_str(&format!("| {} | {env} | {default} | {} |\n", flag(arg), cell(&help)));
    }
}

fn flag(arg: &Arg) -> String {
    let name = match arg.get_long() {
        Some(long) => format!("--{long}"),
        None if !arg.get_possible_values().is_empty() => String::new(), // a positional choice: its values say it
        None => arg.get_id().as_str().to_uppercase(),
    };
    let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
    let value = match (takes_value, arg.get_possible_values().as_slice()) {
        (false, _) => String::new(),
        (true, []) => {
            let names =
                arg.get_value_names().map(|n| n.join(" ")).unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
            format!(" {names}")
        }
        (true, values) => {
            let names: Vec<&str> = values.iter().filter(|v| !v.is_hide_set()).map(|v| v.get_name()).collect();
            let sep = if name.is_empty() { "" } else { " " };
            format!("{sep}{}", names.join("\\|"))
        }
    };
    format!("`{name}{value}`")
}

/// The help text and the default: clap's own, or the `[default: …]` the layered settings write into
/// their help (their fields are options, so the file and the environment can leave them unset).
fn help_and_default(arg: &Arg) -> (String, String) {
    let help = arg.get_long_help().or(arg.get_help()).map(|h| one_line(&h.to_string())).unwrap_or_default();
    let defaults: Vec<String> = arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
    if !defaults.is_empty() && arg.get_num_args().is_some_and(|n| n.takes_values()) {
        return (help, format!("`{}`", defaults.join(",")));
    }
    match help.rfind(" [default: ") {
        Some(at) if help.ends_with(']') => {
            let default = &help[at + " [default: ".len()..help.len() - 1];
            (help[..at].to_string(), format!("`{default}`"))
        }
        _ => (help, String::new()),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}
