"""The safetensors format read and written with numpy alone (the model2vec folder keeps
its token vectors in ``model.safetensors``).

The format: an 8-byte little-endian header length N, N bytes of JSON (``{name: {"dtype",
"shape", "data_offsets": [begin, end]}, "__metadata__": {...}}``), then the tensors'
bytes, offsets relative to the end of the header. Every offset is checked against the
file, so a truncated or garbled file is an error naming it, never a crash.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memidex.vectors.errors import ModelCacheError

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["encode_safetensors", "read_safetensors"]

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
           "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}
_MAX_HEADER = 100 << 20


def read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """Every tensor of ``path`` (memory-mapped, read-only)."""
    import numpy as np

    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ValueError("shorter than its 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > min(size - 8, _MAX_HEADER):
                raise ValueError(f"header length {n} is past the end of the file")
            header = json.loads(f.read(n).decode("utf-8"))
        if not isinstance(header, dict):
            raise ValueError("the header is not a JSON object")
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n) if size > 8 + n \
            else np.zeros(0, dtype=np.uint8)
        out: dict[str, npt.NDArray[Any]] = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            dtype = _DTYPES.get(str(info.get("dtype")))
            if dtype is None:
                raise ValueError(f"tensor {name!r} has an unsupported dtype "
                                 f"{info.get('dtype')!r}")
            begin, end = (int(x) for x in info["data_offsets"])
            shape = tuple(int(x) for x in info["shape"])
            itemsize = np.dtype(dtype).itemsize
            count = 1
            for d in shape:
                count *= d
            if not 0 <= begin <= end <= len(data) or end - begin != count * itemsize:
                raise ValueError(f"tensor {name!r}: offsets {begin}..{end} do not fit "
                                 f"its shape {list(shape)} inside the file")
            out[name] = np.frombuffer(data, dtype=dtype, count=count,
                                      offset=begin).reshape(shape)
        return out
    except OSError as exc:
        raise ModelCacheError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, struct.error) as exc:
        raise ModelCacheError(f"{path} is not a valid safetensors file: {exc}") from None


def encode_safetensors(tensors: Mapping[str, npt.NDArray[Any]],
                       metadata: Mapping[str, str] | None = None) -> bytes:
    """The safetensors bytes of ``tensors`` (names sorted, data aligned to 8 bytes, as
    the reference writer does); the caller writes them (atomically)."""
    import numpy as np

    codes = {np.dtype(v): k for k, v in _DTYPES.items()}
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    chunks: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        little = arr.dtype.newbyteorder("<") if arr.dtype.itemsize > 1 else arr.dtype
        code = codes.get(little)
        if code is None:
            raise ValueError(f"tensor {name!r}: dtype {arr.dtype} cannot be stored")
        raw = arr.astype(little, copy=False).tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(len(text) + 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)
