"""The signed channel between workers and the parent, sent as parts and read into one
buffer per frame (no joined or sliced copies of a large tensor): what arrives is what was
sent, however the pipe splits it, and anything altered is refused."""

from __future__ import annotations

import array
import hashlib
import hmac
import random
import struct

import pytest

from gatekeeper.sandbox.channel import (MAX_FRAME, ChannelError, FrameReader, decode, frame_parts,
                                        pack_message, pack_parts, parts_size)

SECRET = b"k" * 32


def _mac() -> "hmac.HMAC":
    return hmac.new(SECRET, digestmod=hashlib.sha256)


def _wire(*messages: dict) -> bytes:
    return b"".join(b"".join(bytes(p) for p in frame_parts(_mac(), pack_parts(m))) for m in messages)


MESSAGES = [
    {"kind": "result", "value": {"__tensor__": True, "data": b"\x00\x01" * 70_000, "shape": [140_000]}},
    {"kind": "phase", "phase": "call"},
    {"kind": "empty", "data": b""},
    {"kind": "many", "items": [b"a", {"x": b"bc"}, b"\xff" * 3]},
]


@pytest.mark.parametrize("seed", range(6))
def test_every_split_of_the_stream_gives_the_messages_sent(seed):
    wire = _wire(*MESSAGES)
    rng = random.Random(seed)
    reader = FrameReader(SECRET)
    got, pos = [], 0
    while pos < len(wire):
        step = rng.choice([1, 7, 40, 41, 1000, 65_536, len(wire)])
        got += reader.feed(wire[pos:pos + step])
        pos += step
    assert len(got) == len(MESSAGES) and reader.pending() == 0
    assert got[0]["value"]["data"] == MESSAGES[0]["value"]["data"]
    assert got[1] == {"kind": "phase", "phase": "call"}
    assert bytes(got[2]["data"]) == b""
    assert [bytes(got[3]["items"][0]), bytes(got[3]["items"][1]["x"]), bytes(got[3]["items"][2])] == \
        [b"a", b"bc", b"\xff" * 3]


def test_tensor_values_arrive_as_a_read_only_view_and_other_blobs_as_bytes():
    (message, _, empty, many) = FrameReader(SECRET).feed(_wire(*MESSAGES))
    blob = message["value"]["data"]
    assert isinstance(blob, memoryview) and blob.readonly
    with pytest.raises(TypeError):
        blob[0] = 1
    assert type(empty["data"]) is bytes and type(many["items"][1]["x"]) is bytes  # as sent


def test_parts_sign_and_frame_exactly_as_the_joined_payload():
    payload = pack_message(MESSAGES[0])
    parts = pack_parts(MESSAGES[0])
    assert b"".join(bytes(p) for p in parts) == payload and parts_size(parts) == len(payload)
    signed = hmac.new(SECRET, payload, hashlib.sha256).digest()
    assert b"".join(bytes(p) for p in frame_parts(_mac(), parts)) == struct.pack(">Q", len(payload)) + signed + payload


def test_a_blob_that_could_change_is_copied_when_packed():
    mutable = bytearray(b"before")
    floats = array.array("f", [1.0, 2.0])
    parts = pack_parts({"a": mutable, "b": memoryview(floats)})
    mutable[:] = b"AFTER!"
    floats[0] = 9.0
    (message,) = FrameReader(SECRET).feed(b"".join(bytes(p) for p in frame_parts(_mac(), parts)))
    assert bytes(message["a"]) == b"before"
    assert bytes(message["b"]) == array.array("f", [1.0, 2.0]).tobytes()  # 8 bytes, not 2 items


def test_a_received_view_is_sent_on_as_it_is():
    (message,) = FrameReader(SECRET).feed(_wire(MESSAGES[0]))
    view = message["value"]["data"]
    parts = pack_parts({"data": view})
    assert any(isinstance(p, memoryview) and p.obj is view.obj for p in parts)  # no copy made
    (again,) = FrameReader(SECRET).feed(b"".join(bytes(p) for p in frame_parts(_mac(), parts)))
    assert again["data"] == MESSAGES[0]["value"]["data"]


@pytest.mark.parametrize("where", [0, 8, 40, 60, -1])
def test_any_changed_byte_is_refused(where):
    wire = bytearray(_wire(MESSAGES[0]))
    wire[where] ^= 0x01
    with pytest.raises(ChannelError):
        FrameReader(SECRET).feed(bytes(wire))


def test_another_secret_and_an_implausible_length_are_refused():
    with pytest.raises(ChannelError, match="authentication"):
        FrameReader(b"x" * 32).feed(_wire(MESSAGES[1]))
    with pytest.raises(ChannelError, match="implausible"):
        FrameReader(SECRET).feed(struct.pack(">Q", MAX_FRAME + 1) + b"\x00" * 32)


def test_malformed_payloads_are_channel_errors():
    with pytest.raises(ChannelError):
        decode(b"\x00\x00")
    head = b'{"blobs":[100]}'
    with pytest.raises(ChannelError, match="blob sizes"):
        decode(struct.pack(">I", len(head)) + head + b"short")
    head = b'{"x":{"__blob__":3},"blobs":[1]}'
    with pytest.raises(ChannelError, match="out of range"):
        decode(struct.pack(">I", len(head)) + head + b"z")


def test_frames_sent_from_several_threads_at_once_arrive_whole():
    # The audit guard reports from whichever thread tripped it: frames, small ones joined and
    # large ones written in parts, must never interleave (a broken frame would be "forged").
    from gatekeeper.sandbox import run_job

    sizes = [10, 70_000, 300_000, 3]
    result = run_job("gatekeeper.sandbox.selftest:send_from_threads",
                     {"threads": 4, "each": 40, "sizes": sizes}, timeouts={"work": 60}, default_timeout_s=60)
    assert result.status == "ok", (result.status, result.detail)
    got = result.of_kind("from-thread")
    assert sorted((m["thread"], m["i"]) for m in got) == [(t, i) for t in range(4) for i in range(40)]
    assert all(m["data"] == b"\x5a" * sizes[m["i"] % len(sizes)] for m in got)
