"""A probe of what a call allocates: every tensor its operators create, the live peak, and the
reductions (max, sum, ...) it takes with their widths. Notebook 13's tests use it to prove that
tiled attention never builds a ``T_q x T_k`` tensor and that the online softmax reads a row one
block at a time.

``tracemalloc`` sees nothing of torch's CPU tensors and ``torch.profiler`` reports allocations per
operator, not what is alive at once; a ``TorchDispatchMode`` sees every tensor every ATen operator
returns, on any device, whatever Python code called it.

While a notebook is graded the student's functions run in their kernel, not in the checker: like
the device probes of :mod:`course_utils.checks.probes`, entering an :class:`AllocationLog`
registers it in ``REMOTE_MODES``, the kernel's agent records the call under its own log and sends
the summary (:meth:`AllocationLog.report`) back, and :meth:`AllocationLog.absorb` adds it to this one.
From the first report on, the log holds the kernel's records only: what the checker's own process
allocates meanwhile is the protocol's work (encoding inputs, decoding replies), not the answer's.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from course_utils.protocol.messages import REMOTE_MODES, Mode, tensors_in

__all__ = ["AllocationLog"]

# ATen reductions whose width is recorded: name -> kind ("max" or "sum")
_REDUCTIONS = {"amax": "max", "max": "max", "amin": "max", "min": "max", "sum": "sum", "mean": "sum",
               "logsumexp": "sum", "_softmax": "sum", "_log_softmax": "sum", "nansum": "sum", "prod": "sum"}
_MAX_RECORDED = 20_000  # reductions kept in order (a long Python loop records more; they are counted)
# ATen matrix products whose operands' dtypes are counted
_PRODUCTS = frozenset({"mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "mv", "addmv", "dot", "vdot",
                       "linear", "_addmm_activation"})


def _reduced_width(name: str, args: tuple, kwargs: dict) -> int | None:
    """How many entries one output element of a reduction reads (``None``: not a reduction)."""
    if name not in _REDUCTIONS or not args or not isinstance(args[0], torch.Tensor):
        return None
    x = args[0]
    dims: Any = args[1] if len(args) > 1 else kwargs.get("dim")
    if isinstance(dims, torch.Tensor):  # max.other / min.other: elementwise, not a reduction
        return None
    if dims is None or dims == [] or dims == ():
        return x.numel()
    dims = [dims] if isinstance(dims, int) else list(dims)
    if x.dim() == 0:
        return 1
    return math.prod(x.shape[d] for d in dims)


def _unpack(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


class AllocationLog(TorchDispatchMode):
    """``with AllocationLog() as log: fn(...)``, then:

    - ``log.largest``: elements of the largest tensor any operator created (``log.largest_shape``,
      ``log.largest_op`` say which); views and in-place results share their input's storage and
      are not new tensors;
    - ``log.peak_bytes`` / ``log.total_bytes``: the most bytes of new tensors alive at once, and
      all bytes created;
    - ``log.reductions``: ``(kind, width)`` of each max-like (``"max"``) and sum-like (``"sum"``)
      reduction, in order (``width``: entries one result reads), and ``log.n_reductions``;
    - ``log.ops``: how many times each ATen operator ran;
    - ``log.product_dtypes``: how many operands of matrix products (``mm``, ``bmm``, ``addmm``, ...)
      had each dtype (``"torch.float32"``: count), so a test can see a product computed in bfloat16;
    - ``log.saved``: ``(shape, dtype)`` of each tensor autograd packed for a backward pass while the
      log was open (``ctx.save_for_backward`` of a custom ``Function`` included, a tensor kept as a
      plain ``ctx`` attribute not), seen through ``torch.autograd.graph.saved_tensors_hooks``;
    - ``log.live_bytes``: bytes of the tensors the operators created that are still alive (read it
      while the call's results are kept: what a forward leaves behind for its backward).

    Slow (Python bookkeeping per operator): never time code inside it.
    """

    remote = (Mode.ALLOCATIONS,)

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0
        self.largest_shape: tuple[int, ...] = ()
        self.largest_op = ""
        self.peak_bytes = self.total_bytes = self._now = 0
        self.reductions: list[tuple[str, int]] = []
        self.n_reductions = 0
        self.ops: dict[str, int] = {}
        self.product_dtypes: dict[str, int] = {}
        self.saved: list[tuple[tuple[int, ...], str]] = []
        self._live: dict[tuple[str, int], int] = {}
        self._remote = False  # a report from the kernel was absorbed: local operators no longer count
        self._remote_live = 0
        self._hooks: Any = None

    @property
    def live_bytes(self) -> int:
        """Bytes of the tensors created under the log that are alive now (the kernel's count when it
        reported, while graded)."""
        return self._remote_live if self._remote else self._now

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        if not self._remote and len(self.saved) < _MAX_RECORDED:
            self.saved.append((tuple(tensor.shape), str(tensor.dtype)))
        # detached (same storage, same version counter): the tensor itself would tie a saved output to its own
        # grad_fn, a cycle through C++ that no garbage collection frees when backward never runs
        return tensor.detach()

    def __enter__(self) -> "AllocationLog":
        REMOTE_MODES.enter(self.remote, self)
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
        self._hooks.__enter__()
        return super().__enter__()

    def __exit__(self, *exc: Any) -> Any:
        REMOTE_MODES.leave(self)
        try:
            return super().__exit__(*exc)
        finally:
            hooks, self._hooks = self._hooks, None
            if hooks is not None:
                hooks.__exit__(None, None, None)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self._remote:
            return out
        name = func.overloadpacket.__name__
        self.ops[name] = self.ops.get(name, 0) + 1
        if name in _PRODUCTS:
            for operand in tensors_in((args, kwargs)):
                key = str(operand.dtype)
                self.product_dtypes[key] = self.product_dtypes.get(key, 0) + 1
        width = _reduced_width(name, args, kwargs)
        if width is not None:
            self.n_reductions += 1
            if len(self.reductions) < _MAX_RECORDED:
                self.reductions.append((_REDUCTIONS[name], int(width)))
        inputs = {(str(t.device), t.untyped_storage().data_ptr()) for t in tensors_in((args, kwargs))}
        for value in tensors_in(out):
            self._record(value, name, inputs)
        return out

    def _record(self, value: torch.Tensor, op: str, inputs: set[tuple[str, int]]) -> None:
        storage = value.untyped_storage()
        nbytes = storage.nbytes()
        key = (str(value.device), storage.data_ptr())
        if nbytes == 0 or key in self._live or key in inputs:
            return  # a view, or an in-place result, of a storage that already existed
        elements = nbytes // max(value.element_size(), 1)
        if elements > self.largest:
            self.largest, self.largest_shape, self.largest_op = elements, tuple(value.shape), op
        self._live[key] = nbytes
        self._now += nbytes
        self.total_bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self._now)
        if value.device.type != "meta":
            weakref.finalize(storage, self._free, key)

    def _free(self, key: tuple[str, int]) -> None:
        nbytes = self._live.pop(key, None)
        if nbytes is not None:
            self._now -= nbytes

    def report(self) -> dict[str, Any]:
        """The summary as plain data (what the kernel sends the checker)."""
        return {"largest": self.largest, "largest_shape": list(self.largest_shape), "largest_op": self.largest_op,
                "peak_bytes": self.peak_bytes, "total_bytes": self.total_bytes,
                "reductions": [list(r) for r in self.reductions], "n_reductions": self.n_reductions, "ops": dict(self.ops),
                "product_dtypes": dict(self.product_dtypes), "saved": [[list(shape), dtype] for shape, dtype in self.saved],
                "live_bytes": self.live_bytes}

    def absorb(self, report: Any) -> None:
        """Add a call's :meth:`report` from another process (the kernel, while graded); a malformed
        report adds nothing."""
        try:
            self._absorb(report)
        except (TypeError, ValueError, AttributeError):
            pass

    def _absorb(self, report: Any) -> None:
        if not isinstance(report, dict):
            return
        if not self._remote:  # from now on the answers run in the kernel: what this process allocated
            self._remote = True  # was the protocol's own work (encoding inputs, decoding replies)
            self.largest, self.largest_shape, self.largest_op = 0, (), ""
            self.peak_bytes = self.total_bytes = 0
            self.reductions, self.n_reductions, self.ops = [], 0, {}
            self.product_dtypes, self.saved, self._remote_live = {}, [], 0
        largest = int(report.get("largest", 0))
        if largest > self.largest:
            self.largest = largest
            self.largest_shape = tuple(int(n) for n in report.get("largest_shape", ()))
            self.largest_op = str(report.get("largest_op", ""))
        self.peak_bytes = max(self.peak_bytes, int(report.get("peak_bytes", 0)))
        self.total_bytes += int(report.get("total_bytes", 0))
        for kind, width in list(report.get("reductions", []))[:_MAX_RECORDED]:
            if len(self.reductions) < _MAX_RECORDED:
                self.reductions.append((str(kind), int(width)))
        self.n_reductions += int(report.get("n_reductions", 0))
        for name, count in dict(report.get("ops", {})).items():
            self.ops[str(name)] = self.ops.get(str(name), 0) + int(count)
        for name, count in dict(report.get("product_dtypes", {})).items():
            self.product_dtypes[str(name)] = self.product_dtypes.get(str(name), 0) + int(count)
        for shape, dtype in list(report.get("saved", []))[:_MAX_RECORDED]:
            if len(self.saved) < _MAX_RECORDED:
                self.saved.append((tuple(int(n) for n in shape), str(dtype)))
        self._remote_live += int(report.get("live_bytes", 0))
