#!/bin/sh
# MariaDB of the cdcbox mariadb image. Until the data volume holds the marker of a
# finished set-up, it makes the system tables (once), then, on a server that listens on
# no network, the user $MARIADB_USER with the password in $MARIADB_PASSWORD_FILE and each
# database of $MARIADB_DATABASES (space-separated), all granted to that user; a set-up cut
# short runs again whole. Only root and this image's `mysql` account log in through the
# socket, without a password. Then it runs the command (`mariadbd ...`) in its place.
set -eu
: "${MARIADB_PASSWORD_FILE:?the file holding the user's password}"
: "${MARIADB_USER:?the user the services connect as}"
: "${MARIADB_DATABASES:?the databases to create}"
datadir=/var/lib/mysql
socket=/run/mysqld/mysqld.sock
marker="$datadir/.cdcbox-initialised"
if [ ! -e "$marker" ]; then
    if [ ! -d "$datadir/mysql" ]; then
        mariadb-install-db --datadir="$datadir" --user=mysql \
            --auth-root-authentication-method=socket --auth-root-socket-user=mysql \
            --skip-test-db >/dev/null
    fi
    mariadbd --datadir="$datadir" --socket="$socket" --skip-networking &
    pid=$!
    tries=0
    until mariadb-admin --socket="$socket" ping >/dev/null 2>&1; do
        tries=$((tries + 1))
        [ "$tries" -lt 60 ] || { echo "mariadb-entrypoint: no answer" >&2; exit 1; }
        sleep 1
    done
    password=$(cat "$MARIADB_PASSWORD_FILE")
    {
        echo "CREATE USER IF NOT EXISTS '$MARIADB_USER'@'%' IDENTIFIED BY '$password';"
        echo "ALTER USER '$MARIADB_USER'@'%' IDENTIFIED BY '$password';"
        for database in $MARIADB_DATABASES; do
            echo "CREATE DATABASE IF NOT EXISTS \`$database\`;"
            echo "GRANT ALL ON \`$database\`.* TO '$MARIADB_USER'@'%';"
        done
    } | mariadb --socket="$socket"
    mariadb-admin --socket="$socket" shutdown
    wait "$pid"
    touch "$marker"
    echo "mariadb-entrypoint: initialised $MARIADB_DATABASES"
fi
exec "$@"
