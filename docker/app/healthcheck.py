"""Container health checks for the application images (docker-compose.yml `healthcheck:`).

    python /usr/local/lib/roofline/healthcheck.py web    GET /healthz/ on this container
    python /usr/local/lib/roofline/healthcheck.py beat   the beat schedule was written lately

Exit 0 healthy, 1 not. Standard library only and no Django import, so a check costs a few
milliseconds, not a settings load. (Workers are checked with `celery inspect ping` instead.)
"""
from __future__ import annotations

import glob
import http.client
import os
import sys
import time

WEB_PORT = 8000
TIMEOUT_S = 5.0
# beat writes its schedule file every few minutes while it sends tasks (celery.beat's
# PersistentScheduler syncs every 3 minutes; the sweeper is due every 30 s).
BEAT_SCHEDULE = "/tmp/celerybeat-schedule"
BEAT_STALE_S = 600.0


def request_host() -> str:
    """A Host header Django will accept: the first ALLOWED_HOSTS entry (a leading-dot
    wildcard `.example.com` matches `example.com` itself; `*` allows anything)."""
    hosts = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "").split(",") if h.strip()]
    if not hosts or hosts[0] == "*":
        return "localhost"
    return hosts[0].lstrip(".")


def check_web() -> int:
    conn = http.client.HTTPConnection("127.0.0.1", WEB_PORT, timeout=TIMEOUT_S)
    try:
        # TLS ends at the proxy in front (prod.py trusts X-Forwarded-Proto), so the check says
        # what the proxy says; without it the SSL redirect would answer 301 instead.
        conn.request("GET", "/healthz/", headers={"Host": request_host(),
                                                  "X-Forwarded-Proto": "https"})
        response = conn.getresponse()
        body = response.read(2048).decode("utf-8", "replace")
    except OSError as exc:
        print(f"web: {type(exc).__name__}: {exc}")
        return 1
    finally:
        conn.close()
    print(f"web: HTTP {response.status} {body}")
    return 0 if response.status == 200 else 1


def check_beat() -> int:
    # shelve may add a suffix (.db, or .dat/.dir/.bak) depending on the dbm module.
    times = [os.path.getmtime(p) for p in glob.glob(BEAT_SCHEDULE + "*")]
    if not times:
        print("beat: no schedule file yet")
        return 1
    age = time.time() - max(times)
    print(f"beat: schedule written {age:.0f} s ago")
    return 0 if age < BEAT_STALE_S else 1


def main(argv: list[str]) -> int:
    checks = {"web": check_web, "beat": check_beat}
    if len(argv) != 2 or argv[1] not in checks:
        print(f"usage: {argv[0]} {'|'.join(checks)}")
        return 2
    return checks[argv[1]]()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
