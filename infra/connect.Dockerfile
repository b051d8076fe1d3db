# Kafka Connect with the Debezium PostgreSQL connector, built from the same pom the native
# stack resolves, so both run byte-identical plugin jars.
ARG KAFKA_VERSION
FROM maven:3.9-eclipse-temurin-17 AS plugins
ARG KAFKA_VERSION
ARG DEBEZIUM_VERSION
ARG LOG4J_VERSION
ARG SLF4J_VERSION
ARG JMX_EXPORTER_VERSION
COPY pom.xml /build/pom.xml
RUN mvn -B -q -f /build/pom.xml -P debezium \
      -Dkafka.version=${KAFKA_VERSION} -Ddebezium.version=${DEBEZIUM_VERSION} \
      -Dlog4j.version=${LOG4J_VERSION} -Dslf4j.version=${SLF4J_VERSION} \
      dependency:copy-dependencies -DincludeScope=runtime \
      -DexcludeGroupIds=org.apache.kafka,org.slf4j \
      -DoutputDirectory=/plugins/debezium-connector-postgres
RUN mvn -B -q -f /build/pom.xml -P metrics -Djmx.exporter.version=${JMX_EXPORTER_VERSION} \
      dependency:copy-dependencies -DincludeScope=runtime -DexcludeTransitive=true \
      -DoutputDirectory=/jmx-exporter

FROM apache/kafka:${KAFKA_VERSION}
# curl for the compose healthcheck: the apache/kafka image has none (its Dockerfile
# removes wget after use), so it is installed here, where the healthcheck can rely on it.
USER root
RUN apk add --no-cache curl
USER appuser
COPY --from=plugins /plugins /opt/plugins
COPY --from=plugins /jmx-exporter /opt/jmx-exporter
COPY observability/jmx-exporter.yml /opt/cdcbox/jmx-exporter.yml
COPY connect-distributed.properties /opt/cdcbox/connect-distributed.properties
# Configured by environment (CONNECT_<PROPERTY>=...) over those defaults: see the script.
COPY --chmod=0755 connect-entrypoint.sh /opt/cdcbox/connect-entrypoint.sh
ENTRYPOINT ["/opt/cdcbox/connect-entrypoint.sh"]
