# Pinned versions of the test services (sourced by install.sh and start.sh).
KAFKA_VERSION="4.1.1"
LOG4J_VERSION="2.24.3"
# Apicurio Registry (its Confluent-compatible API is the tests' Schema Registry): the prebuilt Quarkus
# app io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all from Maven Central; needs Java 21+.
APICURIO_VERSION="3.3.3"
