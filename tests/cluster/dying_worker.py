"""A ``dask worker`` preload for tests: the worker's process ends as it starts any task, as one
killed for its memory or by the OOM killer would."""

import os

from distributed.diagnostics.plugin import WorkerPlugin


class DieOnTask(WorkerPlugin):
    def transition(self, key, start, finish, **kwargs) -> None:
        if finish == "executing":
            os._exit(1)


async def dask_setup(worker) -> None:
    await worker.plugin_add(DieOnTask(), name="die-on-task")
