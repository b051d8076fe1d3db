# Sourced by scripts/check and scripts/test: Debian's docker-compose, which
# tests/unit/test_compose_file.py uses to validate infra/docker-compose.yml (its `config`
# needs no engine), installed when absent.
ensure_compose_validator() {
    if ! command -v docker-compose >/dev/null; then
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker-compose >/dev/null
    fi
}
