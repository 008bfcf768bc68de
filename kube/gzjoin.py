"""One gzip stream made of pieces compressed apart, as pigz joins its blocks.

A snapshot's objects are compressed as they arrive, kind by kind, and the archive is put
together afterwards in another order: the tar headers, each kind's files, the logs. Compressed
once, the pieces are joined without being compressed again: each is raw deflate ended by a
sync flush (whole blocks, none final, ending on a byte), so pieces laid end to end are one
deflate stream; one empty final block closes it. The gzip trailer's CRC-32 of the whole is
made of each piece's CRC and length (`crc32_combine`, zlib's own method), so nothing is read
twice. The result is a single gzip member: every gzip reader reads it (some read only the
first of several members, Python's `tarfile` in stream mode among them).
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

LEVEL = 6  # gzip's default (tarfile's is 9): 2.7 s instead of 7.4 s at 1,000 nodes
FINAL = b"\x03\x00"  # an empty block, the last: ends the deflate stream


def compressor() -> Any:
    """A compressor of one piece: raw deflate (no header or trailer of its own)."""
    return zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)


def ended(c: Any) -> bytes:
    """The rest of a piece: its last blocks, ending on a byte, none final."""
    return c.flush(zlib.Z_SYNC_FLUSH)  # type: ignore[no-any-return]


def piece(data: bytes) -> bytes:
    """`data` as a piece of its own."""
    c = compressor()
    return c.compress(data) + ended(c)  # type: ignore[no-any-return]


def header(mtime: int) -> bytes:
    """A gzip member's header: deflate, no name, `mtime`, from Unix (RFC 1952, 2.3)."""
    return b"\x1f\x8b\x08\x00" + struct.pack("<I", mtime & 0xFFFFFFFF) + b"\x00\x03"


def trailer(crc: int, size: int) -> bytes:
    """The end of a member: the deflate stream's last block, the CRC-32 and size of all."""
    return FINAL + struct.pack("<II", crc & 0xFFFFFFFF, size & 0xFFFFFFFF)


def _square(op: list[int]) -> list[int]:
    return [_times(op, row) for row in op]


def _times(op: list[int], vector: int) -> int:
    out, i = 0, 0
    while vector:
        if vector & 1:
            out ^= op[i]
        vector >>= 1
        i += 1
    return out


def _operators() -> list[list[int]]:
    """For each k, the operator that appends 2**k zero bytes to a CRC-32 (over GF(2))."""
    one_bit = [0xEDB88320] + [1 << n for n in range(31)]  # the polynomial, reflected
    op = _square(_square(_square(one_bit)))  # one zero byte: eight bits
    ops = [op]
    for _ in range(63):
        op = _square(op)
        ops.append(op)
    return ops


_OPS = _operators()


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of A + B from A's (`crc1`), B's (`crc2`) and B's length (zlib's
    `crc32_combine`)."""
    k = 0
    while len2:
        if len2 & 1:
            crc1 = _times(_OPS[k], crc1)
        len2 >>= 1
        k += 1
    return crc1 ^ crc2
