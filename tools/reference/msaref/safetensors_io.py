"""A small safetensors reader and writer (numpy only), written from the format's description:

    [8 bytes: little-endian u64 N] [N bytes: UTF-8 JSON header] [data bytes]

The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the start
of the data section) and may hold "__metadata__" (a string -> string map). Tensors are stored row-major, little-endian,
back to back without holes. Sharded checkpoints add `model.safetensors.index.json` = {"metadata": {...},
"weight_map": {tensor name: shard file name}}.

Arrays are returned in their storage type: BF16 as uint16 bit patterns, F8_E4M3/F8_E5M2 as uint8 codes.
"""
from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass

import numpy as np

# safetensors dtype -> numpy storage dtype (little-endian)
STORAGE = {
    "BOOL": np.dtype("bool"), "U8": np.dtype("u1"), "I8": np.dtype("i1"), "I16": np.dtype("<i2"),
    "U16": np.dtype("<u2"), "I32": np.dtype("<i4"), "U32": np.dtype("<u4"), "I64": np.dtype("<i8"),
    "U64": np.dtype("<u8"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"), "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"), "F8_E4M3": np.dtype("u1"), "F8_E5M2": np.dtype("u1"),
}
MAX_HEADER = 100 * 1024 * 1024
INDEX_NAME = "model.safetensors.index.json"


class SafetensorsError(ValueError):
    pass


@dataclass
class TensorInfo:
    name: str
    dtype: str
    shape: tuple
    begin: int
    end: int
    path: str


def read_header(path: str):
    """Returns (header dict without __metadata__, metadata dict, data start offset). Validates the layout."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise SafetensorsError(f"{path}: file is shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", raw)
        if n > MAX_HEADER or 8 + n > size:
            raise SafetensorsError(f"{path}: header length {n} is larger than the file or the 100 MiB limit")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise SafetensorsError(f"{path}: header is not valid UTF-8 JSON ({e})") from e
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    meta = header.pop("__metadata__", {}) or {}
    data_len = size - 8 - n
    spans = []
    for name, t in header.items():
        if not isinstance(t, dict) or set(t) - {"dtype", "shape", "data_offsets"}:
            raise SafetensorsError(f"{path}: entry '{name}' is not a tensor description")
        if t.get("dtype") not in STORAGE:
            raise SafetensorsError(f"{path}: tensor '{name}' has unknown dtype {t.get('dtype')!r}")
        shape, off = t.get("shape"), t.get("data_offsets")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise SafetensorsError(f"{path}: tensor '{name}' has an invalid shape {shape!r}")
        if not (isinstance(off, list) and len(off) == 2 and all(isinstance(o, int) for o in off)
                and 0 <= off[0] <= off[1] <= data_len):
            raise SafetensorsError(f"{path}: tensor '{name}' has data_offsets {off!r} outside the data section")
        need = int(np.prod(shape, dtype=np.int64)) * STORAGE[t["dtype"]].itemsize
        if off[1] - off[0] != need:
            raise SafetensorsError(f"{path}: tensor '{name}' spans {off[1] - off[0]} bytes, its shape needs {need}")
        spans.append((off[0], off[1], name))
    spans.sort()
    pos = 0
    for b, e, name in spans:
        if b != pos:
            raise SafetensorsError(f"{path}: tensor '{name}' starts at {b}, expected {pos} (hole or overlap)")
        pos = e
    if pos != data_len:
        raise SafetensorsError(f"{path}: data section has {data_len - pos} trailing bytes not owned by a tensor")
    return header, meta, 8 + n


class SafetensorsFile:
    """One .safetensors file, memory-mapped."""

    def __init__(self, path: str):
        self.path = path
        self.header, self.metadata, self.data_start = read_header(path)
        self._mm = np.memmap(path, dtype=np.uint8, mode="r") if os.path.getsize(path) > 0 else None

    def names(self):
        return list(self.header)

    def info(self, name: str) -> TensorInfo:
        t = self.header[name]
        return TensorInfo(name, t["dtype"], tuple(t["shape"]), t["data_offsets"][0], t["data_offsets"][1], self.path)

    def get(self, name: str) -> np.ndarray:
        """The tensor in its storage dtype (a copy, row-major, native byte order)."""
        i = self.info(name)
        raw = np.array(self._mm[self.data_start + i.begin:self.data_start + i.end])  # a writable copy
        arr = raw.view(STORAGE[i.dtype]).reshape(i.shape)
        return arr.astype(STORAGE[i.dtype].newbyteorder("="), copy=False)


class Checkpoint:
    """A checkpoint directory: model.safetensors.index.json + shards, or one model.safetensors
    (or any set of *.safetensors files when there is no index)."""

    def __init__(self, directory: str):
        self.directory = directory
        idx = os.path.join(directory, INDEX_NAME)
        self.files: dict[str, SafetensorsFile] = {}
        self.where: dict[str, str] = {}
        if os.path.exists(idx):
            with open(idx) as f:
                index = json.load(f)
            wm = index.get("weight_map")
            if not isinstance(wm, dict):
                raise SafetensorsError(f"{idx}: no 'weight_map' object")
            for name, fn in wm.items():
                if fn not in self.files:
                    self.files[fn] = SafetensorsFile(os.path.join(directory, fn))
                if name not in self.files[fn].header:
                    raise SafetensorsError(f"{idx}: tensor '{name}' is mapped to {fn}, which does not hold it")
                self.where[name] = fn
        else:
            shards = sorted(f for f in os.listdir(directory) if f.endswith(".safetensors"))
            if not shards:
                raise SafetensorsError(f"{directory}: no {INDEX_NAME} and no .safetensors file")
            for fn in shards:
                self.files[fn] = SafetensorsFile(os.path.join(directory, fn))
                for name in self.files[fn].header:
                    if name in self.where:
                        raise SafetensorsError(f"{directory}: tensor '{name}' appears in two shards")
                    self.where[name] = fn

    def __contains__(self, name):
        return name in self.where

    def names(self):
        return list(self.where)

    def info(self, name) -> TensorInfo:
        return self.files[self.where[name]].info(name)

    def get(self, name) -> np.ndarray:
        if name not in self.where:
            raise KeyError(f"{self.directory}: checkpoint has no tensor '{name}'")
        return self.files[self.where[name]].get(name)


# ---------------------------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------------------------
def _as_storage(dtype: str, arr: np.ndarray) -> np.ndarray:
    want = STORAGE[dtype]
    a = np.asarray(arr, order="C")  # (np.ascontiguousarray would turn a 0-d array into shape [1])
    if a.dtype.itemsize != want.itemsize or (a.dtype.kind != want.kind and not (
            dtype in ("BF16", "F8_E4M3", "F8_E5M2") and a.dtype.kind in "ui")):
        raise SafetensorsError(f"array of dtype {a.dtype} cannot be stored as {dtype}")
    return a.astype(want, copy=False) if a.dtype == want else a.view(want)


def write_file(path: str, tensors: dict, metadata: dict | None = None):
    """tensors: name -> (safetensors dtype string, numpy array in storage form). Written in the given order,
    header padded with spaces to a multiple of 8 bytes."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    off = 0
    blobs = []
    for name, (dtype, arr) in tensors.items():
        a = _as_storage(dtype, arr)
        b = a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((-len(hb)) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


class ShardedWriter:
    """Streams tensors into shards of at most `shard_bytes` (a tensor larger than that gets a shard of its own),
    then writes model.safetensors.index.json. Shard names follow the HF pattern model-0000i-of-0000n.safetensors."""

    def __init__(self, directory: str, shard_bytes: int = 1 << 30, metadata: dict | None = None):
        self.directory = directory
        self.shard_bytes = shard_bytes
        self.metadata = metadata or {"format": "pt"}
        self.pending: dict = {}
        self.pending_bytes = 0
        self.shards: list[list[str]] = []
        self.total = 0
        os.makedirs(directory, exist_ok=True)

    def add(self, name: str, dtype: str, arr: np.ndarray):
        a = _as_storage(dtype, arr)
        if self.pending and self.pending_bytes + a.nbytes > self.shard_bytes:
            self._flush()
        self.pending[name] = (dtype, a)
        self.pending_bytes += a.nbytes
        self.total += a.nbytes

    def _flush(self):
        k = len(self.shards)
        write_file(os.path.join(self.directory, f"shard-{k:05d}.tmp.safetensors"), self.pending, self.metadata)
        self.shards.append(list(self.pending))
        self.pending, self.pending_bytes = {}, 0

    def close(self) -> list[str]:
        if self.pending or not self.shards:
            self._flush()
        n = len(self.shards)
        weight_map = {}
        files = []
        for k, names in enumerate(self.shards):
            fn = f"model-{k + 1:05d}-of-{n:05d}.safetensors"
            os.replace(os.path.join(self.directory, f"shard-{k:05d}.tmp.safetensors"),
                       os.path.join(self.directory, fn))
            files.append(fn)
            for name in names:
                weight_map[name] = fn
        index = {"metadata": {"total_size": self.total}, "weight_map": dict(sorted(weight_map.items()))}
        with open(os.path.join(self.directory, INDEX_NAME), "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")
        return files
