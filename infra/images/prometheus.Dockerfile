# Prometheus as Debian 12 ships it (the native stack runs the same package), for the
# compose file's `observability` profile. Build context: infra/.
FROM debian:bookworm-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus && chown prometheus:prometheus /prometheus
USER prometheus
ENTRYPOINT ["/usr/bin/prometheus"]
