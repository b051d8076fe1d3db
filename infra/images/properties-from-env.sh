#!/bin/sh
# Renders a Java properties file: DEFAULTS (may be /dev/null) with each property
# overridden by a variable PREFIX<NAME> — the property's name upper-cased, its dots
# written "_" and its own underscores "__" (CONNECT_BOOTSTRAP_SERVERS=... sets
# bootstrap.servers). Variables named in SKIP (space-separated suffixes) are the
# entrypoint's own settings, not properties.
#   properties-from-env.sh PREFIX DEFAULTS OUT "SKIP..."
set -eu
prefix="$1" defaults="$2" rendered="$3" skip="${4:-}"
overrides="$(mktemp)"
env | awk -F= -v prefix="$prefix" -v skip=" $skip " '
    index($0, prefix) == 1 && substr($1, length(prefix) + 1) ~ /^[A-Z0-9_]+$/ {
        name = substr($1, length(prefix) + 1)
        if (index(skip, " " name " ")) next
        key = tolower(name)
        gsub(/__/, "\001", key); gsub(/_/, ".", key); gsub(/\001/, "_", key)
        print key "=" substr($0, length($1) + 2)
    }' > "$overrides"
# The defaults without the overridden keys, then the overrides.
awk -F= 'FILENAME == ARGV[1] { over[$1] = 1; next } /^[ \t]*(#|$)/ || !($1 in over)' \
    "$overrides" "$defaults" > "$rendered"
cat "$overrides" >> "$rendered"
rm -f "$overrides"
