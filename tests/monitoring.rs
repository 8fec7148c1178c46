//! The monitoring that ships under deploy/: the Prometheus alert rules, checked and unit-tested by
//! promtool (Debian's prometheus package, which localstack/install.sh unpacks). Each alert's cases, one
//! that fires and one that stays silent, are in deploy/prometheus/kafka-s3-archiver.rules.test.yml; the
//! annotations a firing alert must carry are filled in here from the rules (their `{{ $labels.x }}` from
//! the case's labels), so promtool checks that the templates render and the cases stay readable.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run the tests through localstack/test.sh"))
}

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
