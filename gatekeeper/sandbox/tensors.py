"""Tensors across the channel as raw bytes plus metadata: no pickle in either direction.

`pack` runs in a worker (it imports torch); `unpack` runs in a trusted process and accepts
only the dtypes listed here.
"""

from __future__ import annotations

import ctypes
import hashlib
from typing import Any

_DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64",
           "bool", "complex64", "complex128")


def dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def pack(tensor: Any) -> dict[str, Any]:
    """A dense copy of the tensor's values (on CPU), with where it lived and how it was laid out."""
    import torch

    dense = tensor.detach()
    if dense.device.type != "cpu":
        dense = dense.cpu()
    return {
        "__tensor__": True,
        "dtype": dtype_name(tensor.dtype),
        "shape": list(tensor.shape),
        "stride": list(tensor.stride()),
        "device": str(tensor.device),
        "data": raw_bytes(dense),
    }


def raw_bytes(tensor: Any) -> bytes:
    """The values of a CPU tensor as bytes, in row-major order (ctypes copy: fast, no numpy)."""
    dense = tensor.contiguous()
    size = dense.numel() * dense.element_size()
    if size == 0:
        return b""
    return ctypes.string_at(dense.data_ptr(), size)


def digest(tensor: Any) -> str:
    """sha256 of the tensor's bytes (dense copy), for before/after comparisons."""
    return hashlib.sha256(pack(tensor)["data"]).hexdigest()


def is_packed(value: Any) -> bool:
    return isinstance(value, dict) and value.get("__tensor__") is True


def unpack(packed: dict[str, Any], device: str = "cpu") -> Any:
    import torch

    name = packed["dtype"]
    if name not in _DTYPES:
        raise ValueError(f"unsupported dtype {name!r}")
    dtype = getattr(torch, name)
    shape = [int(s) for s in packed["shape"]]
    data = packed["data"]
    if not data:
        return torch.empty(shape, dtype=dtype, device=device)
    flat = torch.frombuffer(bytearray(data), dtype=dtype)
    tensor = flat.reshape(shape).clone()
    return tensor.to(device) if device != "cpu" else tensor


def pack_tree(value: Any) -> Any:
    """Tensors anywhere inside lists, tuples and dicts become packed dicts."""
    import torch

    if isinstance(value, torch.Tensor):
        return pack(value)
    if isinstance(value, (list, tuple)):
        return [pack_tree(v) for v in value]
    if isinstance(value, dict):
        return {str(k): pack_tree(v) for k, v in value.items()}
    return value


def unpack_tree(value: Any, device: str = "cpu") -> Any:
    if is_packed(value):
        return unpack(value, device)
    if isinstance(value, list):
        return [unpack_tree(v, device) for v in value]
    if isinstance(value, dict):
        return {k: unpack_tree(v, device) for k, v in value.items()}
    return value
