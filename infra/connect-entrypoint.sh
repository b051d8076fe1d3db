#!/bin/sh
# The Connect worker of the cdcbox image, configured by environment: the baked defaults
# (connect-distributed.properties, those of the compose stack) with each property
# overridden by a variable CONNECT_<NAME> — the property's name upper-cased, its dots
# written "_" and its own underscores "__":
#   CONNECT_BOOTSTRAP_SERVERS=broker1:9092,broker2:9092
#   CONNECT_CONFIG_STORAGE_REPLICATION_FACTOR=3   (and the offset and status topics')
#   CONNECT_SECURITY_PROTOCOL=SASL_SSL  CONNECT_SASL_MECHANISM=SCRAM-SHA-512 ...
#   CONNECT_PRODUCER_MAX_REQUEST_SIZE=2097152     (the payload limit: cdcbox.limits)
# CONNECT_RENDER_ONLY=1 prints the rendered properties instead of starting the worker
# (tests/unit/test_compose_file.py renders it).
set -eu
defaults="${CONNECT_DEFAULTS:-/opt/cdcbox/connect-distributed.properties}"
rendered="${CONNECT_PROPERTIES:-/tmp/connect-distributed.properties}"
overrides="$(mktemp)"
env | awk -F= '
    /^CONNECT_[A-Z0-9_]+=/ {
        name = substr($1, 9)
        if (name == "DEFAULTS" || name == "PROPERTIES" || name == "RENDER_ONLY") next
        key = tolower(name)
        gsub(/__/, "\001", key); gsub(/_/, ".", key); gsub(/\001/, "_", key)
        print key "=" substr($0, length($1) + 2)
    }' > "$overrides"
# The defaults without the overridden keys, then the overrides.
awk -F= 'FILENAME == ARGV[1] { over[$1] = 1; next } /^[ \t]*(#|$)/ || !($1 in over)' \
    "$overrides" "$defaults" > "$rendered"
cat "$overrides" >> "$rendered"
rm -f "$overrides"
if [ "${CONNECT_RENDER_ONLY:-}" = 1 ]; then
    cat "$rendered"
    exit 0
fi
exec /opt/kafka/bin/connect-distributed.sh "$rendered"
