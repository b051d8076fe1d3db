# Sourced by scripts/test, scripts/demo and scripts/bench: a virtualenv with cdcbox and the
# extras CDCBOX_EXTRAS names, reinstalled when pyproject.toml changed or an extra is missing
# (the stamp records which extras are installed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CDCBOX_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "cdcbox needs Python >= 3.11 ($PYTHON is $("$PYTHON" --version 2>&1))" >&2
    exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.cdcbox-installed"
installed="$(cat "$stamp" 2>/dev/null || true)"
# shellcheck source=lib/extras.sh
. "$ROOT/scripts/lib/extras.sh"
extras="$(merged_extras "$installed" "binary,sqlalchemy,pydantic,test,${CDCBOX_EXTRAS:-}")"
if [ ! -f "$stamp" ] || [ "$extras" != "$installed" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -e "$ROOT[$extras]"
    echo "$extras" > "$stamp"
fi
export PATH="$VENV/bin:$PATH"
export CDCBOX_STACK_DIR="${CDCBOX_STACK_DIR:-$ROOT/.cdcbox/stack}"

# Start the stack unless one is already named by the environment; stop it on exit.
stack_started=0
start_stack() {
    if [ -n "${CDCBOX_DSN:-}" ] && [ -n "${CDCBOX_CONNECT_URL:-}" ] && [ -n "${CDCBOX_BOOTSTRAP_SERVERS:-}" ]; then
        echo "using the stack named by CDCBOX_* variables" >&2
        return
    fi
    cdc-ctl stack up > "$ROOT/.cdcbox/stack.env.tmp" || {
        echo "the stack failed to start; logs are under $CDCBOX_STACK_DIR" >&2
        return 1
    }
    stack_started=1
    set -a
    # shellcheck disable=SC1091
    . "$ROOT/.cdcbox/stack.env.tmp"
    set +a
    rm -f "$ROOT/.cdcbox/stack.env.tmp"
}
stop_stack() {
    if [ "$stack_started" = 1 ]; then
        cdc-ctl stack down >&2 || true
    fi
}
mkdir -p "$ROOT/.cdcbox"
