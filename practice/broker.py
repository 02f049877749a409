"""The embedded broker: kombu's filesystem transport, made to outlive the loss of its folders.

kombu's transport assumes its folders exist for ever. When one goes (a clean-up of var/, an
operator's rm, a restored backup), a worker polling it dies: listing a missing folder raises
FileNotFoundError, which is not one of the transport's connection errors, so Celery stops the
worker as "unrecoverable" and nothing is graded until someone restarts it
(tests/reliability/test_broker_outage.py shows it). Here:

* a missing folder is made again at the next poll or publish, and the bindings this process
  declared (kept in kombu's in-memory state) are written back to the control folder, so the
  worker keeps running and the next message goes through; messages that were in a lost folder
  are gone, and the sweeper re-sends their rows (they are still `queued` in the database);
* any other OS error on the folders (a file in a folder's place, a full or read-only disk,
  permissions) counts as a lost connection: a worker waits and retries instead of exiting, and
  a publish fails, so the row stays `queued` for the sweeper;
* a message is written under a name no reader looks for and then renamed into place, so a
  worker never picks up a half-written file (kombu writes in place, and a worker that read the
  empty file died on the JSON error); a message that still cannot be decoded is dropped with a
  warning, and its row, still `queued`, is re-sent by the sweeper.

And a worker takes its next message as soon as it has finished the last one. It holds one
message at a time (acks late, prefetch 1), so a finished grade's acknowledgement is what lets it
fetch again; kombu's loop only looked at the folder again after its polling interval (0.1 s)
had run out, half of it on average: a sixth of a 0.3 s grade's time idle with the queue full.
The acknowledgement (made on the pool's result thread) now ends that wait at once; an idle
worker still reads the folder once per interval, no more often than before.

practice/celery.py imports this module, which points the `filesystem://` URL at it.
"""
from __future__ import annotations

import logging
import os
import threading
import uuid
from queue import Empty
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem, virtual
from kombu.utils.json import dumps

logger = logging.getLogger(__name__)

# Bounds how many undecodable files one poll skips before it reports the queue empty.
_MAX_SKIPPED_PER_POLL = 100


class QoS(virtual.QoS):
    """kombu's prefetch bookkeeping, which also wakes the transport's wait when a message it
    holds is done with (acknowledged, or rejected): there is room to fetch the next."""

    def ack(self, delivery_tag: Any) -> None:
        super().ack(delivery_tag)
        self.channel.connection.room_made.set()

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        super().reject(delivery_tag, requeue=requeue)
        self.channel.connection.room_made.set()


class Channel(filesystem.Channel):
    QoS = QoS

    def _make_folders(self) -> None:
        for folder in (self.data_folder_in, self.data_folder_out, self.control_folder):
            os.makedirs(folder, exist_ok=True)
        if self.store_processed:
            os.makedirs(self.processed_folder, exist_ok=True)
        # _queue_bind adds a binding only when it is missing, so repeating it is harmless.
        for key, arguments in list(self.state.bindings.items()):
            meta = self.typeof(key.exchange).prepare_bind(
                key.queue, key.exchange, key.routing_key, arguments)
            self._queue_bind(key.exchange, *meta)

    def _get(self, queue: str) -> Any:
        for _ in range(_MAX_SKIPPED_PER_POLL):
            try:
                return super()._get(queue)
            except FileNotFoundError:
                self._make_folders()
                raise Empty() from None
            except ValueError:  # JSON or UTF-8: kombu has already removed the file
                logger.warning("dropped an undecodable message on queue %s", queue)
        raise Empty()

    def _size(self, queue: str) -> int:
        try:
            return int(super()._size(queue))
        except FileNotFoundError:
            self._make_folders()
            return 0

    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        try:
            self._write_message(queue, payload)
        except FileNotFoundError:
            self._make_folders()
            self._write_message(queue, payload)

    def _write_message(self, queue: str, payload: Any) -> None:
        # kombu's name (sorted by time) for the final file; readers match `<queue>.msg` after
        # the first dot, so the `.part` file is invisible to them until the rename.
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + ".part"
        try:
            with open(partial, "wb") as f:
                f.write(dumps(payload).encode("utf-8"))
            os.replace(partial, final)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def get_table(self, exchange: str) -> Any:
        table = super().get_table(exchange)
        # No table although this process bound queues to the exchange: the control folder (or
        # the exchange's file in it) was lost. Without this the message would be routed to no
        # queue and dropped without an error.
        if not table and any(key.exchange == exchange for key in self.state.bindings):
            self._make_folders()
            table = super().get_table(exchange)
        return table


class Transport(filesystem.Transport):
    Channel = Channel
    connection_errors = (*filesystem.Transport.connection_errors, OSError)

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        # Set by QoS when a held message is done with; ends drain_events' wait between polls.
        self.room_made = threading.Event()

    def drain_events(self, connection: Any, timeout: float | None = None) -> None:
        """Deliver one message, polling the folders until one comes or `timeout` runs out
        (TimeoutError, which socket.timeout, kombu's, is). Between polls it waits the polling
        interval, or less: until this worker finishes a message it holds (the module's
        docstring says why)."""
        started = monotonic()
        while True:
            # Cleared before the poll: an acknowledgement during the poll still ends the wait.
            self.room_made.clear()
            try:
                self.cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                waited = monotonic() - started
                if timeout is not None and waited >= timeout:
                    raise TimeoutError() from None
            pause = self.polling_interval or 0.0
            if timeout is not None:
                pause = min(pause, timeout - waited)
            self.room_made.wait(pause)


TRANSPORT_ALIASES["filesystem"] = "practice.broker:Transport"
