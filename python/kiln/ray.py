"""kiln.ray: batch inference with a .kiln program on Ray Data, one program load per actor.

    import ray, kiln.ray
    ds = ray.data.read_parquet("sentences.parquet").map_batches(tokenize)
    ds = kiln.ray.map_batches(ds, "minilm.kiln", input_columns=["input_ids", "attention_mask"],
                              output_columns=["embedding"], actors=2, cpus_per_actor=1)

`Predictor` is the callable class Ray Data's `map_batches` constructs once per
actor: it loads the program there (memory-mapped, so every actor on a node
shares one copy of the file's pages), sets kiln's thread pool to the actor's
CPUs, and maps each batch (a dict of numpy columns, a pandas DataFrame or a
pyarrow Table) to the method's outputs, one output row per input row. Dimension
0 of every input and output is the row dimension: batches are split into chunks
the method accepts and padded up to its minimum (or its fixed size), and the
outputs are sliced and concatenated back. docs/scaling.md is the guide.

`ray` is imported only by `map_batches` and the pyarrow path; `import kiln`
never needs it (`pip install kiln[ray]` installs it).
"""

from __future__ import annotations

import fcntl
import math
import os
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

import numpy as np

from ._program import load
from ._registry import set_num_threads
from .errors import InvalidArgument, InvalidInput, KilnError

__all__ = ["Predictor", "map_batches", "local_copy", "actor_pool", "row_bounds"]

PathLike = Union[str, os.PathLike]


class Predictor:
    """Runs one method of a .kiln program on Ray Data batches (a callable class for `map_batches`).

    program: a local path (memory-mapped) or a callable returning one, called
        once per actor (e.g. `lambda: kiln.ray.local_copy(url, dest, download)`).
    input_columns: the batch columns fed to the method's inputs, in order
        (default: the inputs' names).
    output_columns: names of the method's outputs in the result (default: their names).
    keep_columns: input columns copied unchanged into the result (e.g. an id).
    pad_ragged: {column: value} for columns whose rows have different shapes
        (token ids of different lengths): each chunk is padded with `value` to
        its longest row. A ragged column without a value is refused.
    pad_small: when a chunk has fewer rows than the method accepts (its minimum,
        or its fixed batch size), repeat its last row up to that size and drop
        the extra outputs (True, the default), or refuse the batch (False).
    num_threads: kiln's thread pool in this actor (default: the CPUs Ray
        assigned to it, so that `num_cpus` and the pool agree; None outside Ray
        leaves the pool alone).
    method, **load_options: the method to run and `kiln.load` options
        (kernels, isa, mmap, max_memory_bytes).

    A batch that fails raises the kiln error's type with a message naming the
    actor's batch number, the batch's size, the failing chunk's row range and,
    with `id_column`, the ids of its first and last rows.
    """

    def __init__(self, program: Union[PathLike, Callable[[], PathLike]], *,
                 input_columns: Optional[Sequence[str]] = None,
                 output_columns: Optional[Sequence[str]] = None, keep_columns: Sequence[str] = (),
                 pad_ragged: Optional[dict] = None, pad_small: bool = True, num_threads: Optional[int] = None,
                 id_column: Optional[str] = None, method: str = "forward", **load_options):
        path = program() if callable(program) else program
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidArgument(f"kiln.ray.Predictor: program must be a path (or a callable returning one), "
                                  f"not {type(path).__name__}")
        threads = num_threads if num_threads is not None else _ray_assigned_cpus()
        if threads is not None:
            set_num_threads(max(1, int(math.ceil(threads))))
        self.num_threads = threads
        self.path = os.fspath(path)
        self.program = load(self.path, **load_options)
        self.method = self.program.method(method)
        specs = self.method.input_specs
        self.input_columns = list(input_columns) if input_columns is not None else [s.name for s in specs]
        if len(self.input_columns) != len(specs):
            raise InvalidArgument(f"kiln.ray: method '{method}' of {self.path} takes {len(specs)} input(s) "
                                  f"({', '.join(s.name for s in specs)}), got input_columns={self.input_columns}")
        outs = self.method.output_specs
        self.output_columns = list(output_columns) if output_columns is not None else [s.name for s in outs]
        if len(self.output_columns) != len(outs):
            raise InvalidArgument(f"kiln.ray: method '{method}' of {self.path} returns {len(outs)} output(s), "
                                  f"got output_columns={self.output_columns}")
        self.keep_columns = list(keep_columns)
        self.pad_ragged = dict(pad_ragged or {})
        self.pad_small = pad_small
        self.id_column = id_column
        self.min_rows, self.max_rows = row_bounds(specs, f"method '{method}' of {self.path}")
        self.batches = 0

    # ------------------------------------------------------------------ one batch

    def __call__(self, batch):
        kind, columns = _columns(batch)
        self.batches += 1
        missing = [c for c in (*self.input_columns, *self.keep_columns) if c not in columns]
        if missing:
            raise InvalidInput(f"kiln.ray: batch {self.batches} of this actor has no column(s) {missing} "
                               f"(it has {sorted(columns)})")
        n = _num_rows(columns[self.input_columns[0]])
        outputs = [[] for _ in self.output_columns]
        for start in range(0, n, self.max_rows):
            stop = min(start + self.max_rows, n)
            try:
                chunk = self._run_chunk(columns, start, stop)
            except KilnError as e:
                message = (f"kiln.ray: batch {self.batches} of this actor ({n} rows) failed in rows "
                           f"{start}..{stop - 1}{self._ids(columns, start, stop)} of {self.path}: {e}")
                try:
                    error = type(e)(message)  # the same kind of error, so callers can still tell them apart
                except TypeError:
                    error = KilnError(message)
                raise error from e
            for acc, value in zip(outputs, chunk):
                acc.append(value)
        if n == 0:
            outputs = [np.zeros((0, *s.shape[1:]), s.dtype) for s in self.method.output_specs]
        else:
            outputs = [a[0] if len(a) == 1 else np.concatenate(a) for a in outputs]
        result = {name: value for name, value in zip(self.output_columns, outputs)}
        kept = {c: batch.column(c) if kind == "pyarrow" else columns[c]
                for c in self.keep_columns if c not in result}
        return _as_kind(kind, result, kept)

    def _run_chunk(self, columns: dict, start: int, stop: int) -> list:
        rows = stop - start
        want = max(rows, self.min_rows)
        if want > rows and not self.pad_small:
            raise InvalidInput(f"{rows} row(s), fewer than the {self.min_rows} the method takes "
                               f"(pad_small=False)")
        args = []
        for name, spec in zip(self.input_columns, self.method.input_specs):
            x = _stack_rows(columns[name][start:stop], name, self.pad_ragged.get(name))
            if x.dtype != spec.dtype and (np.can_cast(x.dtype, spec.dtype, "safe")
                                          or x.dtype.kind == np.dtype(spec.dtype).kind == "f"):
                x = x.astype(spec.dtype)  # int32 -> int64, float64 -> float32; anything else kiln refuses
            if want > rows:  # repeat the last row: a row the model accepts, whose outputs are dropped
                x = np.concatenate([x, np.repeat(x[-1:], want - rows, axis=0)])
            args.append(np.ascontiguousarray(x))
        results = self.method(*args)
        for name, y in zip(self.output_columns, results):
            if y.ndim == 0 or y.shape[0] != want:
                raise InvalidInput(f"output '{name}' has shape {tuple(y.shape)} for {want} input rows: "
                                   f"kiln.ray maps rows to rows (dimension 0 of every output)")
        return [y[:rows] for y in results]

    def _ids(self, columns: dict, start: int, stop: int) -> str:
        if not self.id_column or self.id_column not in columns:
            return ""
        ids = columns[self.id_column]
        first, last = (v.item() if isinstance(v, np.generic) else v for v in (ids[start], ids[stop - 1]))
        return f" ({self.id_column} {first!r}..{last!r})"


def row_bounds(specs, what: str) -> tuple:
    """(min_rows, max_rows) a method accepts along dimension 0 of its inputs:
    (min, bound) for a dynamic first dimension, (n, n) for a fixed one."""
    bounds = set()
    for s in specs:
        if not s.shape:
            raise InvalidArgument(f"kiln.ray: {what}: input '{s.name}' is a scalar; every input needs a row "
                                  f"dimension (dimension 0)")
        low = s.min_shape[0] if 0 in s.dynamic_dims and s.min_shape else s.shape[0]
        bounds.add((max(1, low), s.shape[0]))
    if len(bounds) != 1:
        raise InvalidArgument(f"kiln.ray: {what}: the inputs disagree on the rows they take "
                              f"({', '.join(f'{s.name}: {s.shape}' for s in specs)})")
    return bounds.pop()


# ---------------------------------------------------------------------- batch formats


def _columns(batch) -> tuple:
    """("dict" | "pandas" | "pyarrow", {name: column}) of a Ray Data batch."""
    if isinstance(batch, dict):
        return "dict", batch
    module = type(batch).__module__.split(".")[0]
    if module == "pandas":
        return "pandas", {c: batch[c].to_numpy() for c in batch.columns}
    if module == "pyarrow":
        return "pyarrow", {c: _arrow_to_numpy(batch.column(c)) for c in batch.column_names}
    raise InvalidInput(f"kiln.ray: a batch must be a dict of columns, a pandas DataFrame or a pyarrow Table, "
                       f"not {type(batch).__name__}")


def _arrow_to_numpy(column) -> np.ndarray:
    array = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    if hasattr(array, "to_numpy_ndarray"):  # pyarrow's fixed-shape tensor arrays
        return array.to_numpy_ndarray()
    return array.to_numpy(zero_copy_only=False)  # Ray's tensor extension arrays, lists, scalars


def _num_rows(column) -> int:
    return len(column)


def _stack_rows(column, name: str, pad_value) -> np.ndarray:
    """The rows of a column as one array: as is, or stacked from an object column of arrays
    (pandas / pyarrow tensor columns), or padded to the longest row for ragged ones."""
    x = np.asarray(column)
    if x.dtype != object:
        return x
    rows = [np.asarray(r) for r in x]
    shapes = {r.shape for r in rows}
    if len(shapes) <= 1:
        return np.stack(rows) if rows else x
    if pad_value is None:
        raise InvalidInput(f"column '{name}' has rows of different shapes ({sorted(shapes)[:3]}...): "
                           f"give pad_ragged={{'{name}': value}} to pad them to the longest")
    if len({r.ndim for r in rows}) != 1:
        raise InvalidInput(f"column '{name}' has rows of different ranks")
    longest = tuple(max(s[d] for s in shapes) for d in range(rows[0].ndim))
    out = np.full((len(rows), *longest), pad_value, dtype=np.result_type(*rows))
    for i, r in enumerate(rows):
        out[(i, *(slice(0, d) for d in r.shape))] = r
    return out


def _as_kind(kind: str, result: dict, kept: dict):
    """The outputs (numpy) and the kept input columns (as they came) in the batch's own format."""
    if kind == "dict":
        return {**result, **kept}
    if kind == "pandas":
        import pandas as pd

        return pd.DataFrame({**{k: list(v) if v.ndim > 1 else v for k, v in result.items()}, **kept})
    import pyarrow as pa

    return pa.table({**{k: _numpy_to_arrow(v) for k, v in result.items()}, **kept})


def _numpy_to_arrow(x: np.ndarray):
    import pyarrow as pa

    if x.ndim <= 1 and x.dtype != object:
        return pa.array(x)
    try:  # Ray's tensor columns, what Ray Data itself makes of numpy batches
        from ray.data.extensions import ArrowTensorArray

        return ArrowTensorArray.from_numpy(x)
    except ImportError:
        return pa.FixedShapeTensorArray.from_numpy_ndarray(np.ascontiguousarray(x))


def _ray_assigned_cpus() -> Optional[float]:
    """The CPUs Ray assigned to this worker, or None outside a Ray worker."""
    try:
        import ray
    except ImportError:
        return None
    if not ray.is_initialized():
        return None
    try:
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
    except AssertionError:  # the driver: Ray assigned it nothing
        return None
    return cpus or None


# ---------------------------------------------------------------------- the common case


def map_batches(ds, program: PathLike, *, input_columns: Optional[Sequence[str]] = None,
                output_columns: Optional[Sequence[str]] = None, actors: int = 1, cpus_per_actor: float = 1,
                batch_size: Optional[int] = None, batch_format: str = "numpy", method: str = "forward",
                **predictor_options):
    """`ds.map_batches(Predictor, ...)` with `actors` actors of `cpus_per_actor` CPUs each
    (kiln's pool in each actor gets that many threads) and batches of `batch_size`
    rows (default: the method's row bound, so a batch is one call). Other keywords
    go to `Predictor` (keep_columns, pad_ragged, pad_small, id_column, kernels, ...).

    The program path must exist on every node that runs an actor: see `local_copy`."""
    if batch_size is None:
        spec = load(program).method_spec(method)
        batch_size = row_bounds(spec.input_specs, f"method '{method}' of {os.fspath(program)}")[1]
    options = dict(predictor_options, input_columns=input_columns, output_columns=output_columns, method=method)
    return ds.map_batches(Predictor, fn_constructor_args=(program,), fn_constructor_kwargs=options,
                          num_cpus=cpus_per_actor, batch_size=batch_size, batch_format=batch_format,
                          **actor_pool(actors))


def actor_pool(actors: int) -> dict:
    """The map_batches keyword for a fixed pool of `actors` actors: `compute` since Ray 2.51
    (which deprecated `concurrency`), `concurrency` before."""
    import ray

    version = tuple(int(p) for p in ray.__version__.split(".")[:2] if p.isdigit())
    if version >= (2, 51):
        return {"compute": ray.data.ActorPoolStrategy(size=actors)}
    return {"concurrency": actors}


def local_copy(source: str, dest: PathLike, download: Callable[[str, str], None]) -> str:
    """A local path for a program that lives elsewhere (object storage, a URL), fetched once per node.

    The first caller on a node takes an exclusive lock beside `dest`, calls
    `download(source, tmp_path)` and renames the result to `dest` (so no
    process ever maps a half-written file); every other caller waits for the
    lock and finds `dest` there. Use it as `Predictor(lambda: local_copy(...))`."""
    dest = Path(dest)
    if dest.is_file():
        return str(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{dest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not dest.is_file():
                tmp = f"{dest}.part.{os.getpid()}"
                download(source, tmp)
                os.replace(tmp, dest)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return str(dest)
