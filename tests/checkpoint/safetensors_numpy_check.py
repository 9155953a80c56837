"""Independent safetensors reader for safetensors_numpy_test.cpp.

Parses the file given as argv[1] per the format spec using only struct, json and numpy, checks
the layout rules and the tensor values the C++ test wrote, and prints OK (or FAIL: reason and
exits 1). Kept free of shardwise code on purpose: it is the second opinion.
"""
import json
import struct
import sys

import numpy as np

NUMPY_DTYPES = {  # safetensors dtype -> numpy dtype of the stored bytes
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # raw bits; widened below
    "F8_E4M3": np.dtype("u1"),
    "F8_E8M0": np.dtype("u1"),
    "U8": np.dtype("u1"),
    "I32": np.dtype("<i4"),
    "I64": np.dtype("<i8"),
}


def fail(reason):
    print("FAIL: " + reason)
    sys.exit(1)


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail("shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        fail("header length beyond end of file")
    raw_header = blob[8 : 8 + n]
    if n % 8 != 0:
        fail("header length %d is not a multiple of 8" % n)
    text = raw_header.decode("utf-8")
    if text.rstrip(" ") != text.rstrip():
        fail("header padding is not spaces")
    header = json.loads(text)
    data = blob[8 + n :]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    ranges = []
    for name, entry in header.items():
        if sorted(entry.keys()) != ["data_offsets", "dtype", "shape"]:
            fail("tensor %s has keys %s" % (name, sorted(entry.keys())))
        dtype = NUMPY_DTYPES[entry["dtype"]]
        shape = tuple(entry["shape"])
        begin, end = entry["data_offsets"]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if end - begin != count * dtype.itemsize:
            fail("tensor %s: byte range does not match shape" % name)
        if begin % dtype.itemsize != 0:
            fail("tensor %s: not aligned" % name)
        ranges.append((begin, end))
        array = np.frombuffer(data, dtype=dtype, count=count, offset=begin).reshape(shape)
        if entry["dtype"] == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = (entry["dtype"], array)
    position = 0
    for begin, end in sorted(ranges):
        if begin != position:
            fail("gap or overlap at %d" % begin)
        position = end
    if position != len(data):
        fail("data area has %d bytes, tensors end at %d" % (len(data), position))
    return metadata, tensors


def expect(tensors, name, dtype, values):
    if name not in tensors:
        fail("missing tensor " + name)
    got_dtype, got = tensors[name]
    if got_dtype != dtype:
        fail("%s: dtype %s, expected %s" % (name, got_dtype, dtype))
    values = np.asarray(values)
    if got.shape != values.shape:
        fail("%s: shape %s, expected %s" % (name, got.shape, values.shape))
    if not np.array_equal(got, values.astype(got.dtype)):
        fail("%s: values %s, expected %s" % (name, got.ravel()[:8], values.ravel()[:8]))


def main():
    metadata, tensors = read(sys.argv[1])
    if metadata != {"format": "pt", "step": "42", "note": "caf\u00e9 \"quoted\""}:
        fail("metadata %r" % (metadata,))
    if len(tensors) != 10:
        fail("expected 10 tensors, found %d" % len(tensors))
    expect(tensors, "f32", "F32", np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1.0)
    # bf16 values chosen to be exact in bf16: k/8 - 2.
    expect(tensors, "bf16", "BF16", (np.arange(8, dtype=np.float32) / 8 - 2).reshape(2, 4))
    expect(tensors, "f16", "F16", np.array([0.5, -1.25, 65504.0], dtype=np.float16))
    expect(tensors, "e4m3", "F8_E4M3", np.array([0x00, 0x38, 0x7E, 0xFE], dtype=np.uint8))
    expect(tensors, "e8m0", "F8_E8M0", np.array([127, 128, 1], dtype=np.uint8))
    expect(tensors, "u8", "U8", np.arange(5, dtype=np.uint8) * 50)
    expect(tensors, "i32", "I32", np.array([[-7, 0], [2147483647, -2147483648]], dtype=np.int32))
    expect(tensors, "i64", "I64", np.array([-(2**40), 2**62 + 3], dtype=np.int64))
    expect(tensors, "scalar", "F32", np.array(3.25, dtype=np.float32))
    expect(tensors, "empty", "I32", np.zeros((0, 5), dtype=np.int32))
    # E4M3 bytes decode to 0, 1, 448, -448 (OCP E4M3FN): check the decoding too.
    e4m3 = tensors["e4m3"][1]
    sign = np.where(e4m3 & 0x80, -1.0, 1.0)
    exponent = (e4m3 >> 3) & 0xF
    mantissa = e4m3 & 0x7
    decoded = sign * (1 + mantissa / 8.0) * np.exp2(exponent.astype(np.float64) - 7)
    decoded = np.where(exponent == 0, sign * mantissa / 8.0 * 2.0**-6, decoded)
    if not np.array_equal(decoded, [0.0, 1.0, 448.0, -448.0]):
        fail("e4m3 decodes to %s" % decoded)
    print("OK")


if __name__ == "__main__":
    main()
