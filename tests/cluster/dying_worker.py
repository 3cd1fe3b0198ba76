"""A ``dask worker`` preload for tests: the worker's process ends as it starts a task, as one
killed for its memory or by the OOM killer would.  By default at every task; with
``DMAP_TEST_DIE_ONCE=PATH``, only the first worker to start its ``DMAP_TEST_DIE_AT``-th task
(default 1) dies, once: it makes ``PATH`` as it goes, so its restarted self and the other
workers live."""

import os

from distributed.diagnostics.plugin import WorkerPlugin


class DieOnTask(WorkerPlugin):
    def __init__(self) -> None:
        self.started = 0
        self.marker = os.environ.get("DMAP_TEST_DIE_ONCE")
        self.at = int(os.environ.get("DMAP_TEST_DIE_AT", "1"))

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish != "executing":
            return
        self.started += 1
        if self.marker is None:
            os._exit(1)
        if self.started >= self.at:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return
            os._exit(1)


async def dask_setup(worker) -> None:
    await worker.plugin_add(DieOnTask(), name="die-on-task")
