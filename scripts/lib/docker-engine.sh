# Sourced by scripts/test: a Docker engine and the Compose v2 plugin for tests/compose.
#   engine_prepare      docker.io and debootstrap installed where missing (Debian)
#   plugin_build        the Compose plugin built from its Go module where `docker compose`
#                       is missing (in the background: plugin_wait waits for it)
#   engine_start        DOCKER_HOST: an engine that answers, or dockerd started on a
#                       private socket (so nothing else on the machine sees an engine)
#   engine_stop         stops a dockerd engine_start started, by its pid
COMPOSE_MODULE="github.com/docker/compose/v5"
COMPOSE_VERSION="v5.6.0"
PLUGINS_DIR="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
ENGINE_DIR="/run/cdcbox-docker"
engine_pid=""
plugin_pid=""

engine_prepare() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    if [ "${#missing[@]}" -gt 0 ]; then
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
    fi
}

plugin_build() {
    if docker compose version >/dev/null 2>&1; then
        return
    fi
    mkdir -p "$PLUGINS_DIR"
    (
        set -e
        # `go install` refuses the module (its go.mod has exclude directives): download
        # it, then build its command in the module's directory.
        dir="$(go mod download -json "$COMPOSE_MODULE@$COMPOSE_VERSION" |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
        cd "$dir"
        nice -n 19 go build -trimpath \
            -ldflags "-X $COMPOSE_MODULE/internal.Version=$COMPOSE_VERSION" \
            -o "$PLUGINS_DIR/docker-compose.partial" ./cmd
        mv "$PLUGINS_DIR/docker-compose.partial" "$PLUGINS_DIR/docker-compose"
    ) > "$ROOT/.cdcbox/compose-plugin-build.log" 2>&1 &
    plugin_pid=$!
}

plugin_wait() {
    if [ -n "$plugin_pid" ] && ! wait "$plugin_pid"; then
        echo "building the Compose plugin failed:" >&2
        tail -20 "$ROOT/.cdcbox/compose-plugin-build.log" >&2
        return 1
    fi
    docker compose version >&2
}

engine_start() {
    if docker info >/dev/null 2>&1; then
        echo "using the Docker engine that answers (${DOCKER_HOST:-its default socket})" >&2
        return
    fi
    mkdir -p "$ENGINE_DIR"
    dockerd --host "unix://$ENGINE_DIR/docker.sock" --data-root /var/lib/cdcbox-docker \
        --exec-root "$ENGINE_DIR/exec" --pidfile "$ENGINE_DIR/dockerd.pid" \
        > "$ROOT/.cdcbox/dockerd.log" 2>&1 &
    engine_pid=$!
    export DOCKER_HOST="unix://$ENGINE_DIR/docker.sock"
    local deadline=$((SECONDS + 60))
    until docker info >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ] || ! kill -0 "$engine_pid" 2>/dev/null; then
            echo "dockerd did not answer on $DOCKER_HOST:" >&2
            tail -20 "$ROOT/.cdcbox/dockerd.log" >&2
            return 1
        fi
        sleep 0.5
    done
    echo "dockerd $(docker info --format '{{.ServerVersion}}') on $DOCKER_HOST (pid $engine_pid)" >&2
}

engine_stop() {
    if [ -n "$engine_pid" ]; then
        kill "$engine_pid" 2>/dev/null || true
        wait "$engine_pid" 2>/dev/null || true
        engine_pid=""
    fi
}
