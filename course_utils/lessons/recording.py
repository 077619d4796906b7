"""What a check records when a lab is graded: plain data, checked again outside the kernel.

A graded hand-in controls its kernel completely, so the grader does not take the kernel's word
that a check passed. When ``COURSE_UTILS_CHECKS`` is ``record`` (set by the grader, never by a
student's JupyterLab), each check publishes the value it was given, as plain data in an output
of its own MIME type, and compares nothing; in the solution's run (``reference``) it checks as
usual and publishes the expected value instead. The grader compares the two with its own copy
of the checks. The encoding reads values through the C-level methods of the built-in types, so
an object that lies about itself (``__eq__``, ``__repr__``, ``__torch_function__``) is recorded
as what it is.
"""

from __future__ import annotations

import base64
import math
import os

import numpy as np
import torch

MIME = "application/vnd.course-utils.check+json"
MODE_ENV = "COURSE_UTILS_CHECKS"
RECORD = "record"  # a graded hand-in: publish what was got, compare nothing
REFERENCE = "reference"  # the solution's run: check as usual, publish what was expected
MAX_ELEMENTS = 100_000  # per tensor or array; a larger value is recorded as too large
MAX_ITEMS = 10_000  # per list, tuple or dict
MAX_DEPTH = 12


class Unreadable(ValueError):
    """A record that is not what ``to_plain`` writes (a forged or cut-short output)."""


def mode() -> str:
    """``record``, ``reference`` or "" (checking as usual, in a student's notebook)."""
    return os.environ.get(MODE_ENV, "")


def publish(record: dict) -> None:
    """Send ``record`` as an output of the cell that is running."""
    from IPython.display import display

    display({MIME: record}, raw=True)


def to_plain(value, depth: int = 0):
    """``value`` as JSON data that :func:`from_plain` turns back into an equal value."""
    if depth > MAX_DEPTH:
        return {"too_deep": MAX_DEPTH}
    if value is None or value is True or value is False:
        return value
    if isinstance(value, torch.Tensor):
        return _tensor_to_plain(value)
    if isinstance(value, np.ndarray):
        return _array_to_plain(value)
    if isinstance(value, np.generic):
        return {"npscalar": np.asarray(value).dtype.str, "bytes": _b64(value.tobytes())}
    if isinstance(value, int):
        return {"int": str(int.__index__(value))}
    if isinstance(value, float):
        return {"float": float.__repr__(value)}
    if isinstance(value, complex):
        return {"complex": [float.__repr__(value.real), float.__repr__(value.imag)]}
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, (list, tuple)):
        items = (
            list.copy(value) if isinstance(value, list) else tuple.__getitem__(value, slice(None))
        )
        if len(items) > MAX_ITEMS:
            return {"too_large": len(items)}
        plain = [to_plain(item, depth + 1) for item in items]
        return plain if isinstance(value, list) else {"tuple": plain}
    if isinstance(value, (set, frozenset)):
        items = list(
            frozenset.__iter__(value) if isinstance(value, frozenset) else set.__iter__(value)
        )
        if len(items) > MAX_ITEMS:
            return {"too_large": len(items)}
        plain = [to_plain(item, depth + 1) for item in items]
        return {"frozenset" if isinstance(value, frozenset) else "set": plain}
    if isinstance(value, dict):
        items = list(dict.items(value))
        if len(items) > MAX_ITEMS:
            return {"too_large": len(items)}
        return {"dict": [[to_plain(k, depth + 1), to_plain(v, depth + 1)] for k, v in items]}
    return {"object": type(value).__name__}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _tensor_to_plain(value: torch.Tensor):
    with torch._C.DisableTorchFunctionSubclass():
        tensor = torch.Tensor.detach(value)
        shape = [int(n) for n in tensor.shape]
        if math.prod(shape) > MAX_ELEMENTS:
            return {"too_large": math.prod(shape)}
        head = {"tensor": str(tensor.dtype).removeprefix("torch."), "shape": shape}
        if tensor.device.type == "meta":
            return {**head, "meta": True}
        flat = tensor.cpu().reshape(-1).contiguous()
        return {**head, "bytes": _b64(flat.view(torch.uint8).numpy().tobytes())}


def _array_to_plain(value: np.ndarray):
    if value.dtype.hasobject:
        return {"object": "ndarray of objects"}
    if value.size > MAX_ELEMENTS:
        return {"too_large": int(value.size)}
    data = np.ascontiguousarray(value).tobytes()
    return {"ndarray": value.dtype.str, "shape": list(value.shape), "bytes": _b64(data)}


def from_plain(data, depth: int = 0):
    """The value :func:`to_plain` recorded; :class:`Unreadable` for anything it cannot write."""
    if depth > MAX_DEPTH + 1:
        raise Unreadable("nested too deeply")
    if data is None or isinstance(data, (bool, str)):
        return data
    if isinstance(data, list):
        return [from_plain(item, depth + 1) for item in data]
    if not isinstance(data, dict) or len(data) == 0:
        raise Unreadable(f"unexpected {type(data).__name__}")
    tags = [key for key in data if key in _DECODERS]
    if len(tags) != 1:
        raise Unreadable(f"no single tag among {sorted(data)[:5]}")
    tag = tags[0]
    try:
        return _DECODERS[tag](data, depth)
    except (KeyError, AttributeError, TypeError, ValueError, OverflowError, RuntimeError) as exc:
        raise Unreadable(f"bad {tag}: {exc}") from None


class TooLarge:
    """Stands in for a value too large (or too deep) to record."""

    def __init__(self, size: int) -> None:
        self.size = size


def _opaque(name: str):
    safe = "".join(c for c in str(name)[:60] if c.isalnum() or c in "_ ") or "object"
    return type(safe, (), {"__repr__": lambda self: f"<{safe}>"})()


def _decode_tensor(data: dict, depth: int):
    dtype = getattr(torch, str(data["tensor"]))
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"{data['tensor']} is not a dtype")
    shape = [int(n) for n in data["shape"]]
    if any(n < 0 for n in shape) or math.prod(shape) > MAX_ELEMENTS:
        raise ValueError(f"shape {shape}")
    if data.get("meta"):
        return torch.empty(shape, dtype=dtype, device="meta")
    raw = bytearray(base64.b64decode(data["bytes"], validate=True))
    item = torch.empty((), dtype=dtype).element_size()
    if len(raw) != math.prod(shape) * item:
        raise ValueError("byte count does not match the shape")
    if not raw:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape).clone()


def _decode_array(data: dict, depth: int):
    dtype = np.dtype(str(data["ndarray"]))
    if dtype.hasobject:
        raise ValueError("object arrays are not recorded")
    shape = tuple(int(n) for n in data["shape"])
    raw = base64.b64decode(data["bytes"], validate=True)
    if any(n < 0 for n in shape) or len(raw) != math.prod(shape) * dtype.itemsize:
        raise ValueError("byte count does not match the shape")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _decode_scalar(data: dict, depth: int):
    dtype = np.dtype(str(data["npscalar"]))
    if dtype.hasobject:
        raise ValueError("object scalars are not recorded")
    raw = base64.b64decode(data["bytes"], validate=True)
    if len(raw) != dtype.itemsize:
        raise ValueError("byte count does not match the dtype")
    return np.frombuffer(raw, dtype=dtype)[0]


_DECODERS = {
    "int": lambda d, depth: int(str(d["int"])),
    "float": lambda d, depth: float(str(d["float"])),
    "complex": lambda d, depth: complex(float(d["complex"][0]), float(d["complex"][1])),
    "tuple": lambda d, depth: tuple(from_plain(item, depth + 1) for item in d["tuple"]),
    "set": lambda d, depth: {_hashable(from_plain(item, depth + 1)) for item in d["set"]},
    "frozenset": lambda d, depth: frozenset(
        _hashable(from_plain(item, depth + 1)) for item in d["frozenset"]
    ),
    "dict": lambda d, depth: {
        _hashable(from_plain(k, depth + 1)): from_plain(v, depth + 1) for k, v in d["dict"]
    },
    "tensor": _decode_tensor,
    "ndarray": _decode_array,
    "npscalar": _decode_scalar,
    "object": lambda d, depth: _opaque(d["object"]),
    "too_large": lambda d, depth: TooLarge(int(d["too_large"])),
    "too_deep": lambda d, depth: TooLarge(0),
}


def _hashable(key):
    hash(key)  # a TypeError for a list key: the record is not what to_plain writes
    return key
