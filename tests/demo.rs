//! The embedded demo must pass on its own: mock Kafka, local archive, crash, restart, exact check; also
//! with so few records that the first archiver archives them all before its crash (the restarted one
//! then has nothing to archive, and still commits the partitions it holds to the table).

#[test]
fn demo_crashes_restarts_and_verifies() {
    for records in ["9000", "3000"] {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver"))
            .args(["demo", "--records", records, "--dir"])
            .arg(dir.path())
            .output()
            .expect("run demo");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "demo failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("CRASHED"), "{stdout}");
        assert!(stdout.contains("RESULT: OK"), "{stdout}");
        assert!(stdout.contains("missing 0, duplicates 0, different 0"), "{stdout}");
        assert!(stdout.contains("3 partitions, 0 problems"), "verify must find the archive clean:\n{stdout}");
    }
}
