# The cdcbox services (`cdc-ctl consume`, `cdc-ctl relay run`, the one-shot migrate/apply)
# and the example services of consumer/, as a non-root image: cdcbox installed from its
# wheel, on Debian's Python 3.11. Build context: the repository's root.
ARG BUILD_BASE=debian:bookworm-slim
FROM ${BUILD_BASE} AS wheel
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/*
# pip trusts the system's bundle: a CA the build base added (a TLS-intercepting
# network's) is in it.
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
COPY pyproject.toml README.md LICENSE /src/
COPY cdcbox /src/cdcbox
COPY infra /src/infra
COPY schemas /src/schemas
COPY connectors /src/connectors
RUN python3 -m venv /opt/cdcbox \
    && /opt/cdcbox/bin/pip wheel --no-deps --wheel-dir /wheels /src \
    && /opt/cdcbox/bin/pip install "$(ls /wheels/cdcbox-*.whl)[binary,cli,mariadb]"

FROM debian:bookworm-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 10001 --create-home --shell /usr/sbin/nologin cdcbox
COPY --from=wheel /opt/cdcbox /opt/cdcbox
ENV PATH=/opt/cdcbox/bin:$PATH
WORKDIR /app
# The example services (consumer/) are found from the working directory.
COPY consumer /app/consumer
USER cdcbox
ENTRYPOINT ["cdc-ctl"]
CMD ["--help"]
