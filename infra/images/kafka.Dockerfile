# Kafka (the broker and the Connect worker) with Debezium's PostgreSQL connector and the
# JMX exporter agent: the jars infra/pom.xml resolves, the native stack's exact jars and
# versions, on Debian's OpenJDK 17. Build context: infra/. No registry but Debian's
# archive and Maven's default repository is used.
ARG BUILD_BASE=debian:bookworm-slim
FROM ${BUILD_BASE} AS jars
ARG KAFKA_VERSION
ARG DEBEZIUM_VERSION
ARG LOG4J_VERSION
ARG SLF4J_VERSION
ARG JMX_EXPORTER_VERSION
ARG CONNECT_BASIC_AUTH_VERSION
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       maven openjdk-17-jdk-headless ca-certificates-java \
    && rm -rf /var/lib/apt/lists/*
COPY pom.xml /build/pom.xml
# The same three copies cdcbox.stack.jars makes for the native stack.
RUN set -eu; \
    mvn() { command mvn -B -q -Dstyle.color=never -f /build/pom.xml \
        -Dkafka.version="$KAFKA_VERSION" -Ddebezium.version="$DEBEZIUM_VERSION" \
        -Dlog4j.version="$LOG4J_VERSION" -Dslf4j.version="$SLF4J_VERSION" \
        -Djmx.exporter.version="$JMX_EXPORTER_VERSION" \
        -Dconnect.basic.auth.version="$CONNECT_BASIC_AUTH_VERSION" "$@"; }; \
    mvn -P kafka dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory=/opt/kafka/libs; \
    mvn -P debezium dependency:copy-dependencies -DincludeScope=runtime \
        -DexcludeGroupIds=org.apache.kafka,org.slf4j \
        -DoutputDirectory=/opt/plugins/debezium-connector-postgres; \
    mvn -P metrics dependency:copy-dependencies -DincludeScope=runtime \
        -DexcludeTransitive=true -DoutputDirectory=/opt/jmx-exporter; \
    rm -rf /root/.m2

FROM debian:bookworm-slim
# uid 1000: the owner the compose file's `secrets` service gives Connect's secrets.
RUN groupadd --gid 1000 kafka \
    && useradd --uid 1000 --gid 1000 --home-dir /var/lib/kafka --shell /usr/sbin/nologin kafka \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       openjdk-17-jre-headless curl \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/kafka/data \
    && chown -R kafka:kafka /var/lib/kafka
COPY --from=jars /opt/kafka/libs /opt/kafka/libs
COPY --from=jars /opt/plugins /opt/plugins
COPY --from=jars /opt/jmx-exporter /opt/jmx-exporter
COPY log4j2.properties /opt/cdcbox/log4j2.properties
COPY observability/jmx-exporter.yml /opt/cdcbox/jmx-exporter.yml
COPY connect-distributed.properties /opt/cdcbox/connect-distributed.properties
COPY images/kafka-entrypoint.sh images/connect-entrypoint.sh images/properties-from-env.sh \
     /opt/cdcbox/
RUN chmod 0755 /opt/cdcbox/*.sh
USER kafka
# The broker by default; the compose file's `connect` service runs connect-entrypoint.sh.
ENTRYPOINT ["/opt/cdcbox/kafka-entrypoint.sh"]
