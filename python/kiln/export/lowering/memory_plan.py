"""Lifetime-based memory planning for a method's activations.

Every intermediate and output tensor of a method lives in one arena at an offset
chosen here. Two tensors may share bytes only if their lifetimes do not overlap.

A lifetime is the inclusive range [first, last] of instruction indices: `first`
is the instruction that produces the tensor and `last` the last instruction that
reads it (method outputs live to the end of the method). Because the range is
inclusive, an instruction's inputs and outputs never share memory.

The planner is the classic greedy "sort by size, place at the lowest offset
that fits": tensors are placed largest first, each at the lowest aligned offset
that does not intersect any already placed tensor whose lifetime overlaps.

This module has no torch dependency so that it can be tested on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

#: Every planned tensor starts at a multiple of this many bytes.
ALIGNMENT = 64


def align_up(n: int, alignment: int = ALIGNMENT) -> int:
    """Rounds `n` up to a multiple of `alignment`."""
    return (n + alignment - 1) // alignment * alignment


@dataclass(frozen=True)
class Lifetime:
    """One tensor to place: its size in bytes and inclusive instruction range."""

    size: int
    first: int
    last: int

    def overlaps(self, other: "Lifetime") -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass
class MemoryPlan:
    """Result of planning: one offset per requested tensor, and the arena size."""

    offsets: List[int]
    arena_size: int   # end of the highest placed tensor (not rounded up)
    naive_size: int  # sum of the 64-aligned sizes: the cost without any reuse


def plan_memory(lifetimes: Sequence[Lifetime], alignment: int = ALIGNMENT) -> MemoryPlan:
    """Places every tensor of `lifetimes`; returns offsets in the input order.

    Deterministic: ties in size are broken by first use, then by input position.
    Zero-byte tensors get offset 0 and take no space.
    """
    for lt in lifetimes:
        if lt.size < 0 or lt.first > lt.last:
            raise ValueError(f"invalid lifetime {lt}")
    order = sorted(range(len(lifetimes)),
                   key=lambda i: (-lifetimes[i].size, lifetimes[i].first, i))
    offsets = [0] * len(lifetimes)
    placed: List[Tuple[int, int, Lifetime]] = []  # (offset, end, lifetime)
    arena = 0
    for i in order:
        lt = lifetimes[i]
        if lt.size == 0:
            continue
        # Blocks already placed whose lifetimes overlap this one, by offset.
        busy = sorted((off, end) for off, end, other in placed if other.overlaps(lt))
        candidate = 0
        for off, end in busy:
            if candidate + lt.size <= off:
                break  # fits in the gap before this block
            candidate = max(candidate, align_up(end, alignment))
        offsets[i] = candidate
        end = candidate + lt.size
        placed.append((candidate, end, lt))
        arena = max(arena, end)
    naive = sum(align_up(lt.size, alignment) for lt in lifetimes)
    return MemoryPlan(offsets=offsets, arena_size=arena, naive_size=naive)


def plan_state(sizes: Sequence[int], alignment: int = ALIGNMENT) -> Tuple[List[int], int]:
    """(offsets, arena size) of state tensors of `sizes` bytes, one after the
    other: state persists across calls, so its bytes are never shared."""
    offsets, end = [], 0
    for size in sizes:
        offsets.append(end)
        end += align_up(size, alignment)
    return offsets, end


def verify_plan(lifetimes: Sequence[Lifetime], plan: MemoryPlan, alignment: int = ALIGNMENT) -> None:
    """Raises AssertionError if two live-together tensors overlap in memory,
    an offset is misaligned, or a tensor does not fit in the arena."""
    n = len(lifetimes)
    for i in range(n):
        a, oa = lifetimes[i], plan.offsets[i]
        assert oa % alignment == 0, f"tensor {i} misaligned at {oa}"
        assert oa + a.size <= plan.arena_size, f"tensor {i} exceeds the arena"
        if a.size == 0:
            continue
        for j in range(i + 1, n):
            b, ob = lifetimes[j], plan.offsets[j]
            if b.size == 0 or not a.overlaps(b):
                continue
            assert oa + a.size <= ob or ob + b.size <= oa, (
                f"tensors {i} and {j} are live together and overlap in memory")
