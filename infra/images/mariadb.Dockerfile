# MariaDB from Debian's archive (bookworm: 10.11), with the cdcbox entrypoint: the
# user, the password and the databases the compose file gives it. The fleet's points
# service keeps its inbox and table here (consumer/fleet.py). Build context: infra/.
ARG BUILD_BASE=debian:bookworm-slim
FROM ${BUILD_BASE}
# uid 999 is postgres's in its image; MariaDB's `mysql` user is 1002, made before the
# package so the package keeps it, and the owner the `secrets` service gives its secret.
RUN groupadd --system --gid 1002 mysql \
    && useradd --system --uid 1002 --gid 1002 --home-dir /var/lib/mysql \
       --shell /usr/sbin/nologin mysql \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       mariadb-server \
    && rm -rf /var/lib/apt/lists/* /var/lib/mysql \
    && mkdir -p /var/lib/mysql /run/mysqld \
    && chown mysql:mysql /var/lib/mysql /run/mysqld
COPY images/mariadb-entrypoint.sh /usr/local/bin/mariadb-entrypoint.sh
RUN chmod 0755 /usr/local/bin/mariadb-entrypoint.sh
USER mysql
ENTRYPOINT ["mariadb-entrypoint.sh"]
CMD ["mariadbd", "--bind-address=0.0.0.0", "--skip-name-resolve", \
     "--character-set-server=utf8mb4", "--collation-server=utf8mb4_bin"]
