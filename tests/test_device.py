"""Device discovery, pinning and fission."""

import numpy as np
import pytest
from conftest import alphabet_for, single_block

from dmap.device import Device, list_devices
from dmap.errors import DeviceError
from dmap.fastx import encode_reads
from dmap.search.exact import search_block
from dmap.search.reference import backward_search_numpy


def test_list_devices():
    infos = list_devices()
    assert infos and all(d.spec.count(":") == 1 and d.compute_units >= 1 for d in infos)


@pytest.mark.parametrize("spec", ["9:9", "0:0/0:0", "0:0/2:2", "0:0/999:0", "zero"])
def test_bad_specs(spec):
    with pytest.raises(DeviceError):
        Device(spec)


def test_split_device_searches_like_the_whole():
    info = list_devices()[0]
    if info.max_split < 2:
        pytest.skip("this device cannot be split")
    text = "".join(np.random.default_rng(1).choice(list("ACGT"), size=3000))
    alphabet = alphabet_for("dna", [("t", text)])
    block = single_block(alphabet.reference_table[np.frombuffer(text.encode(), np.uint8)], alphabet)
    reads = [text[i : i + 20] for i in range(0, 2900, 7)]
    codes, offsets, lengths, _ = encode_reads(reads, alphabet, reads)
    want = backward_search_numpy(block, codes, offsets, lengths, 2)
    for k in range(2):
        part = Device(f"{info.spec}/2:{k}")
        assert part.device.max_compute_units == info.compute_units // 2
        assert (search_block(part, part.upload_block(block), codes, offsets, lengths, 2) == want).all()
