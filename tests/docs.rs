//! The documentation against the code: the configuration reference is the command line's own, and the
//! README stays short and points only at files that exist.

use std::path::Path;

use clap::CommandFactory;
use kafka_s3_archiver::commands::{cli::Cli, reference};

#[test]
fn the_configuration_reference_is_the_command_lines() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md");
    let written = reference::markdown(&Cli::command());
    if std::env::var_os("KSA_BLESS").is_some() {
        std::fs::write(&path, &written).unwrap();
    }
    let documented = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        documented == written,
        "docs/configuration.md differs from the command line's definitions: run `KSA_BLESS=1 cargo test --test docs` and commit it"
    );
}

#[test]
fn the_readme_is_short_and_its_links_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: what is not set-up or a first run belongs in docs/");
    for doc in [
        "README.md",
        "ARCHITECTURE.md",
        "docs/archive.md",
        "docs/operations.md",
        "docs/performance.md",
        "docs/performance-history.md",
        "docs/testing.md",
    ] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"));
        let dir = root.join(doc).parent().unwrap().to_path_buf();
        for target in links(&text) {
            let file = target.split('#').next().unwrap();
            assert!(file.is_empty() || dir.join(file).exists(), "{doc} links to {target}, which does not exist");
        }
    }
}

/// The relative link targets of a Markdown text: `[text](target)`, not URLs.
fn links(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|t| !t.contains("://") && !t.starts_with("mailto:"))
        .map(str::to_string)
        .collect()
}
