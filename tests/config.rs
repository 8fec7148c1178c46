//! `run --print-config`, as users meet it: every setting can come from a TOML file, from the
//! environment (KSA_*) or from flags, and the settings in effect are the same whichever it came from;
//! flags win over the environment, which wins over the file, which wins over the defaults. No services.

use std::process::Command;

/// A value for every setting, none of them its default: (file key, TOML value, flag/environment value).
const EVERY_SETTING: &[(&str, &str, &str)] = &[
    ("brokers", r#""k1:9092,k2:9092""#, "k1:9092,k2:9092"),
    ("group", r#""archivers""#, "archivers"),
    ("topics", r#"["a", "b"]"#, "a,b"),
    ("topic-regex", r#""^logs-.*""#, "^logs-.*"),
    ("start-from", r#""latest""#, "latest"),
    ("dest", r#""s3://bucket/archive""#, "s3://bucket/archive"),
    ("s3-endpoint", r#""http://127.0.0.1:4566""#, "http://127.0.0.1:4566"),
    ("s3-region", r#""eu-west-1""#, "eu-west-1"),
    ("upload-part-size", r#""16MiB""#, "16MiB"),
    ("upload-concurrency", "7", "7"),
    ("s3-max-requests", "9", "9"),
    ("s3-attempt-timeout", r#""45s""#, "45s"),
    ("s3-sse", r#""aws:kms""#, "aws:kms"),
    ("s3-sse-kms-key-id", r#""alias/archive""#, "alias/archive"),
    ("s3-storage-class", r#""STANDARD_IA""#, "STANDARD_IA"),
    ("s3-expected-bucket-owner", r#""111122223333""#, "111122223333"),
    ("abort-stale-uploads-after", r#""2h""#, "2h"),
    ("format", r#""jsonl""#, "jsonl"),
    ("compression", r#""gzip""#, "gzip"),
    ("roll-records", "5000", "5000"),
    ("roll-bytes", r#""3MiB""#, "3MiB"),
    ("roll-age", r#""42s""#, "42s"),
    ("spool-dir", r#""/var/spool/ksa""#, "/var/spool/ksa"),
    ("spool-memory-threshold", r#""2MiB""#, "2MiB"),
    ("max-buffer-bytes", r#""96MiB""#, "96MiB"),
    ("max-spool-bytes", r#""10GiB""#, "10GiB"),
    ("revoke-timeout", r#""9s""#, "9s"),
    ("claims", "false", "false"),
    ("schema-registry-url", r#""http://registry:8081""#, "http://registry:8081"),
    ("schema-registry-username", r#""archiver""#, "archiver"),
    ("schema-registry-password", r#""s3cret""#, "s3cret"),
    ("metrics-addr", r#""127.0.0.1:9464""#, "127.0.0.1:9464"),
];

/// The flag of a file key (`topics` is `--topic`).
fn flag(key: &str) -> String {
    if key == "topics" {
        "--topic".into()
    } else {
        format!("--{key}")
    }
}

/// The environment variable of a file key.
fn env_var(key: &str) -> String {
    format!("KSA_{}", key.to_uppercase().replace('-', "_"))
}

/// `run --print-config` with `args` and the environment `env` (and no other KSA_* variable).
fn print_config(args: &[String], env: &[(String, String)]) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver"));
    cmd.arg("run").arg("--print-config").args(args);
    for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("KSA_")) {
        cmd.env_remove(name);
    }
    let out = cmd.envs(env.iter().cloned()).output().expect("run the archiver");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn effective(args: &[String], env: &[(String, String)]) -> String {
    let (ok, stdout, stderr) = print_config(args, env);
    assert!(ok, "{args:?} {env:?}: {stderr}");
    stdout
}

#[test]
fn every_setting_comes_from_the_file_the_environment_or_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("archiver.toml");
    let mut toml_text: String = EVERY_SETTING.iter().map(|(key, value, _)| format!("{key} = {value}\n")).collect();
    toml_text.push_str("[kafka]\n\"security.protocol\" = \"SSL\"\n\"sasl.password\" = \"hunter2\"\n");
    std::fs::write(&file, toml_text).unwrap();
    let from_file = effective(&["--config".into(), file.display().to_string()], &[]);

    let mut env: Vec<(String, String)> =
        EVERY_SETTING.iter().map(|(key, _, v)| (env_var(key), v.to_string())).collect();
    env.push(("KSA_KAFKA".into(), "security.protocol=SSL;sasl.password=hunter2".into()));
    let from_env = effective(&[], &env);

    let mut flags: Vec<String> = EVERY_SETTING.iter().flat_map(|(key, _, v)| [flag(key), v.to_string()]).collect();
    flags.extend(["--kafka", "security.protocol=SSL", "--kafka", "sasl.password=hunter2"].map(String::from));
    let from_flags = effective(&flags, &[]);

    assert_eq!(from_file, from_env);
    assert_eq!(from_file, from_flags);
    println!("{from_file}");
    // Each setting shows its value, none its default: a setting the layering dropped would.
    let required = ["--brokers", "b:1", "--group", "g", "--topic", "t", "--dest", "file:///tmp/x"].map(String::from);
    let defaults = effective(&required, &[]);
    for (key, _, _) in EVERY_SETTING {
        let line = from_file.lines().find(|l| l.starts_with(&format!("{key} = "))).unwrap_or_else(|| {
            panic!("{key} is not in the settings in effect:\n{from_file}");
        });
        assert!(!defaults.lines().any(|d| d == line), "{key} kept its default: {line}");
    }
    assert!(!from_file.contains("hunter2") && from_file.contains("\"sasl.password\" = \"****\""), "{from_file}");
    assert!(!from_file.contains("s3cret") && from_file.contains("schema-registry-password = \"****\""), "{from_file}");

    // What it prints is a config file that gives the same settings.
    let printed = dir.path().join("printed.toml");
    std::fs::write(&printed, from_flags.replace("\"****\"", "\"hunter2\"")).unwrap();
    assert_eq!(effective(&["--config".into(), printed.display().to_string()], &[]), from_file);
}

#[test]
fn flags_win_over_the_environment_which_wins_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("archiver.toml");
    std::fs::write(&file, "brokers = \"b:1\"\ngroup = \"g\"\ntopics = [\"t\"]\ndest = \"file:///tmp/x\"\nroll-records = 1\nroll-age = \"1s\"\nformat = \"jsonl\"\n").unwrap();
    let config = ["--config".to_string(), file.display().to_string()];
    let env = [("KSA_ROLL_RECORDS".to_string(), "2".to_string()), ("KSA_ROLL_AGE".to_string(), "2s".to_string())];
    let args = [&config[..], &["--roll-records".to_string(), "3".to_string()]].concat();
    let shown = effective(&args, &env);
    for line in ["roll-records = 3", "roll-age = \"2s\"", "format = \"jsonl\"", "roll-bytes = \"64MiB\""] {
        assert!(shown.lines().any(|l| l == line), "{line:?} not in:\n{shown}");
    }
}

#[test]
fn a_bad_setting_is_reported_whichever_source_it_came_from() {
    let required = ["--brokers", "b:1", "--group", "g", "--topic", "t", "--dest", "file:///tmp/x"].map(String::from);
    let (ok, _, stderr) = print_config(&required, &[("KSA_ROLL_RECORDS".into(), "0".into())]);
    assert!(!ok && stderr.contains("--roll-records"), "{stderr}");
    let (ok, _, stderr) = print_config(&required, &[("KSA_FORMAT".into(), "csv".into())]);
    assert!(!ok && stderr.contains("csv") && stderr.contains("parquet"), "{stderr}");
}
