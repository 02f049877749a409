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


def _connection(root: Path, polling_interval: float) -> Connection:
    folder = str(root / "queue")
    os.makedirs(folder, exist_ok=True)
    return Connection("filesystem://", transport_options={
        "data_folder_in": folder, "data_folder_out": folder,
        "control_folder": str(root / "control"), "polling_interval": polling_interval})


def test_a_consumer_polls_again_as_soon_as_it_is_done_with_the_message_it_holds(
        tmp_path: Path) -> None:
    """A worker holds one message (prefetch 1, acks late): the acknowledgement, made on
    another thread (the pool's), ends the transport's wait between polls, so the next message
    is fetched then and not when a polling interval (60 s here) runs out."""
    from kombu import Exchange, Queue

    exchange = Exchange(QUEUE, type="direct")
    queue = Queue(QUEUE, exchange, routing_key=QUEUE)
    held: list[tuple[dict[str, int], object]] = []
    with _connection(tmp_path, polling_interval=60) as conn:
        producer = conn.Producer()
        for i in (1, 2):
            producer.publish({"i": i}, exchange=exchange, routing_key=QUEUE, declare=[queue])
        with conn.Consumer(queue, callbacks=[lambda body, msg: held.append((body, msg))],
                           prefetch_count=1):
            conn.drain_events(timeout=20)
            # One held: either, since files made in the same millisecond sort by their uuid.
            assert len(held) == 1
            room_made = conn.transport.room_made
            waits: list[bool] = []
            wait = room_made.wait

            def wait_acking_first(pause: float) -> bool:
                if not waits:  # the held message's task ends: acked from the pool's thread
                    acker = threading.Thread(target=held[0][1].ack)  # type: ignore[attr-defined]
                    acker.start()
                    acker.join()
                waits.append(wait(pause))
                return waits[-1]

            room_made.wait = wait_acking_first  # type: ignore[method-assign]
            conn.drain_events(timeout=20)  # without the wake-up: TimeoutError after 20 s
    assert sorted(body["i"] for body, _ in held) == [1, 2]
    assert waits == [True]  # woken by the acknowledgement, not by the end of a pause


def test_an_idle_consumer_reads_the_folder_once_per_polling_interval(tmp_path: Path) -> None:
    """Nothing to fetch and nothing held: the wait between polls is the whole interval (the
    wake-up above must not turn an idle worker into a busy loop)."""
    from kombu import Exchange, Queue

    queue = Queue(QUEUE, Exchange(QUEUE, type="direct"), routing_key=QUEUE)
    with _connection(tmp_path, polling_interval=0.1) as conn:
        with conn.Consumer(queue, callbacks=[lambda body, msg: None], prefetch_count=1):
            polls = 0
            get = conn.transport.cycle.get

            def counted(*args: object, **kwargs: object) -> None:
                nonlocal polls
                polls += 1
                get(*args, **kwargs)

            conn.transport.cycle.get = counted  # type: ignore[method-assign]
            with pytest.raises(TimeoutError):
                conn.drain_events(timeout=0.5)
    assert 1 <= polls <= 6  # a busy loop polls thousands of times in half a second
