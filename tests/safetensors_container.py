"""The safetensors container — an 8-byte little-endian header length, the JSON header padded with
spaces to a multiple of 8 bytes, then the tensors' raw bytes — written and read with struct and
json only. The tests write their input checkpoints with it and read shardwise's output with it:
an independent second opinion, so nothing here uses shardwise.
"""
import json
import struct


def header_bytes(header):
    """The header as stored: compact JSON padded with spaces to a multiple of 8 bytes."""
    text = json.dumps(header).encode()
    return text + b" " * (-len(text) % 8)


def write(path, tensors, metadata=None):
    """tensors: name -> (safetensors dtype, shape, raw bytes), stored in that order."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = header_bytes(header)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read(path):
    """-> ({name: (safetensors dtype, shape tuple, raw bytes)}, metadata dict)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensors[name] = (entry["dtype"], tuple(entry["shape"]), data[begin:end])
    return tensors, metadata
