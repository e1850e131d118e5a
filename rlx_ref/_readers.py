"""Checked readers for the files a user hands the command line.

Each reader either returns the data or raises ``FileInputError``, whose text is one line:
``<file>: <what is wrong> (expected <what would be right>)``. Arrays are never unpickled,
and an array header is checked against the bytes actually present before anything is
allocated, so a damaged or hostile header cannot ask for 10**11 elements.
"""
from __future__ import annotations

import json
import math
import os
import zipfile
from pathlib import Path

import numpy as np

# Deflate cannot expand data more than about 1032:1; a member claiming more is a lie.
_MAX_DEFLATE_RATIO = 1100


class FileInputError(ValueError):
    """A user-supplied file that cannot be used; the message names the file."""

    def __init__(self, path, what: str, expected: str | None = None):
        self.path, self.what, self.expected = str(path), what, expected
        text = f"{path}: {one_line(what)}"
        super().__init__(text + (f" (expected {expected})" if expected else ""))


def one_line(text) -> str:
    """``text`` with its lines joined, for one-line error messages."""
    return " | ".join(s.strip() for s in str(text).splitlines() if s.strip())


def describe_os_error(e: OSError) -> str:
    """What an OSError means for a file the user named, without the errno noise."""
    if isinstance(e, FileNotFoundError):
        return "no such file"
    if isinstance(e, IsADirectoryError):
        return "is a directory"
    if isinstance(e, PermissionError):
        return "permission denied"
    return e.strerror or type(e).__name__


def read_bytes(path, expected: str) -> bytes:
    """The bytes of ``path``; FileInputError when it cannot be read."""
    try:
        if Path(path).is_dir():
            raise IsADirectoryError(path)
        return Path(path).read_bytes()
    except OSError as e:
        raise FileInputError(path, f"cannot read: {describe_os_error(e)}", expected) from None


GZIP_LIMIT = 1 << 30            # decompressed bytes a .gz input may expand to


def _gunzip(path, data: bytes, expected: str) -> bytes:
    """``data`` decompressed when it is a gzip stream (a ``.gz`` results file)."""
    if data[:2] != b"\x1f\x8b":
        return data
    import zlib

    d = zlib.decompressobj(wbits=31)
    try:
        out = d.decompress(data, GZIP_LIMIT)
    except zlib.error as e:
        raise FileInputError(path, f"corrupt gzip data ({e})", expected) from None
    if d.unconsumed_tail:
        raise FileInputError(path, f"expands past {GZIP_LIMIT} bytes", expected)
    if not d.eof:
        raise FileInputError(path, "truncated gzip data", expected)
    return out


def read_text(path, expected: str) -> str:
    """The UTF-8 text of ``path`` (gunzipped when gzip); FileInputError when unreadable or
    not text."""
    data = _gunzip(path, read_bytes(path, expected), expected)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileInputError(path, f"not UTF-8 text (byte {e.start})", expected) from None


def read_json(path, expected: str):
    """The JSON value in ``path``; FileInputError when unreadable or not JSON."""
    text = read_text(path, expected)
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise FileInputError(path, f"not JSON: {e}", expected) from None


NPY = "a .npy array written by numpy.save (numeric or bool, no Python objects)"
NPZ = "a .npz archive of arrays written by numpy.savez (numeric or bool, no Python objects)"


def _header(fp, path, where: str):
    """(shape, fortran, dtype, header end) of the .npy stream at ``fp``."""
    try:
        version = np.lib.format.read_magic(fp)
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read(fp)
    except Exception as e:  # noqa: BLE001 - numpy raises several types for bad headers
        raise FileInputError(path, f"{where}damaged or not a .npy header: {one_line(e)}",
                             NPY) from None
    if dtype.hasobject:
        raise FileInputError(path, f"{where}holds Python objects (dtype {dtype}), which are "
                             "never unpickled", NPY)
    if any(d < 0 for d in shape):
        raise FileInputError(path, f"{where}header has a negative dimension {shape}", NPY)
    return shape, fortran, dtype


def _check_size(path, where: str, shape, dtype, have: int) -> None:
    need = math.prod(shape) * dtype.itemsize
    if need > have:
        raise FileInputError(path, f"{where}truncated: its header declares shape "
                             f"{list(shape)} of {dtype} ({need} bytes) but {have} bytes "
                             "of data follow", NPY)


def load_npy(path) -> np.ndarray:
    """A checked ``np.load`` of one .npy file."""
    try:
        if Path(path).is_dir():
            raise IsADirectoryError(path)
        with open(path, "rb") as fp:
            shape, _, dtype = _header(fp, path, "")
            _check_size(path, "", shape, dtype, os.fstat(fp.fileno()).st_size - fp.tell())
            fp.seek(0)
            return _read_array(fp, path, "")
    except OSError as e:
        raise FileInputError(path, f"cannot read: {describe_os_error(e)}", NPY) from None


def _read_array(fp, path, where: str) -> np.ndarray:
    try:
        return np.lib.format.read_array(fp, allow_pickle=False)
    except (ValueError, EOFError, zipfile.BadZipFile, OSError) as e:
        raise FileInputError(path, f"{where}damaged array data: {one_line(e)}", NPY) from None


def load_npz(path) -> dict:
    """A checked ``dict(np.load(...))`` of a .npz archive: name -> array."""
    try:
        if Path(path).is_dir():
            raise IsADirectoryError(path)
        fp = open(path, "rb")
    except OSError as e:
        raise FileInputError(path, f"cannot read: {describe_os_error(e)}", NPZ) from None
    try:
        with fp, zipfile.ZipFile(fp) as zf:
            return {_member_name(path, info): _load_member(zf, info, path)
                    for info in zf.infolist()}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, ValueError,
            EOFError, RuntimeError, OSError) as e:     # OSError: a seek the damage misled
        if isinstance(e, FileInputError):
            raise
        raise FileInputError(path, f"not a readable .npz (zip) archive: {one_line(e)}",
                             NPZ) from None


def _member_name(path, info: zipfile.ZipInfo) -> str:
    if not info.filename.endswith(".npy"):
        raise FileInputError(path, f"member {info.filename!r} is not a .npy array", NPZ)
    return info.filename[:-len(".npy")]


def _load_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path) -> np.ndarray:
    where = f"member {info.filename!r}: "
    limit = info.compress_size * (1 if info.compress_type == zipfile.ZIP_STORED
                                  else _MAX_DEFLATE_RATIO)
    if info.file_size > limit:
        raise FileInputError(path, f"{where}claims {info.file_size} bytes from "
                             f"{info.compress_size} stored bytes", NPZ)
    with zf.open(info) as fp:
        shape, _, dtype = _header(fp, path, where)
        _check_size(path, where, shape, dtype, info.file_size - fp.tell())
    with zf.open(info) as fp:
        return _read_array(fp, path, where)
