"""Reading a GGUF file (llama.cpp's format for weights and tokenizer), with ``struct`` and a memory map.

A GGUF file (spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md; v2/v3, little-endian):

1. a header: ``b"GGUF"``, the version (uint32), the number of tensors and of metadata pairs (uint64);
2. the metadata: ``key (string), value type (uint32), value`` pairs; a string is a uint64 length
   and UTF-8 bytes, an array an item type (uint32), a count (uint64) and the items;
3. the tensor-info table: per tensor ``name (string), n_dims (uint32), dims (n_dims x uint64),
   ggml type (uint32), offset (uint64)``; ``dims`` are in GGML order, fastest-varying first, so an
   ``nn.Linear`` weight ``(out, in)`` is listed ``(in, out)``;
4. padding to ``general.alignment`` (default 32) bytes, then the tensor data; each tensor starts
   at ``data_offset + offset``.

:func:`read_gguf_metadata` reads part 2 (:mod:`course_utils.bpe` uses it for the tokenizer);
:class:`GGUFFile` reads parts 1-3 and hands out the tensor bytes as zero-copy NumPy / torch views
of a copy-on-write memory map (:meth:`GGUFFile.raw`, :meth:`GGUFFile.tensor`). What the bytes of
a quantised tensor mean (Q4_1, Q8_0...) is :mod:`course_utils.gguf_weights`' business. The ``gguf``
package (PyPI) reads the same values more slowly; ``tests/course_utils/test_gguf_file.py`` compares the two.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["GGUFFile", "TensorInfo", "read_gguf_metadata", "GGML_TYPES", "GGML_BLOCK_SIZES"]

# metadata value types: struct format of the scalar ones; 8 = string, 9 = array
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")

# ggml tensor types (gguf.GGMLQuantizationType): id -> name, and (weights per block, bytes per block)
GGML_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
              10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS",
              17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS",
              24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 30: "BF16",
              34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4"}
GGML_BLOCK_SIZES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
                    9: (32, 40), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
                    15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18),
                    21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4),
                    27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66), 39: (32, 17)}
# the unquantised types, as torch dtypes (a tensor of these is a plain array)
_PLAIN = {0: torch.float32, 1: torch.float16, 30: torch.bfloat16, 28: torch.float64,
          24: torch.int8, 25: torch.int16, 26: torch.int32, 27: torch.int64}


class _Cursor:
    """Reads little-endian GGUF values from a buffer, moving ``pos`` forward."""

    def __init__(self, buf, path: str | Path) -> None:
        self.buf, self.path, self.pos = buf, path, 0

    def unpack(self, fmt: str) -> tuple:
        values = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values

    def text(self) -> str:
        """A string that is always read (a key, a tensor's name)."""
        (n,) = self.unpack("Q")
        start, self.pos = self.pos, self.pos + n
        return self.buf[start:self.pos].decode("utf-8", errors="replace")

    def string(self, keep: bool = True) -> str | None:
        if keep:
            return self.text()
        (n,) = self.unpack("Q")
        self.pos += n
        return None

    def value(self, kind: int, keep: bool = True) -> Any:
        """One metadata value of type ``kind`` (arrays as lists); skipped (None) unless ``keep``."""
        if kind in _SCALARS:
            (v,) = self.unpack(_SCALARS[kind])
            return v
        if kind == _STRING:
            return self.string(keep)
        if kind == _ARRAY:
            item_kind, n = self.unpack("IQ")
            if item_kind in _SCALARS:  # n numbers at once (or just skipped)
                fmt = f"<{n}{_SCALARS[item_kind]}"
                values = struct.unpack_from(fmt, self.buf, self.pos) if keep else ()
                self.pos += struct.calcsize(fmt)
                return list(values) if keep else None
            if item_kind == _STRING:  # the tokenizer's ~100k strings: a tight loop
                strings, buf, pos = [], self.buf, self.pos
                for _ in range(n):
                    (m,) = _U64.unpack_from(buf, pos)
                    if keep:
                        strings.append(buf[pos + 8:pos + 8 + m].decode("utf-8", errors="replace"))
                    pos += 8 + m
                self.pos = pos
                return strings if keep else None
            items = [self.value(item_kind, keep) for _ in range(n)]  # arrays of arrays
            return items if keep else None
        raise ValueError(f"{self.path}: unknown GGUF value type {kind} at byte {self.pos}")


def _read_header(buf, path: str | Path, prefix: str) -> tuple[int, int, dict[str, Any], _Cursor]:
    """Parts 1-2: ``(version, n_tensors, metadata, cursor at the tensor-info table)``."""
    if buf[:4] != b"GGUF":
        raise ValueError(f"{path} is not a GGUF file")
    cur = _Cursor(buf, path)
    cur.pos = 4
    version, n_tensors, n_kv = cur.unpack("IQQ")
    if version not in (2, 3):
        raise ValueError(f"{path}: GGUF version {version} (only 2 and 3, little-endian, are read)")
    meta: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cur.text()
        (kind,) = cur.unpack("I")
        keep = key.startswith(prefix) or key.startswith("general.")
        value = cur.value(kind, keep)
        if keep:
            meta[key] = value
    return version, n_tensors, meta, cur


def read_gguf_metadata(path: str | Path, prefix: str = "") -> dict[str, Any]:
    """The key/value metadata of a GGUF file, without its tensors.

    Keys not starting with ``prefix`` are skipped without decoding (``prefix="tokenizer."``);
    ``general.*`` keys are cheap and always read. Arrays come back as lists. The same values as
    ``gguf.GGUFReader(path).fields[key].contents()``, about 50 times faster on SmolLM2's file
    (its 100k tokenizer strings are parsed with ``struct`` directly).
    """
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        return _read_header(buf, path, prefix)[2]


@dataclass(frozen=True)
class TensorInfo:
    """One row of the tensor-info table. ``shape`` is in GGUF order (fastest-varying first:
    ``(in, out)`` for a Linear weight); ``offset`` is the absolute byte offset in the file."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int
    nbytes: int

    @property
    def type_name(self) -> str:
        return GGML_TYPES.get(self.ggml_type, f"type {self.ggml_type}")

    @property
    def n_elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def torch_shape(self) -> tuple[int, ...]:
        """The shape in PyTorch (row-major) order, the reverse of ``shape``: ``(out, in)``."""
        return tuple(reversed(self.shape))


class GGUFFile:
    """A GGUF file's metadata and tensor table; tensor data on demand, as views of a memory map.

    ``GGUFFile(path, prefix="")``: ``version``, ``metadata`` (dict; keys not starting with
    ``prefix`` and not ``general.*`` are skipped), ``tensors`` (dict name -> :class:`TensorInfo`,
    in file order), ``alignment`` and ``data_offset`` (where tensor data starts). The data is
    mapped copy-on-write: views are writable, and writing to them never changes the file.
    """

    def __init__(self, path: str | Path, prefix: str = "") -> None:
        self.path = Path(path)
        with open(self.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            self.version, n_tensors, self.metadata, cur = _read_header(buf, self.path, prefix)
            table = []
            for _ in range(n_tensors):
                name = cur.text()
                (n_dims,) = cur.unpack("I")
                shape = cur.unpack(f"{n_dims}Q")
                kind, offset = cur.unpack("IQ")
                table.append((name, tuple(int(n) for n in shape), kind, offset))
            file_size = len(buf)
        self.alignment = int(self.metadata.get("general.alignment", 32))
        if self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise ValueError(f"{self.path}: general.alignment={self.alignment} is not a power of two")
        self.data_offset = -(-cur.pos // self.alignment) * self.alignment  # the table, padded
        self.tensors: dict[str, TensorInfo] = {}
        for name, shape, kind, offset in table:
            if kind not in GGML_BLOCK_SIZES:
                raise ValueError(f"{self.path}: tensor {name!r} has an unknown ggml type {kind}")
            block, block_bytes = GGML_BLOCK_SIZES[kind]
            n = int(np.prod(shape, dtype=np.int64))
            info = TensorInfo(name, shape, kind, self.data_offset + offset, n // block * block_bytes)
            if info.offset + info.nbytes > file_size:
                raise ValueError(f"{self.path}: tensor {name!r} ends after the end of the file (truncated?)")
            if name in self.tensors:
                raise ValueError(f"{self.path}: two tensors are named {name!r}")
            self.tensors[name] = info
        self._map: np.ndarray | None = None

    def __repr__(self) -> str:
        return f"GGUFFile({str(self.path)!r}: v{self.version}, {len(self.metadata)} keys, {len(self.tensors)} tensors)"

    def raw(self, name: str) -> np.ndarray:
        """The bytes of tensor ``name``: a ``(nbytes,)`` uint8 view of the memory-mapped file."""
        if self._map is None:  # mapped on first use; pages are read from disk when touched
            self._map = np.memmap(self.path, dtype=np.uint8, mode="c").view(np.ndarray)
        info = self.tensors[name]
        return self._map[info.offset:info.offset + info.nbytes]

    def tensor(self, name: str) -> torch.Tensor:
        """Tensor ``name`` as a zero-copy torch view, in PyTorch order (:attr:`TensorInfo.torch_shape`).

        Plain types (F32, F16, BF16, F64, I8..I64) come with their dtype and shape; quantised types
        as uint8 ``(rows, bytes per row)``, rows being all dimensions but GGUF's first.
        """
        info = self.tensors[name]
        data = torch.from_numpy(self.raw(name))
        if info.ggml_type in _PLAIN:
            return data.view(_PLAIN[info.ggml_type]).reshape(info.torch_shape)
        return data.reshape(*info.torch_shape[:-1], -1)  # the last axis: one row's bytes
