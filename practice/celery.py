"""The Celery app: configured from Django settings (CELERY_ namespace), tasks listed explicitly."""
from __future__ import annotations

import logging
import os
import time

from celery import Celery
from celery.signals import worker_process_init

# The embedded broker's transport, which survives losing its folders (see the module).
from practice import broker  # noqa: F401

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "practice.settings.dev")

log = logging.getLogger(__name__)
# Logged by each child once its warm-up is over (bench/load.py waits for it before measuring).
TEXT_WARM_LINE = "text model warm-up done"

app = Celery("practice", include=["practice.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")


@app.on_after_configure.connect
def _make_broker_folders(sender: Celery, **kwargs: object) -> None:
    # The filesystem transport expects its folders to exist.
    options = sender.conf.broker_transport_options or {}
    if str(sender.conf.broker_url).startswith("filesystem"):
        for key in ("data_folder_in", "data_folder_out", "control_folder", "processed_folder"):
            if options.get(key):
                os.makedirs(options[key], exist_ok=True)


@worker_process_init.connect
def _prepare_sandbox(**kwargs: object) -> None:
    """Each prefork child: take a sandbox slot, clean up after dead workers, probe the sandbox.

    A slot is a uid of its own (60000 + slot). Only when ROOFLINE_SANDBOX_SLOT_BASE is set (one
    worker per host or container, as in production) is the slot taken from the child's index;
    otherwise each child claims a slot no other process on the machine holds
    (runners.identity.claimed_slot), so several workers on one machine (tests, `make run` next
    to a test run) never share a uid, and the janitor never kills another worker's run.
    """
    _lower_priority()
    base = os.environ.get("ROOFLINE_SANDBOX_SLOT_BASE")
    if base is not None:
        from billiard.process import current_process

        os.environ["ROOFLINE_SANDBOX_SLOT"] = str(int(base) + (current_process().index or 0))
    import runners

    try:
        runners.get_backend()  # runs the janitor once and the availability probe
    except runners.SandboxUnavailable:
        # Not fatal here: inline parts still grade, and each code submission then ends with a
        # clear error instead of ever running unsandboxed.
        pass
    _settle_heap()
    _warm_text_model()


def _lower_priority() -> None:
    """Grading yields the CPU to the web: this child and the sandboxes it starts run at a
    niceness of ROOFLINE_WORKER_NICE (default 10; 0 leaves it), so a page a student waits on
    is served first when the cores are busy grading, and grading takes whatever the web leaves
    (all of it when the site is quiet). The sandboxes' time limits count CPU seconds
    (runners/cpuclock.py), so a grade that waits for a core is not failed for it."""
    from django.conf import settings

    nice = int(getattr(settings, "ROOFLINE_WORKER_NICE", 0))
    if nice > 0:
        os.nice(nice)
        lower_own_autogroup(nice)


AUTOGROUP = "/proc/self/autogroup"
AUTOGROUP_TRIES = 5
AUTOGROUP_RETRY_S = 0.11  # the kernel's limit is HZ / 10 between writes


def lower_own_autogroup(nice: int, path: str = AUTOGROUP) -> bool:
    """Give the worker's session the same niceness, when the session is the worker's own.

    Linux's autogroup (kernel.sched_autogroup_enabled, on by default) schedules sessions
    against each other as wholes, and a process's niceness counts only inside its session. A
    worker started in a session of its own (a service manager, a supervisor, bench/load.py)
    would otherwise take a full share of the cores against the web's session at any niceness:
    measured in bench/load.py, the two grading children took 60 % of both cores while pages
    waited seconds. Only when the child's parent (the Celery main process) leads the session is
    the autogroup the worker's alone; in a session shared with the web (`make run` from one
    shell) it is left as it is, and the niceness above already works there. Raising a
    niceness needs no privilege, but without CAP_SYS_ADMIN the kernel takes one such write a
    tenth of a second machine-wide and answers EAGAIN to the rest (two pool children starting
    at once): those wait and write again. True when the autogroup's niceness was set."""
    if os.getsid(0) != os.getppid():
        return False
    for _ in range(AUTOGROUP_TRIES):
        try:
            with open(path, "w", encoding="ascii") as f:
                f.write(f"{nice}\n")
        except BlockingIOError:
            time.sleep(AUTOGROUP_RETRY_S)
        except OSError:
            return False  # no autogroup in this kernel, or a read-only /proc: nothing to even out
        else:
            return True
    return False


def _settle_heap() -> None:
    """The child's heap out of the collector's way (practice.heap.settle_grading_heap): at the
    start the heap it was forked with (Django, Celery, the graders), and again once the text
    model is loaded. Nothing is loaded for it, since the pool gives a child only seconds to
    start."""
    from practice.heap import settle_grading_heap

    settle_grading_heap()


def _warm_text_model() -> None:
    """Load the text parts' model (graders/text_model.py) in the background as the child
    starts, so the first explanation a student submits is read in about a second instead of
    waiting for torch and the weights. A background thread: the pool gives a child only a few
    seconds to start. ROOFLINE_TEXT_WARMUP=0 leaves it to the first text answer (the test
    suite's workers, which mostly never see one)."""
    if os.environ.get("ROOFLINE_TEXT_WARMUP", "1") == "0":
        log.info("%s: skipped (ROOFLINE_TEXT_WARMUP=0)", TEXT_WARM_LINE)
        return
    import threading

    def load() -> None:
        from exercises import registry
        from graders import key_points, text_model

        try:
            encoder = text_model.encoder()
        except text_model.ModelUnavailable:
            # Remembered: text answers fall back to review with a notice.
            log.info("%s: no model", TEXT_WARM_LINE)
            return
        key_points.prime([(part.prompt, part.key_point_specs)
                          for spec in registry.load_all().values() for part in spec.parts
                          if part.type == "text"], encoder)
        _settle_heap()  # torch and the model join the frozen heap
        log.info("%s: model loaded", TEXT_WARM_LINE)

    threading.Thread(target=load, name="text-model-warmup", daemon=True).start()
