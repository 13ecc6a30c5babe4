"""The operators kiln can run, and how the exporter normalizes their arguments.

This is the ONE list of supported operators on the export side: ATen
operators, and kiln's own fused operators (namespace "kiln", declared for
torch in fused_ops.py and put in the graph by the fusion passes). The
runtime's kernel registry is the real authority when a program is loaded; the
exporter refuses anything outside this list so that the failure happens at
export time, with the model's module paths in the message.

Keys are "name.overload", e.g. "aten::linear.default"; in the file an operator
is written as name "aten::linear" and overload "default".

Custom operators: an operator of any namespace neither PyTorch nor kiln owns
(not in BUILTIN_NAMESPACES), e.g. "kiln_demo::scaled_tanh" declared with
torch.library.custom_op, is accepted as it is, without being listed here: its
kernel comes from a plugin library, and whether one is registered is checked
by the runtime when a method is loaded (MissingKernel). It gets the generic
conventions only (one value per schema argument, defaults filled in; no
casts, no dimension or size rewriting), it is never constant-folded, and it
must be functional and return tensors (custom_operator_problem). See
docs/extending.md.

Argument conventions applied by the lowering (docs/format.md):
  * one input value per schema argument, in schema order, keyword-only
    arguments included and defaults filled in from the schema;
  * dimension arguments are made non-negative (see OpSpec.dim_args);
  * view/expand sizes are the concrete output sizes (no -1);
  * slice start/end are clamped to [0, size], select index is non-negative,
    when they are plain ints; symbolic values (dynamic shapes) are passed as
    they are and the kernels clamp/wrap like ATen (slice_scatter too);
  * index_put, index_copy and slice_scatter may get output 0 aliasing self
    (an in-place state update); their kernels then write only what changes;
  * pooling `stride=[]` is replaced by kernel_size;
  * Python scalars passed for Tensor arguments become 0-d constants with the
    output dtype (bool for condition/mask arguments);
  * tensor arguments listed in OpSpec.cast_args have the output dtype (the
    insert_dtype_casts pass adds aten::_to_copy where needed).

Torch-free at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence, Tuple


@dataclass(frozen=True)
class OpSpec:
    key: str
    # Tensors the kernel writes; extra outputs of the ATen op must be unused.
    num_outputs: int = 1
    # (argument name, rank source) of dimension arguments made non-negative;
    # rank source is "self" (rank of the first tensor argument) or "out".
    dim_args: Tuple[Tuple[str, str], ...] = ()
    # Tensor arguments that must have the output dtype.
    cast_args: Tuple[str, ...] = ()
    # Tensor arguments whose 0-d constants (from Python scalars) are bool.
    bool_args: Tuple[str, ...] = ()
    # Extra argument normalization: f(args, in_shape, out_shape) -> None (in place).
    normalize: Optional[Callable[[Dict[str, object], Sequence[int], Sequence[int]], None]] = None
    # Tensor arguments whose float16 constants stay float16 in the file (quantization scales);
    # other float16 constants are stored as float32.
    half_args: Tuple[str, ...] = ()
    # The decomposition table leaves it whole (frontend/decompositions.py): it has a kernel of its
    # own. The other operators are core ATen and survive decomposition anyway.
    keep_whole: bool = False


def _pool_stride(args, in_shape, out_shape):
    if not args.get("stride"):
        args["stride"] = list(args["kernel_size"])


def _out_sizes(name):
    # Dynamic dims stay symbolic (torch.SymInt): the lowering computes them at run time.
    def f(args, in_shape, out_shape):
        args[name] = [s if not isinstance(s, int) else int(s) for s in out_shape]
    return f


_INT64_MAX = (1 << 63) - 1


def _slice(args, in_shape, out_shape):
    size = in_shape[args["dim"]]
    start, end = args.get("start"), args.get("end")
    start = 0 if start is None else start
    end = _INT64_MAX if end is None else end
    if not all(isinstance(v, int) for v in (size, start, end)):
        args["start"], args["end"] = start, end  # symbolic: the kernel clamps at run time
        return
    if start < 0:
        start += size
    if end < 0:
        end += size
    args["start"] = min(max(start, 0), size)
    args["end"] = min(max(end, args["start"]), size)


def _select(args, in_shape, out_shape):
    index, size = args["index"], in_shape[args["dim"]]
    if isinstance(index, int) and isinstance(size, int) and index < 0:
        index += size  # with a dynamic size, the kernel wraps a negative index at run time
    args["index"] = index


def _sdpa(args, in_shape, out_shape):
    # The kernel has no dropout; refuse at export rather than fail every run.
    dropout = args.get("dropout_p") or 0.0
    if isinstance(dropout, (int, float)) and dropout != 0:
        from ..errors import ExportError

        raise ExportError(f"scaled_dot_product_attention with dropout_p={dropout} is not supported: "
                          "kiln runs inference only (pass dropout_p=0.0, e.g. "
                          "dropout_p=self.dropout if self.training else 0.0)")


def _grid_sampler(args, in_shape, out_shape):
    # The kernel has bilinear (0) and nearest (1); refuse bicubic at export rather than fail every run.
    mode = args.get("interpolation_mode")
    if isinstance(mode, int) and mode not in (0, 1):
        from ..errors import ExportError

        raise ExportError(f"grid_sample with interpolation mode {mode} (bicubic) is not supported: kiln "
                          "runs mode='bilinear' and mode='nearest'")


_ELEMENTWISE_BINARY = ("self", "other")
_DIM = (("dim", "self"),)

OPERATORS: Tuple[OpSpec, ...] = (
    OpSpec("aten::linear.default", keep_whole=True),
    OpSpec("aten::addmm.default"),
    OpSpec("aten::mm.default"),
    OpSpec("aten::bmm.default"),
    OpSpec("aten::matmul.default", keep_whole=True),
    OpSpec("aten::conv2d.default", keep_whole=True),
    OpSpec("aten::max_pool2d.default", normalize=_pool_stride, keep_whole=True),
    OpSpec("aten::avg_pool2d.default", normalize=_pool_stride, keep_whole=True),
    OpSpec("aten::adaptive_avg_pool2d.default", keep_whole=True),
    OpSpec("aten::relu.default"),
    OpSpec("aten::hardtanh.default", keep_whole=True),
    OpSpec("aten::sigmoid.default"),
    OpSpec("aten::tanh.default"),
    OpSpec("aten::gelu.default", keep_whole=True),
    OpSpec("aten::silu.default", keep_whole=True),
    OpSpec("aten::hardswish.default", keep_whole=True),
    OpSpec("aten::hardsigmoid.default", keep_whole=True),
    OpSpec("aten::neg.default"),
    OpSpec("aten::exp.default"),
    OpSpec("aten::sqrt.default"),
    OpSpec("aten::rsqrt.default"),
    OpSpec("aten::abs.default"),
    OpSpec("aten::log.default"),
    OpSpec("aten::pow.Tensor_Scalar"),
    OpSpec("aten::clamp.default"),
    OpSpec("aten::add.Tensor", cast_args=_ELEMENTWISE_BINARY),
    OpSpec("aten::sub.Tensor", cast_args=_ELEMENTWISE_BINARY),
    OpSpec("aten::mul.Tensor", cast_args=_ELEMENTWISE_BINARY),
    OpSpec("aten::div.Tensor", cast_args=_ELEMENTWISE_BINARY),
    OpSpec("aten::mean.dim", dim_args=(("dim", "self"),)),
    OpSpec("aten::sum.dim_IntList", dim_args=(("dim", "self"),)),
    OpSpec("aten::mean.default"),
    OpSpec("aten::sum.default"),
    OpSpec("aten::_softmax.default", dim_args=(("dim", "self"),), keep_whole=True),
    OpSpec("aten::_log_softmax.default", dim_args=(("dim", "self"),), keep_whole=True),
    OpSpec("aten::layer_norm.default", keep_whole=True),
    OpSpec("aten::_native_batch_norm_legit_no_training.default", num_outputs=1),
    OpSpec("aten::view.default", normalize=_out_sizes("size")),
    OpSpec("aten::permute.default", dim_args=(("dims", "self"),)),
    OpSpec("aten::transpose.int", dim_args=(("dim0", "self"), ("dim1", "self"))),
    OpSpec("aten::cat.default", dim_args=(("dim", "out"),), cast_args=("tensors",)),
    OpSpec("aten::slice.Tensor", dim_args=(("dim", "self"),), normalize=_slice),
    OpSpec("aten::select.int", dim_args=(("dim", "self"),), normalize=_select),
    OpSpec("aten::squeeze.dims", dim_args=(("dim", "self"),)),
    OpSpec("aten::unsqueeze.default", dim_args=(("dim", "out"),)),
    OpSpec("aten::expand.default", normalize=_out_sizes("size")),
    OpSpec("aten::diagonal.default", dim_args=(("dim1", "self"), ("dim2", "self"))),
    OpSpec("aten::repeat.default"),
    OpSpec("aten::clone.default"),
    OpSpec("aten::embedding.default"),
    OpSpec("aten::_to_copy.default"),
    OpSpec("aten::where.self", cast_args=_ELEMENTWISE_BINARY, bool_args=("condition",)),
    OpSpec("aten::masked_fill.Scalar", cast_args=("self",), bool_args=("mask",)),
    # indexing and scatter (index_put, index_copy and slice_scatter may update self in place)
    OpSpec("aten::index.Tensor"),
    OpSpec("aten::index_put.default", cast_args=("values",)),
    OpSpec("aten::index_copy.default", dim_args=_DIM, cast_args=("source",)),
    OpSpec("aten::slice_scatter.default", dim_args=_DIM, cast_args=("src",)),
    OpSpec("aten::index_select.default", dim_args=_DIM),
    OpSpec("aten::gather.default", dim_args=_DIM),
    # data-dependent output sizes (bounded at export: docs/format.md, Data-dependent sizes)
    OpSpec("aten::nonzero.default"),
    OpSpec("aten::masked_select.default", bool_args=("mask",)),
    OpSpec("aten::_unique2.default", num_outputs=3),
    # factories
    OpSpec("aten::arange.start_step"),
    OpSpec("aten::arange.start"),
    OpSpec("aten::arange.default"),
    OpSpec("aten::full.default"),
    OpSpec("aten::full_like.default"),
    OpSpec("aten::scalar_tensor.default"),
    # comparisons, logical and bitwise
    OpSpec("aten::eq.Tensor"), OpSpec("aten::eq.Scalar"),
    OpSpec("aten::ne.Tensor"), OpSpec("aten::ne.Scalar"),
    OpSpec("aten::lt.Tensor"), OpSpec("aten::lt.Scalar"),
    OpSpec("aten::le.Tensor"), OpSpec("aten::le.Scalar"),
    OpSpec("aten::gt.Tensor"), OpSpec("aten::gt.Scalar"),
    OpSpec("aten::ge.Tensor"), OpSpec("aten::ge.Scalar"),
    OpSpec("aten::maximum.default", cast_args=_ELEMENTWISE_BINARY),
    OpSpec("aten::minimum.default", cast_args=_ELEMENTWISE_BINARY),
    OpSpec("aten::logical_not.default"),
    OpSpec("aten::logical_and.default"),
    OpSpec("aten::logical_or.default"),
    OpSpec("aten::logical_xor.default"),
    OpSpec("aten::bitwise_not.default"),
    OpSpec("aten::bitwise_and.Tensor", cast_args=_ELEMENTWISE_BINARY),
    OpSpec("aten::bitwise_or.Tensor", cast_args=_ELEMENTWISE_BINARY),
    OpSpec("aten::bitwise_xor.Tensor", cast_args=_ELEMENTWISE_BINARY),
    # reductions along dims
    OpSpec("aten::argmax.default", dim_args=_DIM),
    OpSpec("aten::argmin.default", dim_args=_DIM),
    OpSpec("aten::max.dim", num_outputs=2, dim_args=_DIM),
    OpSpec("aten::min.dim", num_outputs=2, dim_args=_DIM),
    OpSpec("aten::amax.default", dim_args=_DIM),
    OpSpec("aten::amin.default", dim_args=_DIM),
    OpSpec("aten::any.dim", dim_args=_DIM),
    OpSpec("aten::any.dims", dim_args=_DIM),
    OpSpec("aten::any.default"),
    OpSpec("aten::prod.dim_int", dim_args=_DIM, cast_args=("self",)),
    OpSpec("aten::prod.default", cast_args=("self",)),
    OpSpec("aten::topk.default", num_outputs=2, dim_args=_DIM),
    OpSpec("aten::cumsum.default", dim_args=_DIM),
    OpSpec("aten::linalg_vector_norm.default", dim_args=_DIM, cast_args=("self",)),
    # elementwise math
    OpSpec("aten::cos.default", cast_args=("self",)),
    OpSpec("aten::sin.default", cast_args=("self",)),
    OpSpec("aten::erf.default", cast_args=("self",)),
    OpSpec("aten::log1p.default", cast_args=("self",)),
    OpSpec("aten::expm1.default", cast_args=("self",)),
    OpSpec("aten::log2.default", cast_args=("self",)),
    OpSpec("aten::log10.default", cast_args=("self",)),
    OpSpec("aten::tan.default", cast_args=("self",)),
    OpSpec("aten::asin.default", cast_args=("self",)),
    OpSpec("aten::acos.default", cast_args=("self",)),
    OpSpec("aten::atan.default", cast_args=("self",)),
    OpSpec("aten::sinh.default", cast_args=("self",)),
    OpSpec("aten::cosh.default", cast_args=("self",)),
    OpSpec("aten::asinh.default", cast_args=("self",)),
    OpSpec("aten::acosh.default", cast_args=("self",)),
    OpSpec("aten::atanh.default", cast_args=("self",)),
    OpSpec("aten::floor.default", cast_args=("self",)),
    OpSpec("aten::ceil.default", cast_args=("self",)),
    OpSpec("aten::trunc.default", cast_args=("self",)),
    OpSpec("aten::round.default", cast_args=("self",)),
    OpSpec("aten::isnan.default"),
    OpSpec("aten::isinf.default"),
    OpSpec("aten::reciprocal.default", cast_args=("self",)),
    OpSpec("aten::sign.default"),
    OpSpec("aten::pow.Tensor_Tensor", cast_args=("self", "exponent")),
    OpSpec("aten::atan2.default", cast_args=_ELEMENTWISE_BINARY),
    OpSpec("aten::pow.Scalar", cast_args=("exponent",)),
    OpSpec("aten::div.Tensor_mode", cast_args=_ELEMENTWISE_BINARY),
    OpSpec("aten::remainder.Tensor", cast_args=_ELEMENTWISE_BINARY),
    OpSpec("aten::remainder.Scalar", cast_args=("self",)),
    OpSpec("aten::fmod.Tensor", cast_args=_ELEMENTWISE_BINARY),
    OpSpec("aten::fmod.Scalar", cast_args=("self",)),
    OpSpec("aten::clamp.Tensor", cast_args=("self", "min", "max")),
    OpSpec("aten::leaky_relu.default", cast_args=("self",)),
    OpSpec("aten::elu.default", cast_args=("self",)),
    OpSpec("aten::logsumexp.default", dim_args=_DIM, cast_args=("self",), keep_whole=True),
    # padding, resizing and reordering
    OpSpec("aten::constant_pad_nd.default"),
    OpSpec("aten::upsample_nearest2d.default"),
    OpSpec("aten::upsample_bilinear2d.default"),
    OpSpec("aten::flip.default", dim_args=(("dims", "self"),)),
    OpSpec("aten::roll.default", dim_args=(("dims", "self"),), keep_whole=True),
    OpSpec("aten::tril.default", keep_whole=True),
    OpSpec("aten::triu.default", keep_whole=True),
    # sorting, cumulative products, statistics
    OpSpec("aten::sort.default", num_outputs=2, dim_args=_DIM),
    OpSpec("aten::sort.stable", num_outputs=2, dim_args=_DIM),
    OpSpec("aten::cumprod.default", dim_args=_DIM),
    OpSpec("aten::var.correction", dim_args=_DIM),
    OpSpec("aten::group_norm.default", keep_whole=True),
    OpSpec("aten::scaled_dot_product_attention.default", normalize=_sdpa, keep_whole=True),
    # pooling with indices, scatter (conv1d and the 1-d pools are canonicalized onto the 2-d ones)
    OpSpec("aten::max_pool2d_with_indices.default", num_outputs=2, normalize=_pool_stride),
    OpSpec("aten::scatter.src", dim_args=_DIM, cast_args=("src",)),
    OpSpec("aten::scatter.value", dim_args=_DIM),
    OpSpec("aten::scatter_add.default", dim_args=_DIM, cast_args=("src",)),
    OpSpec("aten::scatter_reduce.two", dim_args=_DIM, cast_args=("src",)),
    OpSpec("aten::conv_transpose2d.input", keep_whole=True),
    OpSpec("aten::grid_sampler_2d.default", normalize=_grid_sampler),
    OpSpec("aten::max_pool3d_with_indices.default", num_outputs=2, normalize=_pool_stride),
    OpSpec("aten::avg_pool3d.default", normalize=_pool_stride),
    OpSpec("aten::_adaptive_avg_pool3d.default"),
    OpSpec("aten::conv3d.default"),
    # fused by the exporter (passes/fuse_epilogues.py; schemas in fused_ops.py)
    OpSpec("kiln::fused_linear.default"),
    OpSpec("kiln::fused_conv2d.default"),
    OpSpec("kiln::sdpa_rows.default"),  # passes/fuse_cache_attention.py
    # weight-only quantized (libkiln_quantized.so.0; schemas in quantize/ops.py, docs/quantization.md)
    OpSpec("kiln_quantized::linear.default", half_args=("scales", "mins")),
    OpSpec("kiln_quantized::embedding.default", half_args=("scales", "mins")),
)

#: {key: OpSpec} of OPERATORS.
OP_SPECS: Dict[str, OpSpec] = {spec.key: spec for spec in OPERATORS}
assert len(OP_SPECS) == len(OPERATORS), "an operator is listed twice"
SUPPORTED_OPERATORS: Tuple[str, ...] = tuple(OP_SPECS)

# Operators the decomposition table must leave alone: the ones kept whole, and the
# spellings canonicalize_operators rewrites into them.
KEEP_UNDECOMPOSED: Tuple[str, ...] = tuple(spec.key for spec in OPERATORS if spec.keep_whole) + (
    "aten::conv2d.padding",        # -> conv2d.default
    "aten::softmax.int",           # -> _softmax.default
    "aten::log_softmax.int",       # -> _log_softmax.default
)


def op_key(target) -> str:
    """"aten::linear.default" for torch.ops.aten.linear.default; a readable
    name for anything else an FX node can call."""
    schema = getattr(target, "_schema", None)
    if schema is not None:
        return f"{schema.name}.{schema.overload_name or 'default'}"
    name = getattr(target, "__name__", None) or repr(target)
    module = getattr(target, "__module__", None)
    if module in ("_operator", "operator"):
        return f"operator.{name}"
    return f"{module}.{name}" if module else name


def is_supported(key: str) -> bool:
    return key in OP_SPECS


#: Namespaces owned by PyTorch, and kiln's own. Their operators run only if
#: listed in SUPPORTED_OPERATORS; an operator of any other namespace is a
#: custom operator.
BUILTIN_NAMESPACES = frozenset({"aten", "prims", "prim", "kiln", "kiln_quantized"})


def namespace_of(key: str) -> str:
    """"kiln_demo" for "kiln_demo::scaled_tanh.default"; "" if there is none."""
    name, sep, _ = key.partition("::")
    return name if sep else ""


def is_custom_operator(target) -> bool:
    """True for an operator overload with a schema from a namespace neither
    PyTorch nor kiln owns (a custom operator declared with torch.library)."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return False
    namespace = namespace_of(schema.name)
    return bool(namespace) and namespace not in BUILTIN_NAMESPACES


def _type_name(t) -> str:
    return str(t).replace(" ", "")


def custom_operator_problem(target) -> Optional[str]:
    """Why kiln cannot call the custom operator `target`, or None if it can.

    A kiln kernel reads its inputs and writes its outputs, all tensors: the
    operator must not mutate its arguments and must return one or more
    tensors (several Tensor returns, or one Tensor[]).
    """
    schema = target._schema
    mutated = [a.name for a in schema.arguments
               if a.alias_info is not None and getattr(a.alias_info, "is_write", False)]
    if mutated or getattr(schema, "is_mutable", False):
        return (f"it mutates {', '.join(repr(m) for m in mutated) or 'its arguments'}; kiln "
                "kernels are functional: declare it with mutates_args=() and return new tensors")
    returns = [_type_name(r.type) for r in schema.returns]
    if not returns:
        return "it returns nothing; a kiln kernel must return at least one tensor"
    if returns == ["List[Tensor]"] or all(r == "Tensor" for r in returns):
        return None
    return (f"it returns ({', '.join(returns)}); kiln kernels return tensors only "
            "(Tensor, several Tensors, or Tensor[])")


def spec_for(target, num_outputs: int = 1) -> Optional[OpSpec]:
    """The OpSpec of the operator `target` calls: the one of SUPPORTED_OPERATORS,
    a generic one for a usable custom operator (writing `num_outputs` tensors),
    or None if kiln cannot run it."""
    key = op_key(target)
    spec = OP_SPECS.get(key)
    if spec is not None:
        return spec
    if is_custom_operator(target) and custom_operator_problem(target) is None:
        return OpSpec(key, num_outputs=num_outputs)
    return None


def split_key(key: str) -> Tuple[str, str]:
    """("aten::linear", "default") from "aten::linear.default"."""
    name, _, overload = key.rpartition(".")
    return name, overload


def normalize_dims(args: Dict[str, object], spec: OpSpec, in_rank: int, out_rank: int) -> None:
    """Makes the dimension arguments of `spec` non-negative, in place."""
    for name, source in spec.dim_args:
        value = args.get(name)
        if value is None:
            continue
        rank = max(out_rank if source == "out" else in_rank, 1)
        if isinstance(value, (list, tuple)):
            args[name] = [int(d) + rank if int(d) < 0 else int(d) for d in value]
        else:
            args[name] = int(value) + rank if int(value) < 0 else int(value)
