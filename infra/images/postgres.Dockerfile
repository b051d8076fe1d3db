# PostgreSQL 15 from Debian's archive, with the cdcbox entrypoint: the settings, the
# databases and the password the compose file gives it. Build context: infra/.
FROM debian:bookworm-slim
ARG POSTGRES_MAJOR=15
# uid 999: the owner the compose file's `secrets` service gives PostgreSQL's secret. No
# cluster is made by the package: the entrypoint makes one in the data volume.
RUN groupadd --system --gid 999 postgres \
    && useradd --system --uid 999 --gid 999 --home-dir /var/lib/postgresql \
       --shell /bin/sh postgres \
    && mkdir -p /etc/postgresql-common \
    && echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       "postgresql-${POSTGRES_MAJOR}" \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql \
    && chmod 0700 /var/lib/postgresql/data
ENV PATH=/usr/lib/postgresql/${POSTGRES_MAJOR}/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
COPY images/postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
RUN chmod 0755 /usr/local/bin/postgres-entrypoint.sh
USER postgres
ENTRYPOINT ["postgres-entrypoint.sh"]
CMD ["postgres"]
