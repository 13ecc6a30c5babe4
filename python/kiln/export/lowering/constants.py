"""The program-wide pool of constant segments, with byte-level deduplication.

Constants with identical bytes (tied embedding / output weights, parameters
shared by several methods, repeated scalars) are stored once: the pool keys
each payload by (size, SHA-256) and compares the bytes on a hash match.

Torch-free: payloads are any bytes-like object (bytes, memoryview, numpy array).
"""

from __future__ import annotations

import hashlib
from typing import Dict, List, Tuple


class ConstantPool:
    """Segments in the order they were first added; `add` returns the index."""

    def __init__(self) -> None:
        self._segments: List[memoryview] = []
        self._by_key: Dict[Tuple[int, bytes], List[int]] = {}
        self.bytes_added = 0  # bytes offered to the pool, duplicates included

    def add(self, data) -> int:
        view = memoryview(data).cast("B")
        self.bytes_added += view.nbytes
        key = (view.nbytes, hashlib.sha256(view).digest())
        candidates = self._by_key.setdefault(key, [])
        for index in candidates:
            if self._segments[index] == view:
                return index
        self._segments.append(view)
        candidates.append(len(self._segments) - 1)
        return len(self._segments) - 1

    def __len__(self) -> int:
        return len(self._segments)

    def __getitem__(self, index: int) -> memoryview:
        return self._segments[index]

    @property
    def segments(self) -> List[memoryview]:
        return list(self._segments)

    def total_bytes(self) -> int:
        return sum(s.nbytes for s in self._segments)
