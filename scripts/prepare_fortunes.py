#!/usr/bin/env python3
"""Turns Debian's fortune files into byte-level token files for `shardwise train`.

Reads every fortune file under --source (default /usr/share/games/fortunes, from the Debian
packages fortunes-min and fortunes; scripts/setup.sh installs them), splits each file into its
'%'-separated texts, removes duplicate texts, assigns each distinct text to the training or the
validation split by a hash of the text itself, and writes

    OUT/train.bin, OUT/val.bin   llm.c token files: 256 int32 header (magic 20240520, version 1,
                                 token count), then one uint16 token per byte of text
    OUT/manifest.json            what went in: counts, split rule, the source files

Each text is written followed by the fortune separator "\\n%\\n", so the model sees where texts end.
The split is by whole document, so no validation text (nor any duplicate of it) is in training,
and it depends only on each text's bytes: adding or removing fortune files never moves an
existing text to the other split. Output is deterministic (texts ordered by their hash) and each
file appears complete or not at all (written to a temporary name, then renamed).

Standard library only, so any python3 runs it.
"""

import argparse
import hashlib
import json
import os
import struct
import sys

MAGIC = 20240520
VERSION = 1
HEADER_INTS = 256
SEPARATOR = b"\n%\n"


def read_documents(path):
    """The '%'-separated texts of one fortune file, with surrounding blank lines removed."""
    with open(path, "rb") as f:
        data = f.read()
    docs, current = [], []
    for line in data.split(b"\n"):
        if line.rstrip(b"\r") == b"%":
            docs.append(b"\n".join(current))
            current = []
        else:
            current.append(line)
    docs.append(b"\n".join(current))
    # Normalise: no trailing spaces on lines, no leading/trailing blank lines.
    cleaned = [b"\n".join(l.rstrip() for l in d.split(b"\n")).strip(b"\n") for d in docs]
    return [d for d in cleaned if d]


def fortune_files(source):
    """Text files of the directory, each once: no index files (.dat), no .u8 symlinks."""
    names = []
    for name in sorted(os.listdir(source)):
        path = os.path.join(source, name)
        if name.endswith(".dat") or os.path.islink(path) or not os.path.isfile(path):
            continue
        names.append(path)
    return names


def document_key(doc):
    return hashlib.sha256(doc).digest()


def is_validation(doc, val_percent):
    # First 8 bytes of the text's sha256 as a number in [0, 10000): the split is per text.
    bucket = int.from_bytes(document_key(doc)[:8], "big") % 10000
    return bucket < val_percent * 100


def write_token_file(path, docs):
    tokens = b"".join(d + SEPARATOR for d in docs)
    if len(tokens) >= 2**31:
        sys.exit(f"prepare_fortunes: {path}: {len(tokens)} tokens do not fit the int32 header")
    header = struct.pack("<3i", MAGIC, VERSION, len(tokens)) + b"\0" * (4 * (HEADER_INTS - 3))
    # Byte-level tokens: each byte becomes one little-endian uint16.
    body = bytearray(2 * len(tokens))
    body[0::2] = tokens
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header)
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return len(tokens)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default="/usr/share/games/fortunes",
                        help="directory of fortune files (default: %(default)s)")
    parser.add_argument("--out", default="data/fortunes",
                        help="output directory (default: %(default)s, relative to the cwd)")
    parser.add_argument("--val-percent", type=float, default=5.0,
                        help="share of distinct texts held out for validation (default: 5)")
    args = parser.parse_args()
    if not 0 < args.val_percent < 100:
        sys.exit(f"prepare_fortunes: --val-percent must be in (0, 100), got {args.val_percent}")
    if not os.path.isdir(args.source):
        sys.exit(f"prepare_fortunes: no fortune directory '{args.source}' "
                 "(install the Debian packages fortunes-min and fortunes: scripts/setup.sh)")
    files = fortune_files(args.source)
    total, distinct = 0, {}
    for path in files:
        for doc in read_documents(path):
            total += 1
            distinct.setdefault(document_key(doc), doc)
    if not distinct:
        sys.exit(f"prepare_fortunes: no fortune texts found in '{args.source}'")
    docs = [distinct[k] for k in sorted(distinct)]
    val = [d for d in docs if is_validation(d, args.val_percent)]
    train = [d for d in docs if not is_validation(d, args.val_percent)]
    if not val or not train:
        sys.exit(f"prepare_fortunes: {len(docs)} texts are too few to split "
                 f"({len(train)} train, {len(val)} validation)")
    os.makedirs(args.out, exist_ok=True)
    train_tokens = write_token_file(os.path.join(args.out, "train.bin"), train)
    val_tokens = write_token_file(os.path.join(args.out, "val.bin"), val)
    manifest = {
        "source": os.path.abspath(args.source),
        "files": [os.path.basename(p) for p in files],
        "texts_read": total,
        "texts_distinct": len(docs),
        "split": f"sha256(text) first 8 bytes mod 10000 < {args.val_percent * 100:g}: validation",
        "train": {"texts": len(train), "tokens": train_tokens},
        "validation": {"texts": len(val), "tokens": val_tokens},
        "tokens": "one per byte (vocabulary 256); texts end with the separator '\\n%\\n'",
    }
    tmp = os.path.join(args.out, "manifest.json.tmp")
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    os.replace(tmp, os.path.join(args.out, "manifest.json"))
    print(f"prepare_fortunes: {len(files)} files, {total} texts, {len(docs)} distinct: "
          f"train {len(train)} texts / {train_tokens} bytes, validation {len(val)} texts / "
          f"{val_tokens} bytes -> {args.out}/train.bin, {args.out}/val.bin")


if __name__ == "__main__":
    main()
