# Pinned versions of the test services (sourced by install.sh and start.sh).
KAFKA_VERSION="4.1.1"
LOG4J_VERSION="2.24.3"
# Apicurio Registry (its Confluent-compatible API is the tests' Schema Registry): the prebuilt Quarkus
# app io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all from Maven Central; needs Java 21+.
APICURIO_VERSION="3.3.3"
# Apache Iceberg's REST catalog server (RESTCatalogServer, from iceberg-open-api's test fixtures: the
# server behind the iceberg-rest-fixture image), as jars from Maven Central, with the jars its pom does
# not list; started by our LoopbackRESTCatalogServer (iceberg-rest/) bound to 127.0.0.1. Java 17.
ICEBERG_VERSION="1.10.0"
ICEBERG_HADOOP_VERSION="3.4.1"
ICEBERG_JETTY_VERSION="11.0.24"
# Helm, for `helm lint` and `helm template` on deploy/helm/: built from the Go module proxy.
HELM_VERSION="v4.3.2"
# Google Cloud Storage's emulator (fsouza/fake-gcs-server, from the Go module proxy: it honours
# ifGenerationMatch=0 on media and resumable uploads) and Azure Blob Storage's (Azurite, the Azure SDK
# team's, from npm: it answers If-None-Match: * on Put Blob and Put Block List).
FAKE_GCS_VERSION="v1.56.1"
AZURITE_VERSION="3.37.0"
