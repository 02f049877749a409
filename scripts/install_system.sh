#!/usr/bin/env bash
# System packages the tests need: Chromium for the browser tests. Installed from Debian's
# packages when we are root; otherwise we say what is missing and the browser tests skip.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" = 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "missing system packages: ${need[*]} (install them with your package manager)" >&2
fi
