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


def encode(header: dict[str, Any], blobs: list[bytes]) -> bytes:
    header = dict(header)
    header["blobs"] = [len(b) for b in blobs]
    head = json.dumps(header, separators=(",", ":"), allow_nan=True).encode("utf-8")
    return struct.pack(">I", len(head)) + head + b"".join(blobs)


def decode(payload: bytes) -> dict[str, Any]:
    if len(payload) < 4:
        raise ChannelError("short payload")
    (head_len,) = struct.unpack(">I", payload[:4])
    try:
        header = json.loads(payload[4 : 4 + head_len].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ChannelError(f"bad header: {exc}") from None
    if not isinstance(header, dict):
        raise ChannelError("header is not an object")
    blobs: list[bytes] = []
    offset = 4 + head_len
    for size in header.pop("blobs", []):
        if not isinstance(size, int) or size < 0 or offset + size > len(payload):
            raise ChannelError("blob sizes do not match the payload")
        blobs.append(payload[offset : offset + size])
        offset += size
    return _attach(header, blobs)


def _attach(value: Any, blobs: list[bytes]) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__blob__"}:
            index = value["__blob__"]
            if not isinstance(index, int) or not 0 <= index < len(blobs):
                raise ChannelError("blob index out of range")
            return blobs[index]
        return {k: _attach(v, blobs) for k, v in value.items()}
    if isinstance(value, list):
        return [_attach(v, blobs) for v in value]
    return value


def extract_blobs(value: Any, blobs: list[bytes]) -> Any:
    """Replace bytes anywhere in `value` with blob references, appending to `blobs`."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        blobs.append(bytes(value))
        return {"__blob__": len(blobs) - 1}
    if isinstance(value, dict):
        return {str(k): extract_blobs(v, blobs) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [extract_blobs(v, blobs) for v in value]
    return value


def pack_message(message: dict[str, Any]) -> bytes:
    blobs: list[bytes] = []
    header = extract_blobs(message, blobs)
    return encode(header, blobs)


def frame(mac: "hmac.HMAC", payload: bytes) -> bytes:
    signer = mac.copy()
    signer.update(payload)
    return struct.pack(">Q", len(payload)) + signer.digest() + payload


class FrameReader:
    """Parent side: accumulates bytes, yields verified messages."""

    def __init__(self, secret: bytes) -> None:
        self._mac = hmac.new(secret, digestmod=hashlib.sha256)
        self._secret: Optional[bytes] = secret  # handed to the worker once, then dropped
        self._buffer = bytearray()

    def secret_prefix(self) -> bytes:
        secret, self._secret = self._secret, None
        if secret is None:
            raise ChannelError("the secret was already handed out")
        return secret

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buffer.extend(data)
        out: list[dict[str, Any]] = []
        while True:
            message = self._next()
            if message is None:
                return out
            out.append(message)

    def pending(self) -> int:
        return len(self._buffer)

    def _next(self) -> Optional[dict[str, Any]]:
        if len(self._buffer) < 8 + MAC_BYTES:
            return None
        (size,) = struct.unpack(">Q", self._buffer[:8])
        if size > MAX_FRAME:
            raise ChannelError(f"frame length {size} is implausible")
        end = 8 + MAC_BYTES + size
        if len(self._buffer) < end:
            return None
        mac = bytes(self._buffer[8 : 8 + MAC_BYTES])
        payload = bytes(self._buffer[8 + MAC_BYTES : end])
        del self._buffer[:end]
        check = self._mac.copy()
        check.update(payload)
        if not hmac.compare_digest(mac, check.digest()):
            raise ChannelError("a frame failed authentication (not signed with this run's secret)")
        return decode(payload)
