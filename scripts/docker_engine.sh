#!/usr/bin/env bash
# A Docker engine for the tests: the docker sandbox backend, the images and the compose stack are
# tested against a real one (tests skip, with the reason, where none can be had).
#
#   scripts/docker_engine.sh run CMD...   run CMD with an engine up: one already running is used
#                                         as it is; else, as root, docker.io is installed, dockerd
#                                         started for CMD and stopped after it, whatever CMD's
#                                         status; not root and none running: CMD runs without
#   scripts/docker_engine.sh start|stop   the same by hand (stop stops only a dockerd started here)
#
# The daemon never creates a bridge network (no address outside 127.0.0.0/8 on this machine):
# {"bridge": "none", "iptables": false, "ip6tables": false}. Sandboxes run with --network none,
# anything that needs a network uses the host's (network_mode: host). Storage is overlay2, the
# cgroup driver cgroupfs (the host has no systemd as PID 1).
set -uo pipefail
cd "$(dirname "$0")/.."

STATE_DIR="${ROOFLINE_DOCKER_STATE:-/var/lib/roofline-docker}"
PIDFILE="$STATE_DIR/dockerd.pid"
LOG="$STATE_DIR/dockerd.log"
CONFIG=/etc/docker/daemon.json
WANT_CONFIG='{"bridge": "none", "iptables": false, "ip6tables": false}'
START_WAIT_S=60

engine_up() {
  docker info >/dev/null 2>&1
}

have_compose() {
  command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1
}

# The engine and a Compose CLI (tests/deploy/test_stack.py brings the stack up with it).
install_engine() {
  command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1 && have_compose \
    && return 0
  echo "docker_engine: installing docker.io and docker-compose"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io \
    docker-compose >/dev/null
}

write_config() {
  mkdir -p /etc/docker
  if [ -f "$CONFIG" ] && ! python3 - "$CONFIG" <<'EOF'
import json, sys
have = json.load(open(sys.argv[1]))
sys.exit(not (have.get("bridge") == "none" and have.get("iptables") is False))
EOF
  then
    echo "docker_engine: $CONFIG exists and keeps a bridge or iptables on; not starting" >&2
    return 1
  fi
  [ -f "$CONFIG" ] || echo "$WANT_CONFIG" > "$CONFIG"
}

start() {
  if engine_up; then
    echo "docker_engine: an engine is already running; using it"
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "docker_engine: not root and no engine running: the Docker tests will skip"
    return 0
  fi
  install_engine || { echo "docker_engine: could not install docker.io" >&2; return 0; }
  write_config || return 0
  mkdir -p "$STATE_DIR"
  # containerd comes up under dockerd (it starts its own when none is running).
  nohup dockerd >"$LOG" 2>&1 &
  echo $! > "$PIDFILE"
  for _ in $(seq "$START_WAIT_S"); do
    if engine_up; then
      echo "docker_engine: dockerd up (pid $(cat "$PIDFILE"), log $LOG)"
      return 0
    fi
    if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then break; fi
    sleep 1
  done
  echo "docker_engine: dockerd did not come up; the Docker tests will skip. Its log:" >&2
  tail -n 20 "$LOG" >&2
  stop
  return 0
}

stop() {
  [ -f "$PIDFILE" ] || return 0
  local pid
  pid="$(cat "$PIDFILE")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -9 "$pid" 2>/dev/null || true
    echo "docker_engine: dockerd stopped"
  fi
  rm -f "$PIDFILE"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  run)
    shift
    if ! engine_up; then
      start
      # Stopped however CMD ends (a failure, an interrupt).
      if [ -f "$PIDFILE" ]; then trap stop EXIT; fi
    fi
    # With an engine up, the Docker tests must run: a missing image fails them, not skips.
    if engine_up; then export ROOFLINE_REQUIRE_DOCKER=1; fi
    "$@"
    exit $?
    ;;
  *) echo "usage: $0 start|stop|run CMD..." >&2; exit 2 ;;
esac
