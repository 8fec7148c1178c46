//! The monitoring that ships under deploy/, against a real Prometheus (Debian's prometheus package, which
//! localstack/install.sh unpacks): the alert rules, checked and unit-tested by promtool (each alert's
//! cases, one that fires and one that stays silent, are in
//! deploy/prometheus/kafka-s3-archiver.rules.test.yml; the annotations a firing alert must carry are filled
//! in here from the rules, their `{{ $labels.x }}` from the case's labels, so promtool checks that the
//! templates render and the cases stay readable); and the Grafana dashboard, every query of which returns
//! series from a Prometheus scraping a running archiver.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use kafka_s3_archiver::commands::demo::generate::produce;
use serde_json::{json, Value};

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path).display().to_string()
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// A YAML file as JSON (through PyYAML, as tests/packaging.rs reads the Kubernetes manifests).
fn yaml(path: &str) -> Value {
    let script = "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))";
    let out = Command::new(env("KSA_TEST_PYTHON")).args(["-c", script, path]).output().expect("run python");
    assert!(out.status.success(), "{path} is not valid YAML: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// An alert's annotations as Prometheus renders them for an alert of these labels.
fn rendered(annotations: &Value, labels: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for (name, template) in annotations.as_object().expect("annotations") {
        let mut text = template.as_str().expect("an annotation is text").to_string();
        for (label, value) in labels.as_object().expect("labels") {
            text = text.replace(&format!("{{{{ $labels.{label} }}}}"), value.as_str().expect("a label is text"));
        }
        assert!(!text.contains("{{"), "{name}: a template this test does not render: {text}");
        out.insert(name.clone(), text.into());
    }
    out.into()
}

#[test]
fn the_alert_rules_pass_promtool_and_each_alert_fires_and_stays_silent_when_it_should() {
    let promtool = env("KSA_TEST_PROMTOOL");
    let rules_path = repo("deploy/prometheus/kafka-s3-archiver.rules.yml");
    let checked = Command::new(&promtool).args(["check", "rules", &rules_path]).output().expect("run promtool");
    assert!(checked.status.success(), "promtool check rules: {}", text(&checked));

    let rules = yaml(&rules_path);
    let alerts: Vec<&Value> =
        rules["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap()).collect();
    let annotations = |name: &str| {
        &alerts.iter().find(|a| a["alert"] == name).unwrap_or_else(|| panic!("no alert {name}"))["annotations"]
    };
    let mut cases = yaml(&repo("deploy/prometheus/kafka-s3-archiver.rules.test.yml"));
    cases["rule_files"] = json!([rules_path]);
    let (mut fired, mut silent) = (BTreeSet::new(), BTreeSet::new());
    for test in cases["tests"].as_array_mut().expect("tests") {
        for case in test["alert_rule_test"].as_array_mut().expect("alert_rule_test") {
            let name = case["alertname"].as_str().expect("alertname").to_string();
            let expected = case["exp_alerts"].as_array_mut().expect("exp_alerts");
            for alert in expected.iter_mut() {
                alert["exp_annotations"] = rendered(annotations(&name), &alert["exp_labels"]);
            }
            if expected.is_empty() {
                silent.insert(name)
            } else {
                fired.insert(name)
            };
        }
    }
    let names: BTreeSet<String> = alerts.iter().map(|a| a["alert"].as_str().unwrap().to_string()).collect();
    assert_eq!((&fired, &silent), (&names, &names), "every alert has a case that fires and one that stays silent");

    let dir = tempfile::tempdir().unwrap();
    let tests = dir.path().join("rules.test.yml");
    // JSON is YAML.
    std::fs::write(&tests, serde_json::to_vec_pretty(&cases).unwrap()).unwrap();
    let tested = Command::new(&promtool).arg("test").arg("rules").arg(&tests).output().expect("run promtool");
    assert!(tested.status.success(), "promtool test rules: {}", text(&tested));
}

/// A Prometheus server of the test's own, stopped when dropped.
struct Prometheus {
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes `target` every second as job kafka-s3-archiver, with the alert rules loaded.
    fn scraping(target: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let addr = free_addr();
        let config = json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [repo("deploy/prometheus/kafka-s3-archiver.rules.yml")],
            "scrape_configs": [{"job_name": "kafka-s3-archiver", "static_configs": [{"targets": [target]}]}],
        });
        let path = dir.path().join("prometheus.yml");
        std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(env("KSA_TEST_PROMETHEUS"))
            .arg(format!("--config.file={}", path.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let prometheus = Self { child, addr, dir };
        // Its API answers 503 until it is ready.
        let started = Instant::now();
        while std::net::TcpStream::connect(&prometheus.addr).is_err() || http_get(&prometheus.addr, "/-/ready").0 != 200
        {
            assert!(started.elapsed() < Duration::from_secs(30), "Prometheus not ready in 30 s: {}", prometheus.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        prometheus
    }

    /// An instant query's result (its series).
    fn query(&self, expr: &str) -> Vec<Value> {
        let (status, body) = http_get(&self.addr, &format!("/api/v1/query?query={}", percent_encoded(expr)));
        assert_eq!(status, 200, "{expr}: {body}");
        let answer: Value = serde_json::from_str(&body).unwrap();
        answer["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_dashboard_query_returns_series_from_prometheus_scraping_a_running_archiver() {
    let topic = unique("dashboard");
    create_topic(&topic, 2).await;
    let dest = TestDest::s3().await;
    let spool = tempfile::tempdir().unwrap();
    let metrics = free_addr();
    let mut args = archiver_args(&dest, &unique("g"), &topic, 100, spool.path());
    args.extend(["--metrics-addr".into(), metrics.clone()]);
    let mut archiver = ArchiverProcess::spawn("dashboard", &args);
    let produced = produce(&brokers(), &topic, 2, 0..600, 100).await.unwrap();
    let store = dest.store().await;
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut archiver]).await;

    let prometheus = Prometheus::scraping(&metrics);
    // Rates need two scrapes in their window; the lag, librdkafka's statistics (every 5 s).
    let started = Instant::now();
    while prometheus.query("count_over_time(ksa_unarchived_records[1m]) >= 3").len() < 2 {
        archiver.assert_running();
        assert!(started.elapsed() < Duration::from_secs(60), "no scrapes in 60 s; log:\n{}", prometheus.log());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let dashboard: Value =
        serde_json::from_slice(&std::fs::read(repo("deploy/grafana/kafka-s3-archiver.json")).unwrap()).unwrap();
    let mut queries = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            let expr = expr.replace("$instance", ".*").replace("$topic", &topic).replace("$__rate_interval", "1m");
            let series = prometheus.query(&expr);
            assert!(!series.is_empty(), "panel {:?}: {expr} returned no series", panel["title"]);
            queries += 1;
        }
    }
    assert!(queries >= 30, "{queries} queries");
    // The variables' queries name this instance and topic.
    assert!(prometheus.query(&format!("ksa_archived_offset{{topic=\"{topic}\"}}")).len() == 2);
    // The alert rules load into a real Prometheus, and none fires for a healthy archiver.
    let (status, body) = http_get(&prometheus.addr, "/api/v1/rules");
    assert_eq!(status, 200);
    let rules: Value = serde_json::from_str(&body).unwrap();
    let loaded: Vec<&Value> =
        rules["data"]["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap()).collect();
    assert_eq!(loaded.len(), 8);
    for rule in loaded {
        assert_eq!((rule["health"].as_str(), rule["state"].as_str()), (Some("ok"), Some("inactive")), "{rule}");
    }
}
