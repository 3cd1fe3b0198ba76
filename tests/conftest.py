"""Shared fixtures: one OpenCL device and one embedded Dask cluster per test run
(helpers the tests share are in helpers.py)."""

from __future__ import annotations

import pytest

from dmap.opencl.device import Device


@pytest.fixture(scope="session")
def device() -> Device:
    return Device()


@pytest.fixture(scope="session")
def client():
    from dmap.cluster.client import embedded_client

    with embedded_client() as c:
        yield c


