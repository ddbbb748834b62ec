#!/usr/bin/python3
"""Writes the seed corpus of fuzz/fuzz_safetensors_header: small valid safetensors files (every dtype, sharded-style
names, metadata, zero-sized and scalar tensors, padded headers) and corrupt ones (one per validation rule of
src/formats/safetensors_reader.cpp). Built by hand with struct/json, independently of the C++ writer.

Usage: /usr/bin/python3 tools/fuzz/make_safetensors_corpus.py [OUT_DIR]
"""
import json
import os
import struct
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "fuzz", "corpus",
                                                         "fuzz_safetensors_header")
SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
         "U8": 1, "BOOL": 1}


def raw(header, data=b"", length=None, pad=True):
    text = header if isinstance(header, (bytes, bytearray)) else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def tensors(specs, metadata=None):
    """specs: list of (name, dtype, shape); returns (header, data) laid out back to back."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    data = b""
    for name, dtype, shape in specs:
        n = SIZES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        data += bytes((offset + i) % 251 for i in range(n))
        offset += n
    return header, data


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {}
    # ---- valid ----
    files["valid_every_dtype"] = raw(*tensors([("t." + d.lower(), d, [2, 3]) for d in SIZES], {"format": "pt"}))
    files["valid_m3_names"] = raw(*tensors([
        ("language_model.model.layers.3.self_attn.q_proj.weight", "F8_E4M3", [8, 32]),
        ("language_model.model.layers.3.self_attn.q_proj.weight_scale_inv", "U8", [8, 1]),
        ("language_model.model.layers.3.block_sparse_moe.experts.0.w1.weight", "U8", [4, 8]),
        ("language_model.model.layers.3.block_sparse_moe.experts.0.w1.weight_scale", "F8_E4M3", [4, 1]),
        ("language_model.model.layers.3.block_sparse_moe.experts.0.w1.weight_scale_2", "F32", []),
        ("language_model.model.norm.weight", "BF16", [16]),
    ]))
    files["valid_scalar_and_empty"] = raw(*tensors([("s", "F32", []), ("e", "BF16", [0, 7]), ("x", "U8", [1])]))
    files["valid_no_tensors"] = raw({})
    files["valid_metadata_only"] = raw({"__metadata__": {"format": "pt", "k": "v"}})
    files["valid_unpadded"] = raw(*tensors([("a", "U8", [3])]), pad=False)
    header, data = tensors([("b", "I16", [2]), ("a", "F64", [1])])
    files["valid_unsorted_keys"] = raw(header, data)

    # ---- corrupt ----
    ok_header, ok_data = tensors([("a", "U8", [4]), ("b", "F32", [2])])
    ok = raw(ok_header, ok_data)
    files["bad_too_short"] = b"\x05\x00\x00"
    files["bad_empty"] = b""
    files["bad_header_longer_than_file"] = raw(ok_header, ok_data, length=10_000)
    files["bad_header_length_huge"] = struct.pack("<Q", 2**63 + 5) + b"{}"
    files["bad_truncated_data"] = ok[:-3]
    files["bad_truncated_header"] = ok[:20]
    files["bad_not_json"] = raw(b'{"a": {"dtype": "U8",', b"")
    files["bad_not_object"] = raw(b"[1,2,3]")
    files["bad_entry_not_object"] = raw({"a": [0, 1]}, b"x")
    files["bad_missing_dtype"] = raw({"a": {"shape": [1], "data_offsets": [0, 1]}}, b"x")
    files["bad_missing_shape"] = raw({"a": {"dtype": "U8", "data_offsets": [0, 1]}}, b"x")
    files["bad_missing_offsets"] = raw({"a": {"dtype": "U8", "shape": [1]}}, b"x")
    files["bad_dtype_type"] = raw({"a": {"dtype": 3, "shape": [1], "data_offsets": [0, 1]}}, b"x")
    files["bad_unknown_dtype"] = raw({"a": {"dtype": "F4", "shape": [1], "data_offsets": [0, 1]}}, b"x")
    files["bad_negative_dim"] = raw({"a": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}}, b"x")
    files["bad_float_dim"] = raw({"a": {"dtype": "U8", "shape": [1.0], "data_offsets": [0, 1]}}, b"x")
    files["bad_offsets_three"] = raw({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1, 2]}}, b"x")
    files["bad_offsets_reversed"] = raw({"a": {"dtype": "U8", "shape": [0], "data_offsets": [1, 0]}}, b"x")
    files["bad_offsets_out_of_range"] = raw({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}, b"x")
    files["bad_size_mismatch"] = raw({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"xxxx")
    files["bad_numel_overflow"] = raw({"a": {"dtype": "F64", "shape": [2**32, 2**32, 2**32],
                                             "data_offsets": [0, 8]}}, b"x" * 8)
    files["bad_overlap"] = raw({"a": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]},
                                "b": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]}}, b"xxxx")
    files["bad_hole"] = raw({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                             "b": {"dtype": "U8", "shape": [1], "data_offsets": [2, 3]}}, b"xxx")
    files["bad_trailing_bytes"] = raw({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"xxxx")
    files["bad_duplicate_name"] = raw(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                                      b'"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"xx")
    files["bad_metadata_not_strings"] = raw({"__metadata__": {"k": 1}})
    files["bad_invalid_utf8"] = raw(b'{"\xff\xfe":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x")
    files["bad_deep_nesting"] = raw(b"[" * 5000 + b"]" * 5000)
    files["bad_nul_in_header"] = raw(b'{"a\x00":1}')

    for name, contents in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(contents)
    print(f"wrote {len(files)} files to {OUT}")


if __name__ == "__main__":
    main()
