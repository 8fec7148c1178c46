//! Security as production brokers have it: the test broker's SASL_SSL listener (SCRAM-SHA-512 over TLS,
//! a CA and a certificate made for the run by `localstack/start.sh`). The archiver archives through it
//! with `--kafka` settings, and never writes the password into its log; a wrong password and an
//! untrusted CA each stop start-up with one line that names the cause.

mod common;

use std::process::Command;

use common::*;
use kafka_s3_archiver::commands::demo::generate::produce;

fn sasl_ssl_flags(password: &str, ca: &str) -> Vec<String> {
    [
        "security.protocol=SASL_SSL".to_string(),
        "sasl.mechanism=SCRAM-SHA-512".to_string(),
        format!("sasl.username={}", env("KSA_TEST_SASL_USERNAME")),
        format!("sasl.password={password}"),
        format!("ssl.ca.location={ca}"),
    ]
    .into_iter()
    .flat_map(|kv| ["--kafka".to_string(), kv])
    .collect()
}

/// Archiver flags for `topic` through the SASL_SSL listener.
fn secure_args(dest: &TestDest, topic: &str, password: &str, ca: &str, spool: &std::path::Path) -> Vec<String> {
    let mut args = set_flag(
        archiver_args(dest, &unique("secure"), topic, 100, spool),
        "--brokers",
        &env("KSA_TEST_SASL_SSL_BROKERS"),
    );
    args.extend(sasl_ssl_flags(password, ca));
    args
}

#[tokio::test(flavor = "multi_thread")]
async fn archives_over_sasl_ssl_and_never_logs_the_password() {
    let topic = unique("secure");
    create_topic(&topic, 2).await;
    let produced = produce(&brokers(), &topic, 2, 0..500, 100).await.unwrap();
    let dest = TestDest::file();
    let store = dest.store().await;
    let spool = tempfile::tempdir().unwrap();
    let password = env("KSA_TEST_SASL_PASSWORD");
    let mut archiver =
        ArchiverProcess::spawn("secure", &secure_args(&dest, &topic, &password, &env("KSA_TEST_CA"), spool.path()));
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success(), "{}", archiver.log_text());
    assert_exactly_once(&dest, &topic, &produced).await;
    assert!(!archiver.log_text().contains(&password), "the password is in the log");
}

/// Runs the archiver to its end; returns its error line.
fn start_up_error(args: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver")).args(args).output().expect("run");
    assert!(!out.status.success(), "{args:?} should fail");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("error"))
        .unwrap_or_else(|| panic!("no error line:\n{stderr}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_password_or_an_untrusted_ca_stops_start_up_naming_the_cause() {
    let topic = unique("secure-bad");
    create_topic(&topic, 1).await;
    let dest = TestDest::file();
    let spool = tempfile::tempdir().unwrap();

    let wrong = "not-the-password-1234";
    let line = start_up_error(&secure_args(&dest, &topic, wrong, &env("KSA_TEST_CA"), spool.path()));
    println!("wrong password -> {line}");
    assert!(line.contains("Authentication failed") || line.contains("SASL authentication"), "{line}");
    assert!(!line.contains(wrong), "the password is in the error: {line}");

    // A CA the broker's certificate was not signed by.
    let other_ca = spool.path().join("other-ca.pem");
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other-ca"])
        .arg("-keyout")
        .arg(spool.path().join("other-ca.key"))
        .arg("-out")
        .arg(&other_ca)
        .output()
        .expect("openssl");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let password = env("KSA_TEST_SASL_PASSWORD");
    let line = start_up_error(&secure_args(&dest, &topic, &password, &other_ca.display().to_string(), spool.path()));
    println!("untrusted CA   -> {line}");
    assert!(line.contains("certificate verify failed") || line.contains("SSL handshake failed"), "{line}");
    assert!(!line.contains(&password), "the password is in the error: {line}");
}
