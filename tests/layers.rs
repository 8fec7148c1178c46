//! The code's shape, checked: each folder imports only the folders below it, and the parts that decide
//! stay free of I/O. A workspace crate per layer would have the compiler enforce this; one crate with
//! this check keeps the folders by concept (a concept's pure part next to its I/O) and builds faster.

use std::path::{Path, PathBuf};

/// The top-level modules, lowest first: each may use only those before it.
const LAYERS: &[&str] = &[
    "allocator", // the process's allocator, installed by the binary and the benches
    "archive",   // the format: keys, claims, records, partitions, time buckets (pure)
    "clock",     // the wall clock, read in one place
    "values",    // typed values: schemas, checks, columns (pure)
    "encode",    // file bytes: Parquet, JSON lines, the spool they are written into, roll policy
    "store",     // the object-store seam and its backends
    "retry",     // one retry policy for store requests
    "http",      // HTTP(S) clients of the services besides Kafka and the store
    "registry",  // the Schema Registry's client and the schemas fetched from it
    "recovery",  // where a partition's archive ends and where it resumes
    "telemetry", // metrics, events and their log lines
    "table",     // tables (Iceberg) as views of the archive: what a commit adds, positions, cadence
    "source",    // the Kafka consumer
    "pipeline",  // writers, uploaders, recoverers between source and store
    "config",    // settings, layered and validated
    "service",   // the running archiver and its markers
    "commands",  // the command line and the operator commands
];

/// Files that decide and do no I/O: no tokio, AWS SDK, rdkafka, file system, network or clock (the
/// time is passed in). Their tests may do what they like.
const PURE: &[&str] = &[
    "archive/",
    "values/",
    "encode/jsonl.rs",
    "encode/parquet.rs",
    "encode/parquet/",
    "encode/roll.rs",
    "retry/backoff.rs",
    "store/stale.rs",
    "store/s3_errors.rs",
    "recovery/mod.rs",
    "recovery/search.rs",
    "recovery/resume.rs",
    "recovery/standing.rs",
    "commands/verify/audit/",
    "commands/restore/plan.rs",
    "commands/ddl/engines.rs",
    "table/mod.rs",
    "table/plan.rs",
    "table/audit.rs",
    "table/state.rs",
    "table/cadence.rs",
    "table/partition.rs",
    "table/iceberg/",
];

const IMPURE: &[&str] = &["tokio", "aws_", "rdkafka", "std::fs", "std::net", "SystemTime::now", "Instant::now"];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file's code without its test module (`#[cfg(test)] mod …`, last in a file), test folders and comments.
fn code(src: &Path, path: &Path) -> Option<(String, String)> {
    let relative = path.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
    let is_test = relative.contains("/tests/") || relative.ends_with("/tests.rs");
    if is_test || relative == "main.rs" || relative == "lib.rs" {
        return None;
    }
    let text = std::fs::read_to_string(path).unwrap();
    let before_tests = text.split("#[cfg(test)]\nmod ").next().unwrap_or_default();
    let lines: Vec<&str> = before_tests.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
    Some((relative, lines.join("\n")))
}

fn crate_files() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    files.iter().filter_map(|p| code(&src, p)).collect()
}

#[test]
fn each_folder_uses_only_those_below_it() {
    let mut wrong = Vec::new();
    for (file, code) in crate_files() {
        let top = file.split('/').next().unwrap().trim_end_matches(".rs");
        let own = LAYERS.iter().position(|l| *l == top).unwrap_or_else(|| panic!("{file}: {top} is in no layer"));
        for used in code.split("crate::").skip(1) {
            let name: String = used.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            match LAYERS.iter().position(|l| *l == name) {
                Some(layer) if layer > own => wrong.push(format!("{file} uses crate::{name}")),
                Some(_) => {}
                None => wrong.push(format!("{file} uses crate::{name}, which is in no layer")),
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layers (tests/layers.rs lists them):\n{}", wrong.join("\n"));
}

#[test]
fn the_parts_that_decide_do_no_io() {
    let mut wrong = Vec::new();
    for (file, code) in crate_files() {
        if PURE.iter().any(|p| file.starts_with(p)) {
            for what in IMPURE.iter().filter(|w| code.contains(**w)) {
                wrong.push(format!("{file} uses {what}"));
            }
        }
    }
    assert!(wrong.is_empty(), "I/O in a pure file (tests/layers.rs lists them):\n{}", wrong.join("\n"));
}
