# Pinned versions of the test services (sourced by install.sh and start.sh).
KAFKA_VERSION="4.1.1"
LOG4J_VERSION="2.24.3"
