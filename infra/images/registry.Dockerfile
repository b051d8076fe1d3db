# Apicurio Registry (the schema registry, its Confluent-compatible API at
# /apis/ccompat/v7): the Quarkus app Maven resolves, the native stack's exact version.
# It needs Java 21+, which Debian bookworm does not package: the runtime takes OpenJDK 21
# from Debian trixie's archive, pinned so nothing else comes from there unasked. Build
# context: infra/. No registry but Debian's archive and Maven's default repository.
ARG BUILD_BASE=debian:bookworm-slim
FROM ${BUILD_BASE} AS app
ARG APICURIO_VERSION
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       maven openjdk-17-jdk-headless ca-certificates-java \
    && rm -rf /var/lib/apt/lists/*
RUN set -eu; \
    mvn -B -q -Dstyle.color=never dependency:copy \
        -Dartifact="io.apicurio:apicurio-registry-app:${APICURIO_VERSION}:tar.gz:all" \
        -DoutputDirectory=/build; \
    mkdir -p /opt/apicurio; \
    tar -xzf /build/apicurio-registry-app-*.tar.gz -C /opt/apicurio; \
    test -f /opt/apicurio/quarkus-run.jar; \
    rm -rf /build /root/.m2

FROM debian:bookworm-slim
# The mirror the base already uses, for trixie too (its release key is in bookworm's
# keyring); priority 100: only what is asked for with -t trixie comes from there.
RUN set -eu; \
    mirror="$(grep -ohE 'https?://[^ ]+/debian/?' /etc/apt/sources.list \
        /etc/apt/sources.list.d/* 2>/dev/null | head -n 1)"; \
    echo "deb ${mirror} trixie main" > /etc/apt/sources.list.d/trixie.list; \
    printf 'Package: *\nPin: release n=trixie\nPin-Priority: 100\n' \
        > /etc/apt/preferences.d/trixie; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends curl; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        -t trixie openjdk-21-jre-headless; \
    rm -rf /var/lib/apt/lists/*; \
    groupadd --gid 1001 registry; \
    useradd --uid 1001 --gid 1001 --home-dir /var/lib/registry --shell /usr/sbin/nologin \
        registry; \
    mkdir -p /var/lib/registry; \
    chown registry:registry /var/lib/registry
COPY --from=app /opt/apicurio /opt/apicurio
USER registry
WORKDIR /var/lib/registry
# Schemas and their ids in an H2 file on the `registry-data` volume: they outlive the
# container as the records that carry their ids outlive the broker's.
ENV APICURIO_DATASOURCE_URL=jdbc:h2:file:/var/lib/registry/registry \
    APICURIO_DATASOURCE_JDBC_INITIAL_SIZE=2 \
    APICURIO_DATASOURCE_JDBC_MIN_SIZE=2 \
    APICURIO_DATASOURCE_JDBC_MAX_SIZE=10 \
    JAVA_TOOL_OPTIONS="-Xms64m -Xmx384m"
ENTRYPOINT ["java", "-jar", "/opt/apicurio/quarkus-run.jar"]
