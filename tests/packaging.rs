//! What a deployment relies on: `run --check` (a config is tested before it is rolled out: settings,
//! brokers, topics, archive), shell completions and man pages, and the files under deploy/ (the
//! systemd unit passes `systemd-analyze verify`; the Kubernetes manifests are valid YAML whose settings
//! are the archiver's and resolve, with a grace period longer than the revoke timeout).

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::*;

const BIN: &str = env!("CARGO_BIN_EXE_kafka-s3-archiver");

fn archiver(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run the archiver binary")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn check_passes_a_working_config_and_names_what_is_wrong_with_a_broken_one() {
    let TestDest::S3 { bucket } = TestDest::s3().await else { unreachable!() };
    let topic = unique("checked");
    create_topic(&topic, 1).await;
    let dir = tempfile::tempdir().unwrap();
    let config = |topic: &str, bucket: &str| {
        let path = dir.path().join(format!("{topic}-{bucket}.toml"));
        let toml = format!(
            "brokers = \"{}\"\ngroup = \"g\"\ntopics = [\"{topic}\"]\ndest = \"s3://{bucket}/archive\"\n\
             s3-endpoint = \"{}\"\n[kafka]\n\"ssl.key.password\" = \"s3cret\"\n",
            brokers(),
            s3_endpoint()
        );
        std::fs::write(&path, toml).unwrap();
        path.display().to_string()
    };
    let good = archiver(&["run", "--check", "--config", &config(&topic, &bucket)]);
    let out = text(&good.stdout);
    assert!(good.status.success(), "{out}{}", text(&good.stderr));
    assert!(out.contains("# ok: brokers") && out.contains("# ok: archive"), "{out}");
    assert!(out.contains("****") && !out.contains("s3cret"), "secrets are masked: {out}");
    assert!(out.contains(&format!("topics = [\"{topic}\"]")), "the effective settings are printed: {out}");

    let no_topic = archiver(&["run", "--check", "--config", &config("no-such-topic", &bucket)]);
    assert_eq!(no_topic.status.code(), Some(1));
    assert!(text(&no_topic.stderr).contains("topic \"no-such-topic\" does not exist"), "{}", text(&no_topic.stderr));
    let no_bucket = archiver(&["run", "--check", "--config", &config(&topic, "ksa-no-such-bucket")]);
    assert_eq!(no_bucket.status.code(), Some(1));
    assert!(text(&no_bucket.stderr).contains("ksa-no-such-bucket"), "{}", text(&no_bucket.stderr));
    let invalid = archiver(&["run", "--check", "--config", &config(&topic, &bucket), "--roll-bytes", "0"]);
    assert_eq!(invalid.status.code(), Some(1));
    assert!(text(&invalid.stderr).contains("--roll-bytes"), "{}", text(&invalid.stderr));
}

#[test]
fn completions_and_man_pages_come_from_the_command_line_definition() {
    let script = archiver(&["completions", "bash"]);
    assert!(script.status.success());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("completion.bash"), &script.stdout).unwrap();
    let sourced = Command::new("bash")
        .args(["-c", &format!("source {}/completion.bash && complete -p kafka-s3-archiver", dir.path().display())])
        .output()
        .unwrap();
    assert!(text(&sourced.stdout).contains("-F _kafka__s3__archiver kafka-s3-archiver"), "{}", text(&sourced.stderr));
    assert!(text(&script.stdout).contains("--time-buckets"), "every flag completes");

    let pages = archiver(&["man", "--dir", &dir.path().join("man1").display().to_string()]);
    assert!(pages.status.success(), "{}", text(&pages.stderr));
    for command in ["", "-run", "-verify", "-restore", "-status", "-ddl", "-demo"] {
        let page = std::fs::read_to_string(dir.path().join(format!("man1/kafka-s3-archiver{command}.1"))).unwrap();
        assert!(page.contains(".TH") && page.contains(".SH NAME"), "kafka-s3-archiver{command}.1:\n{page}");
    }
}

#[test]
fn the_systemd_unit_verifies_and_outlasts_the_revoke_timeout() {
    let unit = std::fs::read_to_string(repo("deploy/systemd/kafka-s3-archiver.service")).unwrap();
    let stop_timeout: u64 = setting(&unit, "TimeoutStopSec=").parse().unwrap();
    assert!(stop_timeout > 20 + 30, "TimeoutStopSec={stop_timeout} leaves no time to upload after a revoke");
    assert!(setting(&unit, "ExecStart=").contains(" run --config /etc/kafka-s3-archiver/archiver.toml"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kafka-s3-archiver.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/kafka-s3-archiver", BIN)).unwrap();
    match Command::new("systemd-analyze").arg("verify").arg(&path).output() {
        Ok(verified) => {
            // Unknown keys are only warned about: the unit must draw no remark at all.
            assert!(verified.status.success() && verified.stderr.is_empty(), "{}", text(&verified.stderr));
        }
        Err(e) => println!("systemd-analyze is not installed ({e}): the unit was checked for its settings only"),
    }
}

#[test]
fn the_kubernetes_manifests_use_real_settings_that_resolve() {
    let script = "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))";
    let parsed = Command::new(env("KSA_TEST_PYTHON"))
        .args(["-c", script, &repo("deploy/kubernetes/kafka-s3-archiver.yaml")])
        .output()
        .expect("run python");
    assert!(parsed.status.success(), "not valid YAML: {}", text(&parsed.stderr));
    let docs: Vec<serde_json::Value> = serde_json::from_slice(&parsed.stdout).unwrap();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ConfigMap", "Secret", "Deployment", "PodDisruptionBudget", "Service"]);
    let mut env: Vec<(String, String)> = Vec::new();
    for (doc, field) in [(&docs[0], "data"), (&docs[1], "stringData")] {
        for (k, v) in doc[field].as_object().unwrap() {
            env.push((k.clone(), v.as_str().unwrap().to_string()));
        }
    }
    // Every variable is one the archiver reads, and together they make a valid configuration.
    let help = text(&archiver(&["run", "--help"]).stdout) + &text(&archiver(&["--help"]).stdout);
    for (k, _) in &env {
        assert!(help.contains(&format!("[env: {k}=")), "{k} is not a setting of the archiver");
    }
    let resolved = Command::new(BIN).args(["run", "--print-config"]).envs(env.iter().cloned()).output().unwrap();
    assert!(resolved.status.success(), "the manifests' settings do not resolve: {}", text(&resolved.stderr));

    let pod = &docs[2]["spec"]["template"]["spec"];
    let revoke = env.iter().find(|(k, _)| k == "KSA_REVOKE_TIMEOUT").map(|(_, v)| v.trim_end_matches('s')).unwrap();
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(grace > revoke.parse::<u64>().unwrap() + 30, "grace period {grace}s vs revoke timeout {revoke}s");
    let container = &pod["containers"][0];
    let metrics_port =
        env.iter().find(|(k, _)| k == "KSA_METRICS_ADDR").unwrap().1.rsplit(':').next().unwrap().to_string();
    assert_eq!(container["ports"][0]["containerPort"].to_string(), metrics_port);
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(docs[2]["spec"]["selector"], docs[3]["spec"]["selector"], "the disruption budget covers the pods");
}

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path).display().to_string()
}

/// The value of a `Key=` line of a unit file.
fn setting<'a>(unit: &'a str, key: &str) -> &'a str {
    unit.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_else(|| panic!("no {key} in the unit"))
}
