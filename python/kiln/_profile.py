"""Profile: what profiled calls of a method spent, per instruction and per thread-pool chunk."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ProfiledInstruction:
    """One instruction of one profiled call: its operator and the kernel that
    served it (kind, library, tier as in Method.instructions), its wall time and
    the shapes of its tensor arguments and outputs ((dtype, shape) pairs)."""

    call: int
    index: int
    kind: str
    op: str
    library: str
    tier: int
    start_ns: int
    end_ns: int
    inputs: tuple
    outputs: tuple

    @property
    def ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class ProfiledChunk:
    """A parallel_for chunk of an instruction, on pool thread `thread` (0: the calling thread):
    [begin, end) of the range [0, n) of the call's parallel_for number `job`."""

    call: int
    index: int
    thread: int
    start_ns: int
    end_ns: int
    job: int = 0
    begin: int = 0
    end: int = 0
    n: int = 0

    @property
    def ns(self) -> int:
        return self.end_ns - self.start_ns


class Profile:
    """What Method.profile recorded (one or more calls).

    `outputs` are the last call's outputs; `instructions` and `chunks` the
    records; `table()` the costliest operators; `write_chrome_trace(path)` a
    trace for chrome://tracing or https://ui.perfetto.dev.
    """

    def __init__(self, native, infos, outputs):
        self._native = native
        self._infos = infos
        self.outputs = outputs

    @property
    def method(self) -> str:
        return self._native.method

    @property
    def calls(self) -> list[tuple[int, int]]:
        """(start_ns, end_ns) of each call, first instruction to last."""
        return list(self._native.calls)

    @property
    def instructions(self) -> list[ProfiledInstruction]:
        out = []
        for call, index, start, end, inputs, outputs in self._native.records:
            info = self._infos[index]
            out.append(ProfiledInstruction(call, index, info.kind, info.op, info.library, info.tier, start, end,
                                           tuple(inputs), tuple(outputs)))
        return out

    @property
    def chunks(self) -> list[ProfiledChunk]:
        return [ProfiledChunk(*c) for c in self._native.chunks]

    @property
    def call_ns(self) -> int:
        """Wall time of the calls, summed."""
        return self._native.call_ns

    @property
    def instruction_ns(self) -> int:
        """Wall time of every instruction, summed over the calls."""
        return self._native.instruction_ns

    def table(self, top: int = 20) -> str:
        """The `top` operators by time per call, then the total against the wall time."""
        return self._native.table(int(top))

    def chrome_trace(self) -> str:
        """The calls as Chrome trace event JSON: one span per call and instruction
        on the calling thread, one per thread-pool chunk on the thread that ran it."""
        return self._native.chrome_trace()

    def write_chrome_trace(self, path) -> None:
        with open(os.fspath(path), "w", encoding="utf-8") as f:
            f.write(self._native.chrome_trace())

    def __repr__(self) -> str:
        n = len(self.calls)
        return (f"<kiln.Profile {self.method}: {n} call(s), {self.instruction_ns / 1e6 / max(n, 1):.3f} ms "
                f"per call in instructions>")
