"""The package's msgpack-rpc framing on its own, without gkcd: requests sent
as parts (big bins from the caller's memory) and replies received into one
buffer, big bins into their own.  Whatever way the bytes are cut, what comes
out must be what msgpack itself would decode."""
import msgpack
import numpy as np
import pytest

import gkc
from gkc._rpc import BIG_BIN, Frame, Rpc


def norm(o):
    """Big bins come back as uint8 NumPy buffers: compare them as bytes."""
    if isinstance(o, np.ndarray):
        assert o.dtype == np.uint8 and o.ndim == 1
        return o.tobytes()
    if isinstance(o, list):
        return [norm(v) for v in o]
    if isinstance(o, dict):
        return {k: norm(v) for k, v in o.items()}
    return o


def random_value(rng, depth=0):
    kind = int(rng.integers(12 if depth < 3 else 8))
    if kind == 0:
        return int(rng.integers(-2**63, 2**63 - 1))
    if kind == 1:
        return float(rng.standard_normal())
    if kind == 2:  # every str header size, and one longer than a big bin
        return "s" * int(rng.choice([0, 5, 31, 32, 255, 256, 65536, BIG_BIN + 9]))
    if kind == 3:  # bins on both sides of every header size and of BIG_BIN
        n = int(rng.choice([0, 3, 255, 256, 65535, 65536, BIG_BIN - 1, BIG_BIN, BIG_BIN + 1, 300001]))
        return rng.integers(0, 256, n, dtype=np.uint8).tobytes()
    if kind == 4:
        return None
    if kind == 5:
        return bool(rng.integers(2))
    if kind == 6:
        return int(rng.integers(0, 200))
    if kind == 7:
        return -int(rng.integers(1, 40))
    if kind == 8:
        return [random_value(rng, depth + 1) for _ in range(int(rng.choice([0, 1, 3, 15, 16, 20])))]
    return {f"k{i}": random_value(rng, depth + 1) for i in range(int(rng.choice([0, 2, 15, 16, 17])))}


@pytest.mark.parametrize("trial", range(40))
def test_replies_cut_anywhere_decode_as_msgpack_does(trial, rng):
    msgs = [[1, i, None, random_value(rng)] for i in range(int(rng.integers(1, 6)))]
    msgs.append([2, "error", [{"code": "timeout", "message": "bye"}]])
    stream = b"".join(msgpack.packb(m, use_bin_type=True) for m in msgs)
    r = Rpc()
    got, ended, pos = [], None, 0
    while pos < len(stream) and ended is None:
        dst = r.buffer()
        assert dst.nbytes > 0
        n = min(dst.nbytes, int(rng.choice([1, 7, 100, 5000, BIG_BIN + 3, 1 << 20, 1 << 23])),
                len(stream) - pos)
        dst[:n] = stream[pos:pos + n]
        pos += n
        replies, ended = r.received(n)
        got += replies
    assert pos == len(stream)
    assert [norm([1, mid, err, res]) for mid, err, res in got] == [norm(m) for m in msgs[:-1]]
    assert isinstance(ended, gkc.Timeout) and ended.message == "bye"


def test_a_big_bin_lands_in_a_buffer_of_its_own(rng):
    data = rng.integers(0, 256, 3 * BIG_BIN + 5, dtype=np.uint8).tobytes()
    stream = msgpack.packb([1, 9, None, {"algo": "x", "c": data, "kernel_us": 1.5}], use_bin_type=True)
    r = Rpc()
    replies, ended = r.feed(stream)
    assert ended is None and len(replies) == 1
    mid, err, res = replies[0]
    assert mid == 9 and err is None and res["kernel_us"] == 1.5
    c = res["c"]
    assert isinstance(c, np.ndarray) and c.base is None and c.tobytes() == data


def test_undecodable_bytes_end_the_connection():
    r = Rpc()
    stream = msgpack.packb([1, 1, None, {"v": 1}]) + b"\xc1" + b"\0" * BIG_BIN
    replies, ended = r.feed(stream)
    assert [m for m, _, _ in replies] == [1]
    assert isinstance(ended, gkc.ProtocolError)


def test_frames_are_the_bytes_msgpack_would_pack(rng):
    small = rng.standard_normal(10).astype(np.float32)
    big = rng.standard_normal(BIG_BIN).astype(np.float32)
    huge = rng.integers(0, 9, 70000, dtype=np.int32)
    for params in ({"x": memoryview(small).cast("B"), "op": "sum"},
                   {"a": memoryview(big).cast("B"), "m": 3, "b": bytes(BIG_BIN), "out": {"c": "handle"},
                    "col_idx": memoryview(huge).cast("B"), "alpha": 1.5}):
        msgid, frame = Rpc().request("sgemm", params)
        assert isinstance(frame, Frame)
        want = msgpack.packb([0, msgid, "sgemm", [params]], use_bin_type=True)
        assert bytes(frame) == want and len(frame) == len(want)
    # The big ones are the caller's memory itself, not copies.
    assert any(isinstance(p, memoryview) and p.obj is big for p in frame.parts)
    assert any(isinstance(p, memoryview) and p.obj is huge for p in frame.parts)


def test_an_unencodable_argument_is_invalid_argument():
    rpc = Rpc()
    with pytest.raises(gkc.InvalidArgument, match="encode"):
        rpc.request("reduce", {"x": object()})
    # The packer is usable afterwards.
    _, frame = rpc.request("ping", {})
    assert bytes(frame) == msgpack.packb([0, 1, "ping", [{}]])
