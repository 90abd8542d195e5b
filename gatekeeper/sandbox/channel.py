"""The authenticated result channel between a sandboxed worker and the parent.

Frame: 8-byte big-endian payload length, 32-byte HMAC-SHA256 of the payload, payload.
Payload: 4-byte header length, a JSON header, then the binary blobs the header lists
(`"blobs": [len, ...]`). Values `{"__blob__": i}` in the header stand for blob i.

The parent never unpickles anything a worker sends: JSON and raw bytes only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
from typing import Any, Optional

MAC_BYTES = 32
MAX_FRAME = 1 << 31  # 2 GiB: a length above this is a forged or corrupted frame


class ChannelError(Exception):
    """A frame failed authentication or was malformed."""


def _blob_size(blob: Any) -> int:
    return memoryview(blob).nbytes


def encode_parts(header: dict[str, Any], blobs: list[Any]) -> list[Any]:
    """The payload as a list of buffers (length prefix and JSON header, then each blob as it
    is): a large tensor is never joined into a second copy on its way to the pipe."""
    header = dict(header)
    header["blobs"] = [_blob_size(b) for b in blobs]
    head = json.dumps(header, separators=(",", ":"), allow_nan=True).encode("utf-8")
    return [struct.pack(">I", len(head)) + head, *blobs]


def decode(payload: Any) -> dict[str, Any]:
    """A payload (bytes or a memoryview) back to its message. A packed tensor's values are a
    read-only view of the payload, not a copy: a 32 MiB output is not duplicated to be read once."""
    view = memoryview(payload).toreadonly()
    if view.nbytes < 4:
        raise ChannelError("short payload")
    (head_len,) = struct.unpack(">I", view[:4])
    try:
        header = json.loads(bytes(view[4 : 4 + head_len]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ChannelError(f"bad header: {exc}") from None
    if not isinstance(header, dict):
        raise ChannelError("header is not an object")
    blobs: list[memoryview] = []
    offset = 4 + head_len
    for size in header.pop("blobs", []):
        if not isinstance(size, int) or size < 0 or offset + size > view.nbytes:
            raise ChannelError("blob sizes do not match the payload")
        blobs.append(view[offset : offset + size])
        offset += size
    return _attach(header, blobs)


def _attach(value: Any, blobs: list[memoryview], view: bool = False) -> Any:
    """Blob references back to data: a packed tensor's values (`{"__tensor__": true, "data":
    ...}`, read only by sandbox.tensors and the judge) stay a read-only view of the frame;
    every other blob becomes bytes, as sent."""
    if isinstance(value, dict):
        if set(value) == {"__blob__"}:
            index = value["__blob__"]
            if not isinstance(index, int) or not 0 <= index < len(blobs):
                raise ChannelError("blob index out of range")
            return blobs[index] if view else bytes(blobs[index])
        tensor = value.get("__tensor__") is True
        return {k: _attach(v, blobs, tensor and k == "data") for k, v in value.items()}
    if isinstance(value, list):
        return [_attach(v, blobs) for v in value]
    return value


def _as_blob(value: Any) -> Any:
    """Immutable bytes go as they are; a read-only memoryview (a received blob) too, as flat
    bytes; anything that could still change before the writer thread sends it is copied."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, memoryview) and value.readonly and value.c_contiguous:
        return value.cast("B") if value.format != "B" or value.ndim != 1 else value
    return bytes(value)


def extract_blobs(value: Any, blobs: list[Any]) -> Any:
    """Replace bytes anywhere in `value` with blob references, appending to `blobs`."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        blobs.append(_as_blob(value))
        return {"__blob__": len(blobs) - 1}
    if isinstance(value, dict):
        return {str(k): extract_blobs(v, blobs) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [extract_blobs(v, blobs) for v in value]
    return value


def pack_parts(message: dict[str, Any]) -> list[Any]:
    blobs: list[Any] = []
    header = extract_blobs(message, blobs)
    return encode_parts(header, blobs)


def pack_message(message: dict[str, Any]) -> bytes:
    return b"".join(pack_parts(message))


def parts_size(parts: list[Any]) -> int:
    return sum(_blob_size(p) for p in parts)


def frame_parts(mac: "hmac.HMAC", parts: list[Any]) -> list[Any]:
    """A signed frame as buffers: length and HMAC first, then the payload's parts unjoined
    (the HMAC of the parts fed in order is the HMAC of their concatenation)."""
    signer = mac.copy()
    for part in parts:
        signer.update(part)
    return [struct.pack(">Q", parts_size(parts)) + signer.digest(), *parts]


class FrameReader:
    """Parent side: accumulates bytes, yields verified messages. A frame's payload is read
    into one buffer of its announced size (no regrowing, no slicing copies), and its blobs
    reach the caller as read-only views of that buffer."""

    def __init__(self, secret: bytes) -> None:
        self._mac = hmac.new(secret, digestmod=hashlib.sha256)
        self._secret: Optional[bytes] = secret  # handed to the worker once, then dropped
        self._head = bytearray()  # the 8-byte length and 32-byte HMAC of the next frame
        self._payload: Optional[bytearray] = None
        self._filled = 0

    def secret_prefix(self) -> bytes:
        secret, self._secret = self._secret, None
        if secret is None:
            raise ChannelError("the secret was already handed out")
        return secret

    def feed(self, data: Any) -> list[dict[str, Any]]:
        view = memoryview(data).cast("B")
        out: list[dict[str, Any]] = []
        pos, end = 0, view.nbytes
        while True:
            if self._payload is None:
                take = min(8 + MAC_BYTES - len(self._head), end - pos)
                self._head += view[pos : pos + take]
                pos += take
                if len(self._head) < 8 + MAC_BYTES:
                    return out
                (size,) = struct.unpack(">Q", self._head[:8])
                if size > MAX_FRAME:
                    raise ChannelError(f"frame length {size} is implausible")
                self._payload, self._filled = bytearray(size), 0  # zero pages: no memory until filled
            payload = self._payload
            take = min(len(payload) - self._filled, end - pos)
            payload[self._filled : self._filled + take] = view[pos : pos + take]
            self._filled += take
            pos += take
            if self._filled < len(payload):
                return out
            out.append(self._verified(payload))
            if pos >= end:
                return out

    def _verified(self, payload: bytearray) -> dict[str, Any]:
        mac = bytes(self._head[8 : 8 + MAC_BYTES])
        self._head, self._payload, self._filled = bytearray(), None, 0
        check = self._mac.copy()
        check.update(payload)
        if not hmac.compare_digest(mac, check.digest()):
            raise ChannelError("a frame failed authentication (not signed with this run's secret)")
        return decode(payload)

    def pending(self) -> int:
        return len(self._head) + self._filled
