#!/bin/sh
# One KRaft node (broker and controller) of the cdcbox kafka image, configured by
# environment: each property from a variable KAFKA_<NAME> (properties-from-env.sh), e.g.
#   KAFKA_NODE_ID=1  KAFKA_PROCESS_ROLES=broker,controller  KAFKA_LOG_DIRS=/var/lib/kafka/data
# The log directory is formatted on the first start (a standalone controller quorum, as
# the native stack's single node) with KAFKA_CLUSTER_ID, a fixed id by default.
# KAFKA_HEAP_OPTS and KAFKA_OPTS are the JVM's options, as in Kafka's own scripts.
set -euf  # no globbing: the classpath is "libs/*" for the JVM, not the shell
here="$(dirname "$0")"
rendered=/tmp/server.properties
sh "$here/properties-from-env.sh" KAFKA_ /dev/null "$rendered" "HEAP_OPTS OPTS CLUSTER_ID"
jvm="${KAFKA_HEAP_OPTS:--Xmx768m} ${KAFKA_OPTS:-} -XX:+UseG1GC -Djava.awt.headless=true"
jvm="$jvm -Dlog4j2.configurationFile=/opt/cdcbox/log4j2.properties -cp /opt/kafka/libs/*"
logs="$(sed -n 's/^log\.dirs=//p' "$rendered")"
if [ ! -f "${logs%%,*}/meta.properties" ]; then
    # shellcheck disable=SC2086 # word lists, as in Kafka's scripts
    java $jvm kafka.tools.StorageTool format --standalone -c "$rendered" \
        -t "${KAFKA_CLUSTER_ID:-Y2RjYm94LWNvbXBvc2UtMQ}"
fi
# shellcheck disable=SC2086
exec java $jvm kafka.Kafka "$rendered"
