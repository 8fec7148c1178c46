//! What a deployment relies on: `run --check` (a config is tested before it is rolled out: settings,
//! brokers, topics, archive), shell completions and man pages, and the files under deploy/ (the
//! systemd unit passes `systemd-analyze verify`; the Kubernetes manifests and what the Helm chart renders
//! are valid YAML whose settings are the archiver's and resolve, with a grace period longer than the
//! revoke timeout; the chart passes `helm lint --strict` and refuses values it does not know).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use common::*;
use serde_json::Value;

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
             s3-endpoint = \"{}\"\narchive-group-offsets = \"app-.*\"\n[kafka]\n\"ssl.key.password\" = \"s3cret\"\n",
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
    assert!(out.contains("# ok: group offsets: the consumer groups can be listed"), "{out}");
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
    let docs = yaml_documents(&repo("deploy/kubernetes/kafka-s3-archiver.yaml"));
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

const CHART: &str = "deploy/helm/kafka-s3-archiver";

/// Values a user would give: numbers where YAML has numbers (Helm reads them as floats), librdkafka
/// settings that are not strings, a secret, a bigger buffer and the ServiceMonitor.
const USER_VALUES: &str = "config:\n  brokers: kafka:9092\n  group: archivers\n  topics: [orders]\n  \
                           dest: s3://bucket/archive\n  roll-records: 100000\n  kafka:\n    fetch.max.bytes: 52428800\n    \
                           check.crcs: true\nsecretEnv:\n  KSA_KAFKA: sasl.username=a;sasl.password=b\nmaxBufferMiB: 1024\n\
                           revokeTimeoutSeconds: 45\nserviceMonitor:\n  enabled: true\n";

fn helm(args: &[&str]) -> Output {
    Command::new(env("KSA_TEST_HELM")).args(args).output().expect("run helm")
}

/// What the chart renders with `values`: its objects, by kind.
fn render_chart(release: &str, values: &str) -> BTreeMap<String, Value> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("values.yaml");
    std::fs::write(&path, values).unwrap();
    let rendered = helm(&["template", release, &repo(CHART), "-f", &path.display().to_string()]);
    assert!(rendered.status.success(), "{}", text(&rendered.stderr));
    let manifests = dir.path().join("rendered.yaml");
    std::fs::write(&manifests, &rendered.stdout).unwrap();
    let docs = yaml_documents(&manifests.display().to_string());
    let by_kind: BTreeMap<String, Value> =
        docs.iter().map(|d| (d["kind"].as_str().unwrap().to_string(), d.clone())).collect();
    assert_eq!(by_kind.len(), docs.len(), "one object of each kind");
    by_kind
}

#[test]
fn the_helm_chart_lints_and_renders_settings_that_resolve() {
    let linted = helm(&["lint", "--strict", &repo(CHART)]);
    assert!(linted.status.success(), "{}{}", text(&linted.stdout), text(&linted.stderr));
    let objects = render_chart("archive", USER_VALUES);
    let kinds: Vec<&str> = objects.keys().map(String::as_str).collect();
    let expected =
        ["ConfigMap", "Deployment", "PodDisruptionBudget", "Secret", "Service", "ServiceAccount", "ServiceMonitor"];
    assert_eq!(kinds, expected);

    // The ConfigMap's file and the pod's variables are the archiver's settings, and they resolve.
    let dir = tempfile::tempdir().unwrap();
    let toml = objects["ConfigMap"]["data"]["archiver.toml"].as_str().unwrap();
    let config = dir.path().join("archiver.toml");
    std::fs::write(&config, toml).unwrap();
    let pod = &objects["Deployment"]["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let secret = objects["Secret"]["stringData"].as_object().unwrap().iter().map(|(k, v)| (k.as_str(), v));
    let env = container["env"].as_array().unwrap().iter().map(|e| (e["name"].as_str().unwrap(), &e["value"]));
    let env: Vec<(&str, &str)> = secret.chain(env).map(|(k, v)| (k, v.as_str().unwrap())).collect();
    let help = text(&archiver(&["run", "--help"]).stdout);
    assert!(env.iter().all(|(k, _)| help.contains(&format!("[env: {k}="))), "{env:?}");
    let resolved = Command::new(BIN)
        .args(["run", "--print-config", "--config", &config.display().to_string()])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let effective = text(&resolved.stdout);
    assert!(resolved.status.success(), "the chart's settings do not resolve: {}\n{toml}", text(&resolved.stderr));
    for line in ["roll-records = 100000", "\"fetch.max.bytes\" = \"52428800\"", "\"sasl.password\" = \"****\""] {
        assert!(effective.contains(line), "{line} not in effect:\n{effective}");
    }
    let args: Vec<&str> = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    let mount = container["volumeMounts"].as_array().unwrap().iter().find(|m| m["name"] == "config").unwrap();
    assert_eq!(args, ["run", "--config", &format!("{}/archiver.toml", mount["mountPath"].as_str().unwrap())]);
    let volume = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "config").unwrap();
    assert_eq!(volume["configMap"]["name"], objects["ConfigMap"]["metadata"]["name"]);
    assert_eq!(container["envFrom"][0]["secretRef"]["name"], objects["Secret"]["metadata"]["name"]);
    assert_eq!(pod["serviceAccountName"], objects["ServiceAccount"]["metadata"]["name"]);
}

#[test]
fn the_helm_charts_pods_fit_their_memory_spool_and_grace_and_are_selected_and_scraped() {
    let objects = render_chart(&"a".repeat(53), USER_VALUES);
    let toml = objects["ConfigMap"]["data"]["archiver.toml"].as_str().unwrap();
    let deployment = &objects["Deployment"];
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let revoke: u64 = setting(toml, "revoke-timeout = ").trim_matches(['"', 's']).parse().unwrap();
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(revoke == 45 && grace > revoke + 30, "grace period {grace}s vs revoke timeout {revoke}s");
    let mib = |v: &str| v.trim_matches('"').trim_end_matches("MiB").trim_end_matches("Mi").parse::<u64>().unwrap();
    let budget = mib(setting(toml, "max-buffer-bytes = "));
    let (request, limit) = (&container["resources"]["requests"]["memory"], &container["resources"]["limits"]["memory"]);
    let (request, limit) = (mib(request.as_str().unwrap()), mib(limit.as_str().unwrap()));
    // The budget, librdkafka (twice its 64 MiB queue, as measured) and 96 MiB.
    assert!(budget == 1024 && request >= budget + 2 * 64 + 96, "memory {request} MiB for a {budget} MiB budget");
    assert!(limit > request, "memory limit {limit} MiB vs request {request} MiB");
    let spool = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "spool").unwrap();
    let (spooled, room) =
        (mib(setting(toml, "max-spool-bytes = ")), mib(spool["emptyDir"]["sizeLimit"].as_str().unwrap()));
    assert!(
        room > spooled && spool["emptyDir"]["medium"].is_null(),
        "spool of {spooled} MiB on a {room} MiB disk volume"
    );

    let port = setting(toml, "metrics-addr = ").trim_matches('"').rsplit(':').next().unwrap().to_string();
    assert_eq!(container["ports"][0]["containerPort"].to_string(), port);
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    let selector = &deployment["spec"]["selector"]["matchLabels"];
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in selector.as_object().unwrap() {
        assert_eq!(&labels[key], value, "the pods carry the selector's label {key}");
    }
    assert_eq!(objects["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"], *selector);
    let service = &objects["Service"];
    assert_eq!(service["spec"]["selector"], *selector);
    assert!(service["metadata"]["name"].as_str().unwrap().len() <= 63, "a Service name is a DNS label");
    let monitor = &objects["ServiceMonitor"]["spec"];
    for (key, value) in monitor["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&service["metadata"]["labels"][key], value, "the ServiceMonitor selects the Service");
    }
    assert_eq!(monitor["endpoints"][0]["port"], service["spec"]["ports"][0]["name"]);
    let rules = std::fs::read_to_string(repo("deploy/prometheus/kafka-s3-archiver.rules.yml")).unwrap();
    let job = &service["metadata"]["labels"][monitor["jobLabel"].as_str().unwrap()];
    assert!(rules.contains(&format!("up{{job={job}}}")), "the scrape job is {job}, as the alert rules expect");
}

#[test]
fn the_helm_chart_refuses_settings_it_owns_and_values_it_does_not_know() {
    let chart = repo(CHART);
    for (set, says) in [
        ("config.revoke-timeout=5s", "set revokeTimeoutSeconds instead"),
        ("config.metrics-addr=0.0.0.0:1", "set metrics.port instead"),
        ("config.max-buffer-bytes=1GiB", "set maxBufferMiB instead"),
        ("config.max-spool-bytes=1GiB", "set spool.maxMiB instead"),
        ("memoryHeadroomPercent=0", "/memoryHeadroomPercent"),
        ("config.dest=", "/config/dest"),
        ("replicas=2", "'replicas' not allowed"),
        ("uploadGraceSeconds=5", "/uploadGraceSeconds"),
    ] {
        let rendered = helm(&["template", "archive", &chart, "--set", set]);
        let stderr = text(&rendered.stderr);
        assert!(!rendered.status.success() && stderr.contains(says), "--set {set}: {stderr}");
    }
}

/// The documents of a YAML file, as JSON (empty documents left out).
fn yaml_documents(path: &str) -> Vec<Value> {
    let script = "import json, sys, yaml; print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d]))";
    let parsed = Command::new(env("KSA_TEST_PYTHON")).args(["-c", script, path]).output().expect("run python");
    assert!(parsed.status.success(), "{path} is not valid YAML: {}", text(&parsed.stderr));
    serde_json::from_slice(&parsed.stdout).unwrap()
}

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path).display().to_string()
}

/// The value of a `Key=` line of a unit file, or of a `key = ` line of a TOML file.
fn setting<'a>(file: &'a str, key: &str) -> &'a str {
    file.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_else(|| panic!("no {key:?} line in:\n{file}"))
}
