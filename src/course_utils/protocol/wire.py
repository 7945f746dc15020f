"""Plain data on the wire between the grader's checker and a student's kernel.

The checker (trusted) and the kernel (the student's, untrusted) exchange JSON. Values that
cross are data only: ``None``, booleans, numbers, strings, bytes, tensors and numpy arrays
(raw bytes, dtype, shape, device, ``requires_grad``), dtypes, devices, slices and the
containers list / tuple / dict of those. Anything else stays where it lives and crosses as a
*handle* (an integer the owner resolves), with its type's name for error messages.
Nothing is ever unpickled from the kernel.

Each side supplies ``handle_of(obj) -> dict`` for values it cannot send and
``resolve(tag: dict) -> obj`` for the handles it receives.
"""

from __future__ import annotations

import base64
import math
from typing import Any, Callable

import numpy as np
import torch

__all__ = ["encode", "decode", "WireError", "MAX_BYTES"]

# the largest tensor/array one message may carry (the grader's memory, not the kernel's, is at stake)
MAX_BYTES = 256 * 2**20


class WireError(ValueError):
    """A message that is not the plain data this protocol carries."""


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _torch_dtype(name: Any) -> torch.dtype:
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype):
        raise WireError(f"unknown dtype {name!r}")
    return dtype


def _tensor_payload(t: torch.Tensor, handle_of: Callable[[Any], dict]) -> dict:
    t = t.detach()
    out: dict[str, Any] = {
        "dtype": _dtype_name(t.dtype),
        "shape": list(t.shape),
        "device": t.device.type,
        "rg": False,
        "stride": list(t.stride()),
    }
    if t.device.type != "meta":
        flat = torch.empty(t.numel(), dtype=t.dtype, device="cpu").copy_(t.cpu().reshape(-1))  # stride 1, whatever t's strides
        raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
        if len(raw) > MAX_BYTES:
            raise WireError(f"a tensor of {len(raw)} bytes is too large to send")
        out["data"] = base64.b64encode(raw).decode("ascii")
    return out


def encode(value: Any, handle_of: Callable[[Any], dict], depth: int = 0,
           known: Callable[[Any], dict | None] | None = None) -> Any:
    """``value`` as JSON-ready data; what is not data goes through ``handle_of``. ``known`` may
    name a value the other side already holds (a tensor it sent: it gets its own object back)."""
    if depth > 50:
        raise WireError("nested too deeply")
    if known is not None and (isinstance(value, torch.Tensor) or (type(value) in (dict, list, tuple) and len(value) > 1000)):
        tag = known(value)  # a tensor or a large table the other side already holds
        if tag is not None:
            return tag
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and type(value) in (int, bool):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, torch.Tensor) and type(value) in (torch.Tensor, torch.nn.Parameter):
        payload = _tensor_payload(value, handle_of)
        payload["rg"] = bool(value.requires_grad)
        payload["param"] = isinstance(value, torch.nn.Parameter)
        payload["id"] = id(value)
        if value.is_leaf and value.grad is not None:
            payload["grad"] = _tensor_payload(value.grad, handle_of)
        return {"$tensor": payload}
    if isinstance(value, np.ndarray) and value.dtype.kind in "biufc?":
        raw = np.ascontiguousarray(value).tobytes()
        if len(raw) > MAX_BYTES:
            raise WireError(f"an array of {len(raw)} bytes is too large to send")
        return {"$array": {"dtype": value.dtype.str, "shape": list(value.shape),
                           "data": base64.b64encode(raw).decode("ascii")}}
    if isinstance(value, np.generic) and value.dtype.kind in "biufc?":
        return {"$npscalar": encode(np.asarray(value), handle_of, depth + 1)}
    if type(value) is complex:
        return {"$complex": [value.real, value.imag]}
    if type(value) is bytes:
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, torch.Generator) and value.device.type == "cpu":
        state = value.get_state().numpy().tobytes()
        return {"$generator": base64.b64encode(state).decode("ascii")}
    if isinstance(value, torch.dtype):
        return {"$dtype": _dtype_name(value)}
    if isinstance(value, torch.device):
        return {"$device": str(value)}
    if isinstance(value, torch.Size):
        return {"$size": list(value)}
    if type(value) is slice:
        return {"$slice": [encode(value.start, handle_of, depth + 1, known), encode(value.stop, handle_of, depth + 1, known),
                           encode(value.step, handle_of, depth + 1, known)]}
    if value is Ellipsis:
        return {"$ellipsis": True}
    if type(value) is list:
        return {"$list": [encode(v, handle_of, depth + 1, known) for v in value]}
    if type(value) is tuple:
        return {"$tuple": [encode(v, handle_of, depth + 1, known) for v in value]}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple: its fields, as a tuple
        return {"$tuple": [encode(v, handle_of, depth + 1, known) for v in value]}
    if type(value) is dict:
        return {"$dict": [[encode(k, handle_of, depth + 1, known), encode(v, handle_of, depth + 1, known)] for k, v in value.items()]}
    return handle_of(value)


def _decode_tensor(payload: dict) -> torch.Tensor:
    dtype = _torch_dtype(payload.get("dtype"))
    shape = [int(n) for n in payload.get("shape", [])]
    if any(n < 0 for n in shape):
        raise WireError("negative size")
    if payload.get("device") == "meta" or "data" not in payload:
        itemsize = torch.empty((), dtype=dtype, device="meta").element_size()
        if math.prod(shape) * itemsize > MAX_BYTES:  # no data, but as large as the largest real tensor at most
            raise WireError(f"a meta tensor of shape {shape[:8]} is larger than {MAX_BYTES >> 20} MiB")
        return torch.empty(shape, dtype=dtype, device="meta")
    raw = base64.b64decode(payload["data"])
    numel = math.prod(shape)
    itemsize = torch.empty((), dtype=dtype, device="cpu").element_size()
    if len(raw) != numel * itemsize:
        raise WireError(f"a tensor of shape {shape} and dtype {dtype} needs {numel * itemsize} bytes, got {len(raw)}")
    if numel == 0:
        return torch.empty(shape, dtype=dtype, device="cpu")
    values = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape).clone()
    return _with_strides(values, payload.get("stride"))


def _with_strides(values: torch.Tensor, stride: Any) -> torch.Tensor:
    """``values`` laid out with the sender's strides (a transposed input stays non-contiguous, an
    expanded one keeps its zero strides), so layout mistakes (``x.view``) show on both sides."""
    if not isinstance(stride, list) or len(stride) != values.dim() or stride == list(values.stride()):
        return values
    if not all(isinstance(s, int) and 0 <= s <= 2**40 for s in stride):
        raise WireError("bad strides")
    expanded = [d for d, s in enumerate(stride) if s == 0 and values.shape[d] > 1]
    # the storage those strides span: a transposed or sliced layout spans about its own size; strides that
    # would make a few bytes of data occupy gigabytes here (the red team's amplification) keep the values
    # contiguous instead
    span = 1 + sum((n - 1) * s for n, s in zip(values.shape, stride) if n > 0)
    if span > max(8 * values.numel(), 4096) or span * values.element_size() > MAX_BYTES:
        return values
    base = values
    for d in expanded:
        base = base.narrow(d, 0, 1)
    base_stride = [1 if d in expanded else s for d, s in enumerate(stride)]
    try:
        out = torch.empty_strided(tuple(base.shape), tuple(base_stride), dtype=values.dtype, device="cpu")
        out.copy_(base)
    except RuntimeError:  # strides that overlap: keep the values, contiguous
        return values
    return out.expand(values.shape) if expanded else out


def decode(data: Any, resolve: Callable[[dict], Any], depth: int = 0,
           same: Callable[[dict, torch.Tensor], torch.Tensor] | None = None) -> Any:
    """The value ``encode`` made; tags this module does not know go to ``resolve``. ``same`` may
    map a tensor to the object this side already holds for it (identity across messages)."""
    if depth > 50:
        raise WireError("nested too deeply")
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):  # bare JSON lists only appear inside tags
        raise WireError("an untagged list")
    if not isinstance(data, dict) or len(data) < 1:
        raise WireError(f"not a value: {type(data).__name__}")
    if "$tensor" in data:
        payload = data["$tensor"]
        t = _decode_tensor(payload)
        if payload.get("device") == "cuda" and torch.cuda.is_available():
            t = t.to("cuda")
        if payload.get("param") and t.is_floating_point():
            t = torch.nn.Parameter(t, requires_grad=bool(payload.get("rg")))
        elif payload.get("rg") and (t.is_floating_point() or t.is_complex()):
            t.requires_grad_(True)
        if "grad" in payload and t.is_leaf:
            grad = _decode_tensor(payload["grad"])
            if grad.shape == t.shape and grad.dtype == t.dtype:
                t.grad = grad.to(t.device)
        return same(payload, t) if same is not None else t
    if "$array" in data:
        payload = data["$array"]
        dtype = np.dtype(str(payload["dtype"]))
        if dtype.kind not in "biufc?":
            raise WireError(f"arrays of {dtype} are not data")
        raw = base64.b64decode(payload["data"])
        return np.frombuffer(raw, dtype=dtype).reshape([int(n) for n in payload["shape"]]).copy()
    if "$npscalar" in data:
        return decode(data["$npscalar"], resolve, depth + 1, same)[()]
    if "$float" in data:
        return float(str(data["$float"]))
    if "$complex" in data:
        real, imag = data["$complex"]
        return complex(float(real), float(imag))
    if "$bytes" in data:
        return base64.b64decode(data["$bytes"])
    if "$generator" in data:
        generator = torch.Generator()
        state = torch.frombuffer(bytearray(base64.b64decode(data["$generator"])), dtype=torch.uint8).clone()
        try:
            generator.set_state(state)
        except RuntimeError as error:
            raise WireError(f"not a generator state: {error}") from None
        return generator
    if "$dtype" in data:
        return _torch_dtype(data["$dtype"])
    if "$device" in data:
        return torch.device(str(data["$device"]))
    if "$size" in data:
        return torch.Size([int(n) for n in data["$size"]])
    if "$slice" in data:
        return slice(*(decode(v, resolve, depth + 1, same) for v in data["$slice"]))
    if "$ellipsis" in data:
        return Ellipsis
    if "$list" in data:
        return [decode(v, resolve, depth + 1, same) for v in data["$list"]]
    if "$tuple" in data:
        return tuple(decode(v, resolve, depth + 1, same) for v in data["$tuple"])
    if "$dict" in data:
        return {decode(k, resolve, depth + 1, same): decode(v, resolve, depth + 1, same) for k, v in data["$dict"]}
    return resolve(data)
