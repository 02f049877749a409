"""One JSON object per log line, for production's stdout (a log shipper reads it field by field).

Fields: time (UTC, ISO 8601), level, logger, message, and when present: exception (the formatted
traceback), stack, and the request's method, path and response status, which Django passes to
its `django.request` and `django.server` records as `request` and `status_code`. Only the path
is logged, never the query string or the body: answers and tokens stay out of the logs.
"""
from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        request = getattr(record, "request", None)
        path = getattr(request, "path", None)
        # django.server passes the socket as `request`; only an HttpRequest has a path.
        if isinstance(path, str):
            entry["method"] = getattr(request, "method", None)
            entry["path"] = path
        status = getattr(record, "status_code", None)
        if isinstance(status, int):
            entry["status"] = status
        # default=str: an argument that JSON cannot hold must not lose the whole line.
        return json.dumps(entry, default=str, ensure_ascii=False)
