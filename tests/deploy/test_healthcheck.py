"""docker/app/healthcheck.py, the containers' health checks, against stand-ins: a local HTTP
server for the web check and a temporary schedule file for beat."""
from __future__ import annotations

import importlib.util
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def hc() -> Any:
    spec = importlib.util.spec_from_file_location("roofline_healthcheck",
                                                  ROOT / "docker/app/healthcheck.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def serve(status: int, seen: list[dict[str, str]]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            body = b'{"status": "ok"}'
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize(("status", "code"), [(200, 0), (503, 1), (301, 1)])
def test_web_check_follows_healthz(hc: Any, monkeypatch: pytest.MonkeyPatch,
                                   status: int, code: int) -> None:
    seen: list[dict[str, str]] = []
    server = serve(status, seen)
    try:
        monkeypatch.setattr(hc, "WEB_PORT", server.server_address[1])
        monkeypatch.setenv("ALLOWED_HOSTS", ".roofline.example,other.example")
        assert hc.main(["healthcheck.py", "web"]) == code
    finally:
        server.shutdown()
        server.server_close()
    # As the TLS proxy would send it, to a host Django accepts.
    assert seen == [{**seen[0], "path": "/healthz/", "host": "roofline.example",
                     "x-forwarded-proto": "https"}]


def test_web_check_fails_when_nothing_listens(hc: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = serve(200, [])
    port = server.server_address[1]
    server.server_close()
    monkeypatch.setattr(hc, "WEB_PORT", port)
    assert hc.main(["healthcheck.py", "web"]) == 1


def test_beat_check_wants_a_recent_schedule(hc: Any, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    schedule = tmp_path / "celerybeat-schedule"
    monkeypatch.setattr(hc, "BEAT_SCHEDULE", str(schedule))
    assert hc.main(["healthcheck.py", "beat"]) == 1  # not written yet
    (tmp_path / "celerybeat-schedule.db").write_bytes(b"")
    assert hc.main(["healthcheck.py", "beat"]) == 0
    old = time.time() - hc.BEAT_STALE_S - 60
    os.utime(tmp_path / "celerybeat-schedule.db", (old, old))
    assert hc.main(["healthcheck.py", "beat"]) == 1  # beat stopped writing


def test_unknown_check_is_a_usage_error(hc: Any) -> None:
    assert hc.main(["healthcheck.py", "nope"]) == 2
