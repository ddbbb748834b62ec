"""The safetensors reader/writer: round trips and malformed files."""
import json
import os
import struct

import numpy as np
import pytest

from msaref.safetensors_io import (Checkpoint, SafetensorsError, SafetensorsFile, ShardedWriter, read_header,
                                   write_file)


def test_round_trip_every_dtype(tmp_path):
    rng = np.random.default_rng(0)
    t = {
        "bool": ("BOOL", rng.integers(0, 2, (3, 5)).astype(bool)),
        "u8": ("U8", rng.integers(0, 256, (7,)).astype(np.uint8)),
        "i8": ("I8", rng.integers(-128, 128, (2, 2)).astype(np.int8)),
        "i16": ("I16", rng.integers(-1000, 1000, (4,)).astype(np.int16)),
        "u16": ("U16", rng.integers(0, 65536, (4,)).astype(np.uint16)),
        "i32": ("I32", rng.integers(-10 ** 9, 10 ** 9, (3,)).astype(np.int32)),
        "u32": ("U32", rng.integers(0, 2 ** 32, (3,)).astype(np.uint32)),
        "i64": ("I64", rng.integers(-10 ** 18, 10 ** 18, (3,)).astype(np.int64)),
        "u64": ("U64", rng.integers(0, 2 ** 63, (3,)).astype(np.uint64)),
        "f16": ("F16", rng.standard_normal((2, 3)).astype(np.float16)),
        "bf16": ("BF16", rng.integers(0, 65536, (5, 4)).astype(np.uint16)),
        "f32": ("F32", rng.standard_normal((3, 1, 2)).astype(np.float32)),
        "f64": ("F64", rng.standard_normal((2,)).astype(np.float64)),
        "e4m3": ("F8_E4M3", rng.integers(0, 256, (9,)).astype(np.uint8)),
        "e5m2": ("F8_E5M2", rng.integers(0, 256, (9,)).astype(np.uint8)),
        "scalar": ("F32", np.array(3.5, dtype=np.float32)),
        "empty": ("F32", np.zeros((0, 4), dtype=np.float32)),
    }
    p = str(tmp_path / "a.safetensors")
    write_file(p, t, {"format": "pt"})
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    assert n % 8 == 0 and json.loads(raw[8:8 + n])["__metadata__"] == {"format": "pt"}
    f = SafetensorsFile(p)
    for name, (dt, arr) in t.items():
        assert f.info(name).dtype == dt and f.info(name).shape == arr.shape
        got = f.get(name)
        assert got.shape == arr.shape and np.array_equal(got.view(arr.dtype) if got.dtype != arr.dtype else got, arr)
        got[...] = 0 if got.size else got  # arrays are writable copies


def test_sharded_writer_and_index(tmp_path):
    w = ShardedWriter(str(tmp_path), shard_bytes=100)
    for i in range(5):
        w.add(f"t{i}", "F32", np.full((10,), i, dtype=np.float32))  # 40 bytes each -> 2 per shard
    files = w.close()
    assert files == [f"model-0000{k}-of-00003.safetensors" for k in (1, 2, 3)]
    idx = json.load(open(tmp_path / "model.safetensors.index.json"))
    assert idx["metadata"]["total_size"] == 200 and idx["weight_map"]["t4"] == files[2]
    ck = Checkpoint(str(tmp_path))
    assert sorted(ck.names()) == [f"t{i}" for i in range(5)] and ck.get("t3")[0] == 3
    with pytest.raises(KeyError):
        ck.get("nope")


def _write_raw(path, header: dict, data: bytes, pad=True):
    hb = json.dumps(header).encode()
    if pad:
        hb += b" " * ((-len(hb)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + data)


@pytest.mark.parametrize("header,data,msg", [
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, "outside"),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, "needs"),
    ({"a": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, "unknown dtype"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
      "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}, b"\0" * 12, "hole"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8, "hole or overlap"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 8, "trailing"),
    ({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4, "shape"),
    ({"a": [1, 2]}, b"", "not a tensor"),
])
def test_malformed_files(tmp_path, header, data, msg):
    p = str(tmp_path / "bad.safetensors")
    _write_raw(p, header, data)
    with pytest.raises(SafetensorsError, match=msg):
        read_header(p)


def test_malformed_header_length_and_json(tmp_path):
    p = str(tmp_path / "bad.safetensors")
    with open(p, "wb") as f:
        f.write(b"\x01\x02")
    with pytest.raises(SafetensorsError, match="shorter"):
        read_header(p)
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(SafetensorsError, match="larger"):
        read_header(p)
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", 4) + b"{x}]")
    with pytest.raises(SafetensorsError, match="JSON"):
        read_header(p)


def test_index_pointing_at_a_missing_tensor(tmp_path):
    write_file(str(tmp_path / "s.safetensors"), {"a": ("F32", np.zeros(2, np.float32))})
    with open(tmp_path / "model.safetensors.index.json", "w") as f:
        json.dump({"weight_map": {"a": "s.safetensors", "b": "s.safetensors"}}, f)
    with pytest.raises(SafetensorsError, match="does not hold"):
        Checkpoint(str(tmp_path))
    os.remove(tmp_path / "model.safetensors.index.json")
    assert Checkpoint(str(tmp_path)).names() == ["a"]  # no index: every *.safetensors file
