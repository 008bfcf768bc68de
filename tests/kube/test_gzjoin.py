"""`kube.gzjoin`: pieces compressed apart join into one gzip stream every reader reads, its
CRC-32 made of the pieces' without reading them again."""

from __future__ import annotations

import gzip
import random
import zlib

import pytest

from kube.gzjoin import crc32_combine, header, piece, trailer


def test_crc32_combine_is_the_crc_of_the_two_joined() -> None:
    rng = random.Random(7)
    for _ in range(300):
        a = rng.randbytes(rng.randint(0, 3000))
        b = rng.randbytes(rng.choice([0, 1, rng.randint(2, 70_000)]))
        assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)
    big = bytes(40_000_000)  # lengths past 2**25: the operators of every bit are right
    assert crc32_combine(zlib.crc32(b"x"), zlib.crc32(big), len(big)) == zlib.crc32(b"x" + big)


def test_pieces_laid_end_to_end_are_one_gzip_member() -> None:
    rng = random.Random(3)
    parts = [b"", b"apiVersion: v1\n" * 2000, rng.randbytes(5000), b"\0" * 10240, b"end"]
    crc = size = 0
    body = b""
    for p in parts:
        body += piece(p)
        crc, size = crc32_combine(crc, zlib.crc32(p), len(p)), size + len(p)
    blob = header(1_700_000_000) + body + trailer(crc, size)
    one = zlib.decompressobj(31)
    assert one.decompress(blob) == b"".join(parts) and one.eof and one.unused_data == b""
    assert gzip.decompress(blob) == b"".join(parts)  # its CRC and length checked
    with pytest.raises(gzip.BadGzipFile, match="CRC"):  # what the trailer is checked against
        gzip.decompress(header(0) + body + trailer(crc ^ 1, size))
