#!/usr/bin/env bash
# One worker (with the sweeper's beat) in the background, the web server in the foreground;
# Ctrl-C stops both.
set -euo pipefail
port=${1:-8000}
mkdir -p var
.venv/bin/celery -A practice worker -Q grade,gpu -c 1 -B -s var/celerybeat-schedule \
  --loglevel INFO > var/worker.log 2>&1 &
worker=$!
trap 'kill $worker 2>/dev/null; wait $worker 2>/dev/null' EXIT INT TERM
echo "worker pid $worker (log: var/worker.log)"
.venv/bin/python manage.py runserver "127.0.0.1:$port"
