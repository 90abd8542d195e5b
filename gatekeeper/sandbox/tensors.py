"""Tensors across the channel as raw bytes plus metadata: no pickle in either direction.

`pack` runs in a worker (it imports torch); `unpack` runs in a trusted process and accepts
only the dtypes listed here. A tensor of at least `spill.threshold()` bytes travels as a file
(gatekeeper.sandbox.spill): its packed form carries `file` (a signed descriptor) instead of
`data` in a worker, and `data` is a verified `spill.FileData` once the parent adopted it.
"""

from __future__ import annotations

import ctypes
import hashlib
from typing import Any

DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64",
           "bool", "complex64", "complex128")


def dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def pack(tensor: Any) -> dict[str, Any]:
    """A dense copy of the tensor's values (on CPU), with where it lived and how it was laid out."""
    import torch

    from gatekeeper.sandbox import spill

    packed = {
        "__tensor__": True,
        "dtype": dtype_name(tensor.dtype),
        "shape": list(tensor.shape),
        "stride": list(tensor.stride()),
        "device": str(tensor.device),
    }
    if spill.should_spill(tensor.numel() * tensor.element_size()):
        packed["file"] = spill.write(tensor)  # streamed: no full host copy of a GPU tensor
        return packed
    dense = tensor.detach()
    if dense.device.type != "cpu":
        dense = dense.cpu()
    packed["data"] = raw_bytes(dense)
    return packed


def raw_bytes(tensor: Any) -> bytes:
    """The values of a CPU tensor as bytes, in row-major order (ctypes copy: fast, no numpy)."""
    dense = tensor.contiguous()
    size = dense.numel() * dense.element_size()
    if size == 0:
        return b""
    return ctypes.string_at(dense.data_ptr(), size)


def digest(tensor: Any) -> str:
    """sha256 of the tensor's row-major bytes, for before/after comparisons (streamed in
    bounded pieces: a large GPU tensor is never copied to the host whole)."""
    from gatekeeper.sandbox.spill import tensor_digest

    if tensor.numel() * tensor.element_size() <= (1 << 24):
        return hashlib.sha256(raw_bytes(tensor.detach().cpu())).hexdigest()
    return tensor_digest(tensor)


def is_packed(value: Any) -> bool:
    return isinstance(value, dict) and value.get("__tensor__") is True


def unpack(packed: dict[str, Any], device: str = "cpu") -> Any:
    import torch

    name = packed["dtype"]
    if name not in DTYPES:
        raise ValueError(f"unsupported dtype {name!r}")
    dtype = getattr(torch, name)
    shape = [int(s) for s in packed["shape"]]
    if "file" in packed:  # a worker receiving a large tensor: read straight into its storage
        from gatekeeper.sandbox.spill import read_into

        return read_into(packed["file"], torch.empty(shape, dtype=dtype, device=device))
    data = packed["data"]
    from gatekeeper.sandbox.spill import FileData

    if isinstance(data, FileData):  # the parent: a private copy (compare.py reads it in chunks instead)
        return data.tensor(dtype).clone().reshape(shape).to(device)
    tensor = torch.empty(shape, dtype=dtype)
    raw = memoryview(data).cast("B")  # bytes or a read-only view of a received frame
    size = tensor.numel() * tensor.element_size()
    if raw.nbytes != size:
        raise ValueError(f"{raw.nbytes} bytes of data for a {name} tensor of shape {shape} ({size} bytes)")
    if size:  # one copy, straight into the new tensor's storage
        from gatekeeper.sandbox.spill import _host_view

        _host_view(tensor.view(-1).view(torch.uint8))[:] = raw
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


def pack_output(out: Any) -> Any:
    """A forward call's output as the parent compares it: a tensor, or a list or tuple of
    tensors, packed; None for anything else."""
    import torch

    if isinstance(out, torch.Tensor):
        return pack_tree(out)
    if isinstance(out, (list, tuple)) and all(isinstance(t, torch.Tensor) for t in out):
        return [pack(t) for t in out]
    return None


def unpack_tree(value: Any, device: str = "cpu", consume: bool = False) -> Any:
    """`consume`: a worker reads these tensors for the last time; their transfer files go
    once read (a multi-GiB input then occupies the disk only while it is needed)."""
    if is_packed(value):
        tensor = unpack(value, device)
        if consume and isinstance(value.get("file"), dict):
            from gatekeeper.sandbox.spill import discard

            discard(value["file"])
        return tensor
    if isinstance(value, list):
        return [unpack_tree(v, device, consume) for v in value]
    if isinstance(value, dict):
        return {k: unpack_tree(v, device, consume) for k, v in value.items()}
    return value
