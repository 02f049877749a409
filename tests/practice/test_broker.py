"""The embedded broker's channel: a reader racing a writer never sees half a message, a torn file
is dropped instead of killing the worker, and a lost folder is made again."""
from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from queue import Empty

import pytest
from kombu import Connection

import practice.broker  # noqa: F401  (points filesystem:// at the resilient transport)

QUEUE = "grade"


def _channel(root: Path) -> object:
    folder = str(root / "queue")
    os.makedirs(folder, exist_ok=True)
    conn = Connection("filesystem://", transport_options={
        "data_folder_in": folder, "data_folder_out": folder,
        "control_folder": str(root / "control")})
    return conn.channel()


def test_a_reader_racing_a_writer_gets_every_message_whole(tmp_path: Path) -> None:
    writer, reader = _channel(tmp_path), _channel(tmp_path)
    n = 3000
    body = {"pad": "x" * 20_000}  # big enough that a write is not one syscall's worth
    got: list[int] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            while len(got) < n:
                try:
                    got.append(reader._get(QUEUE)["i"])
                except Empty:
                    continue
        except BaseException as exc:  # the test reports it below
            errors.append(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    for i in range(n):
        writer._put(QUEUE, {**body, "i": i})
    t.join(timeout=120)
    assert errors == []
    assert sorted(got) == list(range(n))


def test_an_undecodable_file_is_dropped_and_the_next_message_read(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture
                                                                 ) -> None:
    ch = _channel(tmp_path)
    (tmp_path / "queue" / f"0_torn.{QUEUE}.msg").write_bytes(b'{"i": ')
    ch._put(QUEUE, {"i": 7})
    assert ch._get(QUEUE) == {"i": 7}
    assert "undecodable" in caplog.text
    with pytest.raises(Empty):
        ch._get(QUEUE)


def test_a_lost_queue_folder_is_made_again(tmp_path: Path) -> None:
    ch = _channel(tmp_path)
    shutil.rmtree(tmp_path / "queue")
    with pytest.raises(Empty):
        ch._get(QUEUE)
    ch._put(QUEUE, {"i": 1})
    assert ch._get(QUEUE) == {"i": 1}
