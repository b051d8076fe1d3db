#!/bin/sh
# PostgreSQL of the cdcbox postgres image. On the first start (an empty $PGDATA) it makes
# the cluster: superuser `postgres` with the password in $POSTGRES_PASSWORD_FILE,
# SCRAM for every TCP connection (replication included), the database $POSTGRES_DB, then
# each /docker-entrypoint-initdb.d/*.sql in name order. Then it runs the command
# (`postgres -c wal_level=logical ...`) in its place.
set -eu
: "${POSTGRES_PASSWORD_FILE:?the file holding the superuser password}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    initdb --username=postgres --pwfile="$POSTGRES_PASSWORD_FILE" --auth-local=peer \
        --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 -D "$PGDATA" >/dev/null
    # Other containers connect (Debezium's replication connection among them): every
    # address is listened on, and allowed with a password.
    echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
    cat >> "$PGDATA/pg_hba.conf" <<'HBA'
host all all all scram-sha-256
host replication all all scram-sha-256
HBA
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    if [ "${POSTGRES_DB:-postgres}" != postgres ]; then
        createdb "$POSTGRES_DB"
    fi
    for script in /docker-entrypoint-initdb.d/*.sql; do
        [ -e "$script" ] || continue
        echo "postgres-entrypoint: running $script"
        psql -v ON_ERROR_STOP=1 -q -d postgres -f "$script"
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec "$@"
