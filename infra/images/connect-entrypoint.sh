#!/bin/sh
# The Connect worker of the cdcbox kafka image, configured by environment: the baked
# defaults (connect-distributed.properties, those of the compose stack) with each
# property overridden by a variable CONNECT_<NAME> (properties-from-env.sh):
#   CONNECT_BOOTSTRAP_SERVERS=broker1:9092,broker2:9092
#   CONNECT_CONFIG_STORAGE_REPLICATION_FACTOR=3   (and the offset and status topics')
#   CONNECT_SECURITY_PROTOCOL=SASL_SSL  CONNECT_SASL_MECHANISM=SCRAM-SHA-512 ...
#   CONNECT_PRODUCER_MAX_REQUEST_SIZE=2097152     (the payload limit: cdcbox.limits)
# CONNECT_RENDER_ONLY=1 prints the rendered properties instead of starting the worker
# (tests/unit/test_compose_file.py renders it). KAFKA_HEAP_OPTS and KAFKA_OPTS are the
# JVM's options, as in Kafka's own scripts.
set -eu
here="$(dirname "$0")"
defaults="${CONNECT_DEFAULTS:-/opt/cdcbox/connect-distributed.properties}"
rendered="${CONNECT_PROPERTIES:-/tmp/connect-distributed.properties}"
sh "$here/properties-from-env.sh" CONNECT_ "$defaults" "$rendered" \
    "DEFAULTS PROPERTIES RENDER_ONLY"
if [ "${CONNECT_RENDER_ONLY:-}" = 1 ]; then
    cat "$rendered"
    exit 0
fi
# shellcheck disable=SC2086 # the options are word lists, as in Kafka's scripts
exec java ${KAFKA_HEAP_OPTS:--Xmx1g} ${KAFKA_OPTS:-} -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile=/opt/cdcbox/log4j2.properties \
    -cp '/opt/kafka/libs/*' org.apache.kafka.connect.cli.ConnectDistributed "$rendered"
