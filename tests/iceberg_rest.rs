//! Iceberg tables on a real REST catalog (Apache Iceberg's own server, started by localstack/), read back
//! by pyiceberg through the same catalog: two committers racing on one table (one with OAuth2 client
//! credentials), and an archiver killed after its uploads but before any commit, whose files the next
//! instance adds; every snapshot read by time travel holds exactly the positions its summary records;
//! typed values that gain a column mid-stream evolve the table's schema through the catalog; requests
//! signed with AWS Signature Version 4 carry the signature AWS's own Python SDK (botocore) computes.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use kafka_s3_archiver::archive::record::Record;
use kafka_s3_archiver::commands::demo::generate::{produce, produce_records};
use kafka_s3_archiver::commands::verify::tables::check_tables;
use kafka_s3_archiver::config::{CatalogConfig, CatalogLocation, Settings, ValueFormatName};
use kafka_s3_archiver::store::ObjectStore;
use kafka_s3_archiver::table::catalog::rest::{RestAuth, RestCatalog, RestOptions};
use kafka_s3_archiver::table::catalog::{Catalog, Committed, TableIdent};
use kafka_s3_archiver::table::committer::{Committer, TopicTable};
use kafka_s3_archiver::table::iceberg::metadata::Change;
use kafka_s3_archiver::table::table_name;
use rdkafka::mocking::MockCluster;

fn rest(auth: RestAuth, store: Arc<dyn ObjectStore>) -> RestCatalog {
    RestCatalog::new(RestOptions { url: env("KSA_TEST_ICEBERG_REST"), warehouse: None, auth, ca: None }, store)
}

/// A namespace of its own per test run (the catalog outlives no run, but tests share it).
fn namespace() -> String {
    unique("kafka").replace('-', "_")
}

#[tokio::test(flavor = "multi_thread")]
async fn two_committers_on_a_rest_catalog_add_each_file_once() {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("payments", 3, 1).unwrap();
    let produced = produce(&bootstrap, "payments", 3, 0..900, 40).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, store) = archive_mock_topic(&bootstrap, dir.path(), "payments", &produced).await;
    let prefix = config.store.dest.prefix().clone();
    let objects = data_objects(store.as_ref(), &prefix, "payments").await;
    let ns = namespace();
    let table = TopicTable {
        ident: TableIdent { namespace: ns.clone(), name: "payments".into() },
        topic: "payments".into(),
        width: None,
    };
    let committer = |auth| Committer {
        store: store.clone(),
        catalog: Arc::new(rest(auth, store.clone())),
        prefix: prefix.clone(),
        max_files: 1000,
        recent: Default::default(),
    };
    let oauth2 = RestAuth::ClientCredentials {
        client_id: "ksa".into(),
        client_secret: "s3cr3t".into(),
        scope: "catalog".into(),
    };
    let (a, b) = (committer(RestAuth::None), committer(oauth2));

    // Both create the table (one registration wins) and both commit partition 1.
    let (ra, rb) = tokio::join!(a.commit(&table, &[0, 1], 1_000), b.commit(&table, &[1, 2], 1_000));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(ra.files + rb.files, objects, "{ra:?} {rb:?}");
    assert_eq!(ra.records + rb.records, 900);
    // A committer signing its requests with AWS Signature Version 4 (as Glue's endpoint wants; this
    // catalog takes them, signed or not) loads and plans through the catalog: nothing new.
    let sigv4 = committer(RestAuth::SigV4 { signing_name: "glue".into(), region: None });
    let again = sigv4.commit(&table, &[0, 1, 2], 2_000).await.unwrap();
    assert_eq!((again.files, again.snapshot_id), (0, None), "nothing new: no snapshot");
    check_pyiceberg(&ns, "payments", &[], &produced);

    // The catalog orders commits: two planned on the same table, the second is refused, changing nothing.
    let catalog = rest(RestAuth::None, store.clone());
    let planned = catalog.load(&table.ident).await.unwrap().unwrap();
    let m = &planned.metadata;
    let current = m["snapshots"].as_array().unwrap().iter().find(|s| s["snapshot-id"] == m["current-snapshot-id"]);
    let change = |id: i64| Change {
        snapshot: serde_json::json!({
            "snapshot-id": id, "parent-snapshot-id": m["current-snapshot-id"],
            "sequence-number": m["last-sequence-number"].as_i64().unwrap() + 1,
            "timestamp-ms": m["last-updated-ms"], "manifest-list": current.unwrap()["manifest-list"],
            "summary": { "operation": "append" }, "schema-id": m["current-schema-id"],
        }),
        properties: vec![],
        schema: None,
        expired: vec![],
    };
    let first = catalog.commit(&table.ident, &planned, &change(11), 0).await.unwrap();
    assert!(matches!(first, Committed::Done(_)), "{first:?}");
    let second = catalog.commit(&table.ident, &planned, &change(12), 0).await.unwrap();
    assert_eq!(second, Committed::Conflict);
    let now = catalog.load(&table.ident).await.unwrap().unwrap();
    assert_eq!(now.metadata["current-snapshot-id"], 11, "the refused commit changed nothing");
}

#[tokio::test(flavor = "multi_thread")]
async fn files_uploaded_by_an_instance_killed_before_committing_are_added_by_the_next() {
    let topic = unique("ledger");
    create_topic(&topic, 2).await;
    let produced = produce(&brokers(), &topic, 2, 0..600, 40).await.unwrap();
    let dest = TestDest::s3().await;
    let store = dest.store().await;
    let spool = tempfile::tempdir().unwrap();
    let ns = namespace();
    let args = archiver_args(&dest, &unique("g"), &topic, 100, spool.path());
    let args = [
        args,
        ["--table", "iceberg", "--iceberg-catalog", &env("KSA_TEST_ICEBERG_REST"), "--iceberg-namespace", &ns]
            .map(String::from)
            .to_vec(),
    ]
    .concat();

    // `run --check` asks the catalog too.
    let check = |args: &[String]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver"))
            .args(args)
            .arg("--check")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (ok, said) = check(&args);
    assert!(ok && said.contains("iceberg REST catalog") && said.contains("reachable"), "{said}");
    let (ok, said) = check(&set_flag(args.clone(), "--iceberg-catalog", "http://127.0.0.1:9"));
    assert!(!ok && said.contains("--iceberg-catalog"), "{said}");

    // The first instance uploads everything, and would commit only after an hour: killed first.
    let mut first = ArchiverProcess::spawn("rest-first", &set_flag(args.clone(), "--table-commit-interval", "1h"));
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&produced), &mut [&mut first]).await;
    first.kill_hard();
    let catalog = rest(RestAuth::None, store.clone());
    let ident = TableIdent { namespace: ns.clone(), name: table_name(&topic) };
    assert!(catalog.load(&ident).await.unwrap().is_none(), "the first instance committed nothing");

    // The next one adds what the archive holds and the table does not, once.
    let mut next = ArchiverProcess::spawn("rest-next", &set_flag(args, "--table-commit-interval", "1s"));
    let wanted: Vec<String> = produced.iter().map(|(p, r)| format!("{p}={}", r.last().unwrap().offset + 1)).collect();
    let started = std::time::Instant::now();
    while positions(&catalog, &ident).await != wanted {
        next.assert_running();
        assert!(
            started.elapsed().as_secs() < 90,
            "the table is at {:?}; log:\n{}",
            positions(&catalog, &ident).await,
            next.log_text()
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    next.terminate();
    let options = RestOptions { url: env("KSA_TEST_ICEBERG_REST"), warehouse: None, auth: RestAuth::None, ca: None };
    let catalog =
        CatalogConfig { location: CatalogLocation::Rest(options), name: "default".into(), namespace: ns.clone() };
    let checked = check_tables(store.clone(), &dest.prefix(), &catalog, std::slice::from_ref(&topic)).await.unwrap();
    assert_eq!((checked[0].records, checked[0].problems.clone()), (600, vec![]), "verify finds the table exact");
    let s3 = [
        ("s3.endpoint", s3_endpoint()),
        ("s3.access-key-id", "test".into()),
        ("s3.secret-access-key", "test".into()),
        ("s3.region", "us-east-1".into()),
    ];
    check_pyiceberg(&ns, &table_name(&topic), &s3, &produced);
}

/// Typed values whose producer adds a field mid-stream, committed a few files at a time: the REST
/// catalog takes the commit that evolves the schema (add-schema, set-current-schema, with the files
/// that need it) and pyiceberg reads the new column through it.
#[tokio::test(flavor = "multi_thread")]
async fn a_column_added_mid_stream_evolves_a_rest_catalogs_table() {
    let cluster = MockCluster::new(1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("carts", 2, 1).unwrap();
    let produced = produce_records(&bootstrap, "carts", 2, 0..400, cart).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        roll_records: Some(50),
        value_format: Some(ValueFormatName::Json),
        value_schema: Some("infer".into()),
        ..mock_settings(&bootstrap, dir.path())
    };
    let (config, store) = archive_mock_topic_as(settings, "carts", &produced).await;
    let ns = namespace();
    let table = TopicTable::new(&ns, "carts", None);
    let catalog = Arc::new(rest(RestAuth::None, store.clone()));
    let committer = Committer {
        store: store.clone(),
        catalog: catalog.clone(),
        prefix: config.store.dest.prefix().clone(),
        max_files: 3,
        recent: Default::default(),
    };
    let mut commits = 0;
    while committer.commit(&table, &[0, 1], 1_000).await.unwrap().snapshot_id.is_some() {
        commits += 1;
    }
    let loaded = catalog.load(&table.ident).await.unwrap().unwrap();
    let schemas = loaded.metadata["schemas"].as_array().unwrap().len();
    assert!(commits > 2 && schemas == 2, "{commits} commits, {schemas} schemas: the schema evolved once");
    let load = r#"
from pyiceberg.catalog.rest import RestCatalog
t = RestCatalog("rest", uri=sys.argv[1]).load_table(sys.argv[2])
"#;
    let args = [env("KSA_TEST_ICEBERG_REST"), format!("{ns}.carts")];
    assert_eq!(read_carts_table(load, &args), carts_table(400, 50, 2));
}

/// The table's positions, `partition=position`, in partition order.
async fn positions(catalog: &RestCatalog, ident: &TableIdent) -> Vec<String> {
    let Some(table) = catalog.load(ident).await.unwrap() else { return Vec::new() };
    let properties = table.metadata["properties"].as_object().cloned().unwrap_or_default();
    let mut found: Vec<(i32, String)> = properties
        .iter()
        .filter_map(|(k, v)| {
            Some((k.strip_prefix("kafka-s3-archiver.position.")?.parse().ok()?, v.as_str()?.to_string()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(p, v)| format!("{p}={v}")).collect()
}

/// pyiceberg's RestCatalog on the same catalog reads every produced record once, each partition's
/// through its last offset; and at every snapshot (time travel) each partition holds exactly the
/// records before the position its summary (or an earlier one's) records.
fn check_pyiceberg(namespace: &str, table: &str, io: &[(&str, String)], produced: &BTreeMap<i32, Vec<Record>>) {
    let script = r#"
import sys
from pyiceberg.catalog.rest import RestCatalog
props = dict(a.split("=", 1) for a in sys.argv[3:])
t = RestCatalog("rest", uri=sys.argv[1], **props).load_table(sys.argv[2])
rows = t.scan().to_arrow()
pairs = list(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist()))
print("rows", len(pairs), len(set(pairs)))
for p in sorted({p for p, _ in pairs}):
    print("partition", p, max(o for q, o in pairs if q == p))
recorded = {}
for s in sorted(t.snapshots(), key=lambda s: s.sequence_number):
    for k, v in s.summary.additional_properties.items():
        if k.startswith("kafka-s3-archiver.position."):
            recorded[int(k.rsplit(".", 1)[1])] = int(v)
    at = t.scan(snapshot_id=s.snapshot_id).to_arrow()["partition"].to_pylist()
    held = {p: at.count(p) for p in set(at)}
    if held != recorded:
        print("snapshot", s.snapshot_id, "holds", held, "but records", recorded)
"#;
    let mut args =
        vec!["-c".to_string(), script.to_string(), env("KSA_TEST_ICEBERG_REST"), format!("{namespace}.{table}")];
    args.extend(io.iter().map(|(k, v)| format!("{k}={v}")));
    let out = std::process::Command::new(env("KSA_TEST_PYTHON")).args(&args).output().expect("run pyiceberg");
    assert!(out.status.success(), "pyiceberg failed: {}", String::from_utf8_lossy(&out.stderr));
    let total: usize = produced.values().map(Vec::len).sum();
    let mut expected = vec![format!("rows {total} {total}")];
    for (p, records) in produced {
        expected.push(format!("partition {p} {}", records.last().unwrap().offset));
    }
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().collect::<Vec<_>>(), expected);
}

/// The requests a catalog signer signs carry the very signature botocore (AWS's Python SDK, its SigV4Auth)
/// computes for the same request, time and credentials: a GET with a query, a POST with a JSON body, a
/// path with an escaped character, temporary credentials with a session token, S3 Tables' escaped ARN.
#[test]
fn signed_requests_carry_the_signature_botocore_computes() {
    use kafka_s3_archiver::table::catalog::sigv4::sign_request;
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_385_600); // 2026-12-04T12:00:00Z
    let keys = aws_credential_types::Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG", None, None, "test");
    let temporary = aws_credential_types::Credentials::new("ASIAEXAMPLE", "s3cr3t", Some("T0K3N".into()), None, "t");
    let glue = "https://glue.eu-west-1.amazonaws.com/iceberg/v1";
    let tables =
        "https://s3tables.eu-west-1.amazonaws.com/iceberg/v1/arn%3Aaws%3As3tables%3Aeu-west-1%3A1234%3Abucket%2Flake";
    let cases = [
        ("glue", "GET", format!("{glue}/config?warehouse=123456789012"), "", &keys),
        (
            "glue",
            "POST",
            format!("{glue}/catalogs/1234/namespaces/kafka/tables/orders"),
            r#"{"requirements":[]}"#,
            &keys,
        ),
        ("glue", "GET", "http://127.0.0.1:8181/v1/namespaces/a%1Fb/tables/c".to_string(), "", &temporary),
        ("s3tables", "GET", format!("{tables}/namespaces/kafka"), "", &keys),
    ];
    let mut signed = Vec::new();
    for (service, method, url, body, credentials) in cases {
        let mut request = hyper::Request::builder().method(method).uri(&url).header("accept", "application/json");
        if !body.is_empty() {
            request = request.header("content-type", "application/json");
        }
        let mut request = request.body(()).unwrap();
        sign_request(&mut request, body.as_bytes(), credentials, service, "eu-west-1", time).unwrap();
        let headers: BTreeMap<String, String> =
            request.headers().iter().map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap().to_string())).collect();
        signed.push(serde_json::json!({
            "service": service, "method": method, "url": url, "body": body, "headers": headers,
            "key": credentials.access_key_id(), "secret": credentials.secret_access_key(),
            "token": credentials.session_token(),
        }));
    }
    let script = r#"
import datetime, json, sys
from unittest import mock
import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
for case in json.load(sys.stdin):
    headers = {k: v for k, v in case["headers"].items() if k not in ("authorization", "x-amz-date", "x-amz-security-token")}
    request = AWSRequest(method=case["method"], url=case["url"], data=case["body"].encode(), headers=headers)
    signer = botocore.auth.SigV4Auth(Credentials(case["key"], case["secret"], case["token"]), case["service"], "eu-west-1")
    with mock.patch.object(botocore.auth, "get_current_datetime", lambda: datetime.datetime(2026, 12, 4, 12, 0, 0)):
        signer.add_auth(request)
    print(request.headers["Authorization"])
"#;
    let mut python = std::process::Command::new(env("KSA_TEST_PYTHON"))
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run botocore");
    use std::io::Write as _;
    python.stdin.take().unwrap().write_all(serde_json::to_string(&signed).unwrap().as_bytes()).unwrap();
    let out = python.wait_with_output().unwrap();
    assert!(out.status.success(), "botocore failed: {}", String::from_utf8_lossy(&out.stderr));
    let botocore: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(String::from).collect();
    let ours: Vec<String> =
        signed.iter().map(|s| s["headers"]["authorization"].as_str().unwrap().to_string()).collect();
    assert_eq!(ours, botocore);
    assert!(ours[0].contains("Credential=AKIDEXAMPLE/20261204/eu-west-1/glue/aws4_request"), "{}", ours[0]);
    assert!(signed[2]["headers"]["x-amz-security-token"] == "T0K3N", "{}", signed[2]);
}
