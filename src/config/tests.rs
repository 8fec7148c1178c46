use super::*;
use crate::archive::time_bucket::BucketWidth;
use crate::values::ValueFormat;

fn minimal() -> Settings {
    Settings {
        brokers: Some("localhost:9092".into()),
        group: Some("g".into()),
        topics: Some(vec!["orders".into()]),
        dest: Some("s3://bucket/pre".into()),
        ..Settings::default()
    }
}

/// The profile of the topic `orders`.
fn orders(c: &ArchiverConfig) -> &TopicProfile {
    c.pipeline.profiles.for_topic("orders")
}

#[test]
fn defaults_fill_in() {
    let c = minimal().resolve(None).unwrap();
    assert_eq!(orders(&c).spec.format(), Format::Parquet);
    assert_eq!(orders(&c).spec.compression(), Compression::Zstd);
    assert_eq!(orders(&c).roll.max_bytes, 64 << 20);
    assert_eq!(orders(&c).roll.max_age, Duration::from_secs(300));
    assert_eq!(c.store.settings.s3.part_size(), 8 << 20);
    assert_eq!(c.source.start_from, StartFrom::Earliest);
    assert_eq!(c.source.subscription, vec!["orders".to_string()]);
    assert!(c.pipeline.claims);
}

#[test]
fn flags_win_over_the_file_and_the_file_over_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("archiver.toml");
    let text = r#"
        brokers = "file:1"
        group = "file-group"
        topics = ["a", "b"]
        dest = "file:///tmp/x"
        roll-bytes = "1MiB"
        roll-age = "10s"
        [kafka]
        "security.protocol" = "SASL_SSL"
        "sasl.mechanism" = "SCRAM-SHA-512"
        "#;
    std::fs::write(&file, text).unwrap();
    let flags = Settings {
        group: Some("flag-group".into()),
        roll_age: Some("3s".parse().unwrap()),
        kafka_flags: Some(vec!["sasl.mechanism=PLAIN".into()]),
        ..Settings::default()
    };
    let c = flags.resolve(Some(&file)).unwrap();
    assert_eq!(c.source.brokers, "file:1");
    assert_eq!(c.source.group, "flag-group");
    assert_eq!(c.source.subscription, vec!["a".to_string(), "b".to_string()]);
    let a = c.pipeline.profiles.for_topic("a");
    assert_eq!(a.roll.max_bytes, 1 << 20);
    assert_eq!(a.roll.max_age, Duration::from_secs(3));
    assert_eq!(a.roll.max_records, DEFAULT_ROLL_RECORDS);
    assert!(c.source.kafka_props.contains(&("security.protocol".into(), "SASL_SSL".into())));
    assert!(c.source.kafka_props.contains(&("sasl.mechanism".into(), "PLAIN".into())));
}

#[test]
fn secrets_are_masked_when_the_settings_are_shown() {
    let flags = Settings {
        kafka_flags: Some(vec!["sasl.password=hunter2".into(), "sasl.username=archiver".into()]),
        ..minimal()
    };
    let shown = flags.effective(None).unwrap().to_toml();
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("\"sasl.password\" = \"****\""), "{shown}");
    assert!(shown.contains("\"sasl.username\" = \"archiver\""), "{shown}");
}

#[test]
fn unknown_keys_in_the_file_are_rejected() {
    let err = toml::from_str::<Settings>("brokers = \"x\"\nroll-sise = \"1MiB\"\n").unwrap_err();
    assert!(err.to_string().contains("roll-sise"), "{err}");
}

#[test]
fn bad_values_name_the_setting() {
    let cases: Vec<(Settings, &str)> = vec![
        (Settings { brokers: None, ..minimal() }, "--brokers"),
        (Settings { topics: None, ..minimal() }, "--topic"),
        (Settings { topics: Some(vec!["a/b".into()]), ..minimal() }, "--topic"),
        (Settings { dest: Some("/tmp/x".into()), ..minimal() }, "--dest"),
        (
            Settings { format: Some(Format::Jsonl), compression: Some(Compression::Snappy), ..minimal() },
            "--compression",
        ),
        (Settings { roll_records: Some(0), ..minimal() }, "--roll-records"),
        (Settings { roll_age: Some("10ms".parse().unwrap()), ..minimal() }, "--roll-age"),
        (Settings { kafka_flags: Some(vec!["novalue".into()]), ..minimal() }, "--kafka"),
        (Settings { kafka_flags: Some(vec!["enable.auto.commit=true".into()]), ..minimal() }, "--kafka"),
        (Settings { kafka_flags: Some(vec!["isolation.level=read_uncommitted".into()]), ..minimal() }, "--kafka"),
        (Settings { upload_part_size: Some(ByteSize(1 << 20)), ..minimal() }, "--upload-part-size"),
        (Settings { metrics_addr: Some("localhost".into()), ..minimal() }, "--metrics-addr"),
    ];
    for (s, name) in cases {
        let err = s.resolve(None).unwrap_err().to_string();
        assert!(err.contains(name), "expected {name} in: {err}");
    }
}

#[test]
fn regex_subscriptions_are_anchored() {
    let c = Settings { topics: None, topic_regex: Some("orders-.*".into()), ..minimal() }.resolve(None).unwrap();
    assert_eq!(c.source.subscription, vec!["^orders-.*".to_string()]);
}

#[test]
fn group_offsets_are_kept_for_whole_names_matching_the_regex() {
    assert!(minimal().resolve(None).unwrap().source.group_offsets.is_none(), "off by default");
    let c = Settings { archive_group_offsets: Some("billing|app-.*".into()), ..minimal() }.resolve(None).unwrap();
    let kept = c.source.group_offsets.unwrap();
    assert_eq!(kept.interval, Duration::from_secs(60));
    for (group, matches) in [("billing", true), ("app-1", true), ("billing-2", false), ("my-app-1", false)] {
        assert_eq!(kept.groups.is_match(group), matches, "{group}");
    }
    for (regex, interval, says) in
        [("app-(", "1m", "--archive-group-offsets"), ("app", "10ms", "--group-offsets-interval")]
    {
        let s = Settings {
            archive_group_offsets: Some(regex.into()),
            group_offsets_interval: Some(interval.parse().unwrap()),
            ..minimal()
        };
        let err = s.resolve(None).unwrap_err().to_string();
        assert!(err.contains(says), "{regex} {interval}: {err}");
    }
}

#[test]
fn time_buckets_are_off_by_default_and_need_claims() {
    let c = minimal().resolve(None).unwrap();
    assert_eq!((orders(&c).bucketing, orders(&c).roll.schedule), (None, None));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("archiver.toml");
    std::fs::write(&file, "time-buckets = \"hour\"\ntime-source = \"arrival\"\nroll-schedule = \"1h\"\n").unwrap();
    let c = minimal().resolve(Some(&file)).unwrap();
    assert_eq!(orders(&c).bucketing, Some(Bucketing { width: BucketWidth::Hour, source: TimeSource::Arrival }));
    assert_eq!(orders(&c).roll.schedule, Some(Duration::from_secs(3600)));
    let without_claims = Settings { claims: Some(false), ..minimal() }.resolve(Some(&file)).unwrap_err();
    assert!(without_claims.to_string().contains("need claims"), "{without_claims}");
    let too_often = Settings { roll_schedule: Some("10ms".parse().unwrap()), ..minimal() }.resolve(None).unwrap_err();
    assert!(too_often.to_string().contains("--roll-schedule"), "{too_often}");
}

#[test]
fn iceberg_tables_need_a_sqlite_catalog_parquet_and_claims_and_may_be_per_topic() {
    let c = minimal().resolve(None).unwrap();
    assert!(!orders(&c).table && c.table.is_none(), "off by default");
    let on = |s: Settings| Settings { table: Some(crate::config::TableFormat::Iceberg), ..s };
    let missing = on(minimal()).resolve(None).unwrap_err();
    assert!(missing.to_string().contains("--iceberg-catalog"), "{missing}");
    let with = |url: &str| Settings { iceberg_catalog: Some(url.into()), ..on(minimal()) };
    let c = with("sqlite:///var/ksa/catalog.db").resolve(None).unwrap();
    let table = c.table.unwrap();
    assert_eq!(table.catalog.location, crate::config::CatalogLocation::Sqlite("/var/ksa/catalog.db".into()));
    assert_eq!((table.catalog.namespace.as_str(), table.catalog.name.as_str()), ("kafka", "default"));
    assert_eq!(table.cadence.interval, Duration::from_secs(60));
    for (settings, why) in [
        (with("sqlite://relative.db"), "absolute"),
        (with("thrift://catalog:9083"), "not supported yet"),
        (with("https://user:pw@catalog"), "--iceberg-token"),
        (Settings { iceberg_token: Some("t".into()), ..with("sqlite:///c.db") }, "REST catalog's setting"),
        (Settings { format: Some(Format::Jsonl), ..with("sqlite:///c.db") }, "Parquet"),
        (Settings { claims: Some(false), ..with("sqlite:///c.db") }, "claims"),
        (Settings { iceberg_namespace: Some("a.b".into()), ..with("sqlite:///c.db") }, "letters"),
    ] {
        let error = settings.resolve(None).unwrap_err().to_string();
        assert!(error.contains(why), "{error}");
    }
    // Per topic: only the topics whose table says so.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("archiver.toml");
    std::fs::write(&file, "iceberg-catalog = \"sqlite:///c.db\"\n[topic.\"orders\"]\ntable = \"iceberg\"\n").unwrap();
    let c = minimal().resolve(Some(&file)).unwrap();
    assert!(orders(&c).table && c.table.is_some());
}

#[test]
fn a_postgresql_catalog_takes_its_password_apart_shown_masked_and_a_ca_for_tls() {
    let pg = |url: &str, s: Settings| Settings {
        table: Some(crate::config::TableFormat::Iceberg),
        iceberg_catalog: Some(url.into()),
        ..s
    };
    let settings = pg(
        "postgresql://archiver@db.example.com:5433/lake",
        Settings { iceberg_catalog_password: Some("pa55".into()), ..minimal() },
    );
    let crate::config::CatalogLocation::Postgres(options) =
        settings.clone().resolve(None).unwrap().table.unwrap().catalog.location
    else {
        panic!("a PostgreSQL catalog")
    };
    assert_eq!(options.config.get_password(), Some(&b"pa55"[..]));
    assert_eq!((options.config.get_user(), options.config.get_dbname()), (Some("archiver"), Some("lake")));
    assert_eq!(options.config.get_connect_timeout(), Some(&Duration::from_secs(10)), "a default deadline");
    assert_eq!(options.url, "postgresql://archiver@db.example.com:5433/lake", "what messages show");
    assert!(options.config.get_options().is_some_and(|o| o.contains("statement_timeout=")), "server-side timeouts");
    let tls = |url: &str, ca: Option<std::path::PathBuf>| {
        let settings = Settings { iceberg_ca: ca, ..pg(url, minimal()) };
        match settings.resolve(None).unwrap().table.unwrap().catalog.location {
            crate::config::CatalogLocation::Postgres(o) => o.config.get_ssl_mode(),
            other => panic!("{other:?}"),
        }
    };
    use tokio_postgres::config::SslMode;
    assert_eq!(tls("postgresql://archiver@db/lake", None), SslMode::Prefer, "libpq's default");
    assert_eq!(tls("postgresql://archiver@db/lake", Some(ca())), SslMode::Require, "a CA means TLS");
    let shown = settings.effective(None).unwrap().to_toml();
    assert!(!shown.contains("pa55") && shown.contains("iceberg-catalog-password = \"****\""), "{shown}");
    for (settings, why) in [
        (pg("postgresql://archiver:pa55@db/lake", minimal()), "--iceberg-catalog-password"),
        (pg("postgres://db/lake", minimal()), "name the user"),
        (pg("postgresql://archiver@db/lake?sslmode=maybe", minimal()), "sslmode=require"),
        (pg("postgresql://archiver@db/lake", Settings { iceberg_token: Some("t".into()), ..minimal() }), "REST"),
        (
            pg(
                "postgresql://archiver@db/lake?sslmode=disable",
                Settings { iceberg_ca: Some("ca.pem".into()), ..minimal() },
            ),
            "sslmode",
        ),
        (pg("sqlite:///c.db", Settings { iceberg_catalog_password: Some("p".into()), ..minimal() }), "no password"),
        (pg("https://c", Settings { iceberg_catalog_password: Some("p".into()), ..minimal() }), "PostgreSQL"),
    ] {
        let error = settings.resolve(None).unwrap_err().to_string();
        assert!(error.contains(why) && !error.contains("pa55"), "{why}: {error}");
    }
}

#[test]
fn a_rest_catalog_takes_a_token_or_client_credentials_shown_masked() {
    use crate::table::catalog::rest::{RestAuth, RestOptions};
    let rest = |s: Settings| Settings {
        table: Some(crate::config::TableFormat::Iceberg),
        iceberg_catalog: Some("https://catalog.example.com/v1/".into()),
        ..s
    };
    let c = rest(minimal()).resolve(None).unwrap();
    let plain =
        RestOptions { url: "https://catalog.example.com".into(), warehouse: None, auth: RestAuth::None, ca: None };
    assert_eq!(c.table.unwrap().catalog.location, crate::config::CatalogLocation::Rest(plain), "the URL before /v1");
    let oauth2 = rest(Settings { iceberg_credential: Some("id:s3cr3t".into()), ..minimal() });
    let crate::config::CatalogLocation::Rest(options) =
        oauth2.clone().resolve(None).unwrap().table.unwrap().catalog.location
    else {
        panic!("a REST catalog")
    };
    let wanted =
        RestAuth::ClientCredentials { client_id: "id".into(), client_secret: "s3cr3t".into(), scope: "catalog".into() };
    assert_eq!(options.auth, wanted);
    let shown = oauth2.effective(None).unwrap().to_toml();
    assert!(!shown.contains("s3cr3t") && shown.contains("iceberg-credential = \"****\""), "{shown}");
    for (settings, why) in [
        (Settings { iceberg_credential: Some("no-colon".into()), ..minimal() }, "CLIENT_ID:CLIENT_SECRET"),
        (Settings { iceberg_credential: Some("a:b".into()), iceberg_token: Some("t".into()), ..minimal() }, "not both"),
        (
            Settings { iceberg_signing_name: Some("glue".into()), iceberg_token: Some("t".into()), ..minimal() },
            "not both",
        ),
        (Settings { iceberg_signing_name: Some("Glue API".into()), ..minimal() }, "an AWS service name"),
        (Settings { iceberg_signing_region: Some("eu-west-1".into()), ..minimal() }, "--iceberg-signing-name"),
    ] {
        let error = rest(settings).resolve(None).unwrap_err().to_string();
        assert!(error.contains(why), "{error}");
    }
    let signed = Settings {
        iceberg_signing_name: Some("glue".into()),
        iceberg_signing_region: Some("eu-west-1".into()),
        ..minimal()
    };
    let crate::config::CatalogLocation::Rest(options) =
        rest(signed).resolve(None).unwrap().table.unwrap().catalog.location
    else {
        panic!("a REST catalog")
    };
    assert_eq!(options.auth, RestAuth::SigV4 { signing_name: "glue".into(), region: Some("eu-west-1".into()) });
    let s3tables = Settings { iceberg_signing_name: Some("s3tables".into()), ..minimal() };
    let crate::config::CatalogLocation::Rest(options) =
        rest(s3tables).resolve(None).unwrap().table.unwrap().catalog.location
    else {
        panic!("a REST catalog")
    };
    assert_eq!(options.auth, RestAuth::SigV4 { signing_name: "s3tables".into(), region: None });
    let plain = Settings { iceberg_signing_name: Some("glue".into()), ..rest(minimal()) };
    let plain = Settings { iceberg_catalog: Some("http://glue.example.com".into()), ..plain };
    assert!(plain.resolve(None).unwrap_err().to_string().contains("https://"));
    let sql = Settings { iceberg_signing_name: Some("glue".into()), ..minimal() };
    let error = Settings { iceberg_catalog: Some("sqlite:///c.db".into()), ..rest(sql) }.resolve(None).unwrap_err();
    assert!(error.to_string().contains("REST catalog's setting"), "{error}");
}

#[test]
fn typed_values_need_a_schema_and_parquet() {
    assert!(matches!(orders(&minimal().resolve(None).unwrap()).values, ValueFormat::Raw));
    let json = |schema: Option<PathBuf>, format| Settings {
        value_format: Some(ValueFormatName::Json),
        value_schema: schema,
        format,
        ..minimal()
    };
    let err = json(None, None).resolve(None).unwrap_err().to_string();
    assert!(err.contains("--value-schema is required"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let avsc = dir.path().join("v.avsc");
    std::fs::write(&avsc, r#"{"type":"record","name":"V","fields":[{"name":"a","type":"long"}]}"#).unwrap();
    let c = json(Some(avsc.clone()), None).resolve(None).unwrap();
    let typed = orders(&c).values.json().expect("typed values");
    assert_eq!(typed.declared.as_ref().unwrap().fields()[0].name, "a");
    let inferred = json(Some("infer".into()), None).resolve(None).unwrap();
    assert_eq!(orders(&inferred).values.json().unwrap().declared, None);
    assert!(!typed.keep_raw);
    assert!(json(Some(avsc.clone()), Some(Format::Jsonl)).resolve(None).is_ok(), "JSON lines embed typed values");
    std::fs::write(&avsc, r#"{"type":"record","name":"V","fields":[{"name":"a","type":["int","string"]}]}"#).unwrap();
    let err = json(Some(avsc), None).resolve(None).unwrap_err().to_string();
    assert!(err.contains("schema.V.a") && err.contains("unions"), "{err}");
    let stray = Settings { value_schema: Some("x.avsc".into()), ..minimal() };
    assert!(stray.resolve(None).unwrap_err().to_string().contains("only with --value-format json"));
}

/// A CA certificate (PEM) for an HTTPS registry.
fn ca() -> std::path::PathBuf {
    concat!(env!("CARGO_MANIFEST_DIR"), "/src/config/testdata/ca.pem").into()
}

#[test]
fn typed_keys_need_a_registry_and_parquet() {
    let url = |s: Settings| Settings { schema_registry_url: Some("http://registry:8081".into()), ..s };
    let keys = |format, s: Settings| Settings { key_format: Some(format), ..s };
    let c = url(keys(KeyFormatName::Avro, minimal())).resolve(None).unwrap();
    assert!(matches!(orders(&c).keys, ValueFormat::Avro(ref a) if a.keep_raw), "every key keeps its bytes");
    assert!(matches!(orders(&c).values, ValueFormat::Raw), "values stay raw");
    let registry = url(keys(KeyFormatName::Registry, minimal())).resolve(None).unwrap();
    assert!(matches!(orders(&registry).keys, ValueFormat::Registry(_)));
    assert!(matches!(orders(&minimal().resolve(None).unwrap()).keys, ValueFormat::Raw), "raw by default");
    let missing = keys(KeyFormatName::Protobuf, minimal()).resolve(None).unwrap_err().to_string();
    assert!(missing.contains("--schema-registry-url is required"), "{missing}");
    let jsonl = url(keys(KeyFormatName::JsonSchema, Settings { format: Some(Format::Jsonl), ..minimal() }));
    let jsonl = jsonl.resolve(None).unwrap_err().to_string();
    assert!(jsonl.contains("JSON lines keep keys as they are"), "{jsonl}");
    let toml: Settings = toml::from_str("key-format = \"json-schema\"").unwrap();
    assert_eq!(toml.key_format, Some(KeyFormatName::JsonSchema));
}

#[test]
fn avro_and_protobuf_values_need_a_registry_and_parquet_and_no_value_schema() {
    let avro = |s: Settings| Settings { value_format: Some(ValueFormatName::Avro), ..s };
    let url = |s: Settings| Settings { schema_registry_url: Some("http://registry:8081/".into()), ..s };
    let c = url(avro(minimal())).resolve(None).unwrap();
    assert!(matches!(orders(&c).values, ValueFormat::Avro(_)));
    let protobuf = Settings { value_format: Some(ValueFormatName::Protobuf), ..url(minimal()) };
    assert!(matches!(orders(&protobuf.resolve(None).unwrap()).values, ValueFormat::Protobuf(_)));
    let protobuf = Settings { value_format: Some(ValueFormatName::Protobuf), ..minimal() };
    assert!(protobuf.resolve(None).unwrap_err().to_string().contains("--schema-registry-url is required"));
    let registry = c.pipeline.registry.expect("the registry");
    assert_eq!(registry.options.url, "http://registry:8081", "no trailing slash");
    let cases: Vec<(Settings, &str)> = vec![
        (avro(minimal()), "--schema-registry-url is required"),
        (url(avro(Settings { value_schema: Some("v.avsc".into()), ..minimal() })), "leave it out"),
        (url(avro(Settings { format: Some(Format::Jsonl), ..minimal() })), "JSON lines do not embed Schema Registry"),
        (Settings { schema_registry_ca: Some(ca()), ..url(minimal()) }, "a CA is for an https:// Schema Registry"),
        (
            Settings {
                schema_registry_url: Some("https://r".into()),
                schema_registry_ca: Some("Cargo.toml".into()),
                ..minimal()
            },
            "no PEM certificate in it",
        ),
        (Settings { schema_registry_url: Some("registry:8081".into()), ..minimal() }, "http(s)://host:port"),
        (
            Settings { schema_registry_url: Some("http://u:p@registry:8081".into()), ..minimal() },
            "--schema-registry-password",
        ),
        (url(Settings { schema_registry_username: Some("u".into()), ..minimal() }), "needs both"),
        (Settings { schema_registry_token: Some("t".into()), ..minimal() }, "credentials need its URL"),
        (
            url(Settings {
                schema_registry_username: Some("u".into()),
                schema_registry_password: Some("p".into()),
                schema_registry_token: Some("t".into()),
                ..minimal()
            }),
            "not both",
        ),
    ];
    for (s, expected) in cases {
        let err = s.resolve(None).unwrap_err().to_string();
        assert!(err.contains(expected), "expected {expected:?} in: {err}");
    }
    let https = Settings { schema_registry_url: Some("https://r:8081".into()), ..minimal() };
    assert_eq!(https.clone().resolve(None).unwrap().pipeline.registry.unwrap().options.ca, None, "the system's roots");
    let with_ca = Settings { schema_registry_ca: Some(ca()), ..https }.resolve(None).unwrap();
    assert_eq!(with_ca.pipeline.registry.unwrap().options.ca.map(|c| c.len()), Some(1));
    let bearer = url(Settings { schema_registry_token: Some("t0k".into()), ..minimal() }).resolve(None).unwrap();
    assert_eq!(bearer.pipeline.registry.unwrap().options.auth, crate::registry::RegistryAuth::Bearer("t0k".into()));
    let shown =
        url(Settings { schema_registry_token: Some("t0k".into()), ..minimal() }).effective(None).unwrap().to_toml();
    assert!(!shown.contains("t0k") && shown.contains("schema-registry-token = \"****\""), "{shown}");
}

#[test]
fn gcs_and_azure_settings_apply_to_their_destinations_with_their_secrets_masked() {
    use crate::store::cloud::AzureCredentials;
    let azure = Settings {
        dest: Some("az://archive/pre".into()),
        azure_connection_string: Some("DefaultEndpointsProtocol=https;AccountName=arch;AccountKey=c2VjcmV0".into()),
        azure_endpoint: Some("http://127.0.0.1:10000/arch".into()),
        ..minimal()
    };
    let c = azure.clone().resolve(None).unwrap();
    let options = &c.store.settings.azure;
    assert_eq!(options.account.as_deref(), Some("arch"));
    assert_eq!(options.endpoint.as_deref(), Some("http://127.0.0.1:10000/arch"), "the flag wins over the string");
    assert_eq!(options.credentials, AzureCredentials::AccessKey("c2VjcmV0".into()));
    let shown = azure.clone().effective(None).unwrap().to_toml();
    assert!(!shown.contains("c2VjcmV0") && shown.contains("azure-connection-string = \"****\""), "{shown}");
    let both = Settings { azure_access_key: Some("k".into()), azure_sas_token: Some("sv=1".into()), ..azure };
    assert!(both.resolve(None).unwrap_err().to_string().contains("--azure-sas-token"));

    let gcs = Settings { dest: Some("gs://bucket/pre".into()), gcs_anonymous: Some(true), ..minimal() };
    assert!(gcs.clone().resolve(None).unwrap().store.settings.gcs.anonymous);
    let missing = Settings { gcs_credentials: Some("/no/such/key.json".into()), ..gcs };
    assert!(missing.resolve(None).unwrap_err().to_string().contains("--gcs-credentials"));

    for (stray, name, scheme) in [
        (Settings { gcs_endpoint: Some("http://x".into()), ..minimal() }, "--gcs-endpoint", "gs://"),
        (
            Settings { azure_account: Some("a".into()), dest: Some("gs://b-1/p".into()), ..minimal() },
            "--azure-account",
            "az://",
        ),
    ] {
        let e = stray.resolve(None).unwrap_err().to_string();
        assert!(e.contains(name) && e.contains(&format!("applies to {scheme}")), "{e}");
    }
}
