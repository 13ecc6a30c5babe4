"""Rewrite equivalent ATen spellings into the one form kiln's kernels implement.

Why: torch.export and its decompositions produce many spellings of the same
computation (convolution vs conv2d, reshape/_unsafe_view/flatten vs view,
softmax.int vs _softmax, add.Scalar vs add.Tensor, squeeze.dim vs
squeeze.dims, upsample_*2d.vec vs .default, ...). The runtime implements one kernel per computation; this
pass maps every spelling onto it so the supported-operator list stays small.
A 3-d convolution becomes conv3d; a 1-d one, transposed or not, runs as the
2-d one on a height of 1
(the 1-d pools already reach kiln as unsqueeze + 2-d pool + squeeze);
max_pool2d_with_indices whose indices are used stays as it is (it has a kernel
of its own). Rewrites that cannot be expressed exactly (asymmetric "same"
padding) are left alone and reported as unsupported, or raise ExportError with
the reason.
"""

from __future__ import annotations

import warnings

import torch
import torch.fx as fx

from ...errors import ExportError
from ..diagnostics import describe_node
from .manager import PassContext, bound_args, getitem_users, same_shape

aten = torch.ops.aten


def _location(node: fx.Node) -> str:
    return describe_node(node)


def _replace_first_output(ctx: PassContext, node: fx.Node, new_target, args, kwargs=None) -> bool:
    """For a multi-output op of which only output 0 is used: call `new_target`
    (one output) instead and point the getitem(node, 0) users at it."""
    users = getitem_users(node)
    if set(users) - {0}:
        return False
    new = ctx.call(new_target, args, kwargs, like=node, val=node.meta["val"][0])
    for getitem in users.get(0, []):
        ctx.replace(getitem, new)
    ctx.graph.erase_node(node)
    return True


def _conv1d(ctx, node, a):
    """A 1-d convolution (N, C, L) is the 2-d one on (N, C, 1, L) with a (O, C/g, 1, K) weight:
    unsqueeze input and weight at dim 2, conv2d with the height's stride 1, padding 0 and
    dilation 1, squeeze dim 2 of the result."""
    x, weight = a["input"], a["weight"]
    if len(ctx.shape(x)) != 3 or len(a["stride"]) != 1 or len(a["padding"]) != 1 or len(a["dilation"]) != 1:
        return False
    x2 = ctx.call(aten.unsqueeze.default, (x, 2), like=node)
    w2 = ctx.call(aten.unsqueeze.default, (weight, 2), like=node)
    y2 = ctx.call(aten.conv2d.default, (x2, w2, a["bias"], [1, a["stride"][0]], [0, a["padding"][0]],
                                        [1, a["dilation"][0]], a["groups"]), like=node)
    ctx.replace(node, ctx.call(aten.squeeze.dims, (y2, [2]), like=node, val=node.meta["val"]))
    return True


def _conv_transpose(ctx, node, a):
    """A transposed convolution: conv_transpose2d.input for a 4-d weight; for a 3-d one (1-d, input
    (N, C, L)) the same on a height of 1, as for conv1d."""
    x, weight = a["input"], a["weight"]
    rank = len(ctx.shape(weight))
    params = [list(a[k]) for k in ("stride", "padding", "output_padding", "dilation")]
    if rank == 4 and all(len(v) == 2 for v in params):
        stride, padding, output_padding, dilation = params
        ctx.replace(node, ctx.call(aten.conv_transpose2d.input, (x, weight, a["bias"], stride, padding,
                                                                 output_padding, a["groups"], dilation),
                                   like=node, val=node.meta["val"]))
        return True
    if rank != 3 or len(ctx.shape(x)) != 3 or not all(len(v) == 1 for v in params):
        return False  # reported as unsupported aten::convolution
    # the height: stride 1, padding 0, output_padding 0, dilation 1
    stride, padding, output_padding, dilation = ([h, v[0]] for h, v in zip((1, 0, 0, 1), params))
    x2 = ctx.call(aten.unsqueeze.default, (x, 2), like=node)
    w2 = ctx.call(aten.unsqueeze.default, (weight, 2), like=node)
    y2 = ctx.call(aten.conv_transpose2d.input, (x2, w2, a["bias"], stride, padding, output_padding, a["groups"],
                                                dilation), like=node)
    ctx.replace(node, ctx.call(aten.squeeze.dims, (y2, [2]), like=node, val=node.meta["val"]))
    return True


def _convolution(ctx, node):
    a = bound_args(node)
    weight = a["weight"]
    if a["transposed"]:
        return _conv_transpose(ctx, node, a)
    if len(ctx.shape(weight)) == 3:
        return _conv1d(ctx, node, a)
    if len(ctx.shape(weight)) == 5:
        ctx.replace(node, ctx.call(aten.conv3d.default, (a["input"], weight, a["bias"], list(a["stride"]),
                                                         list(a["padding"]), list(a["dilation"]), a["groups"]),
                                   like=node, val=node.meta["val"]))
        return True
    if len(ctx.shape(weight)) != 4:
        return False  # reported as unsupported aten::convolution
    new = ctx.call(aten.conv2d.default, (a["input"], weight, a["bias"], list(a["stride"]),
                                         list(a["padding"]), list(a["dilation"]), a["groups"]),
                   like=node, val=node.meta["val"])
    ctx.replace(node, new)
    return True


def _conv2d_padding(ctx, node):
    a = bound_args(node)
    padding, weight = a["padding"], a["weight"]
    kernel = ctx.shape(weight)[2:]
    stride = list(a["stride"]) if len(a["stride"]) == 2 else list(a["stride"]) * 2
    dilation = list(a["dilation"]) if len(a["dilation"]) == 2 else list(a["dilation"]) * 2
    if padding == "valid":
        pads = [0, 0]
    elif padding == "same":
        pads = []
        for k, d in zip(kernel, dilation):
            total = d * (k - 1)
            if total % 2:
                raise ExportError(
                    f"conv2d with padding='same' needs asymmetric padding for kernel size "
                    f"{k} and dilation {d}, which kiln's conv2d does not support "
                    f"({_location(node)}); use an odd kernel or explicit padding")
            pads.append(total // 2)
    else:
        raise ExportError(f"conv2d padding={padding!r} is not supported ({_location(node)})")
    new = ctx.call(aten.conv2d.default, (a["input"], weight, a["bias"], stride, pads, dilation,
                                         a["groups"]), like=node, val=node.meta["val"])
    ctx.replace(node, new)
    return True


def _max_pool_with_indices(ctx, node):
    a = bound_args(node)
    return _replace_first_output(ctx, node, aten.max_pool2d.default, (
        a["self"], list(a["kernel_size"]), list(a["stride"]), list(a["padding"]),
        list(a["dilation"]), a["ceil_mode"]))


def _scatter_reduce_legacy(ctx, node):
    """scatter(self, dim, index, src, reduce="add" | "multiply") is scatter_reduce.two with
    "sum" | "prod" and include_self=True."""
    a = bound_args(node)
    reduce = {"add": "sum", "multiply": "prod"}.get(a["reduce"])
    if reduce is None:
        return False  # ATen refuses it too
    ctx.replace(node, ctx.call(aten.scatter_reduce.two, (a["self"], a["dim"], a["index"], a["src"], reduce, True),
                               like=node, val=node.meta["val"]))
    return True


def _batch_norm_no_stats(ctx, node):
    """Batch norm with statistics of its own input (what instance_norm becomes: its input viewed as
    (1, N * C, ...), the weight and bias repeated N times) is group_norm with one group per channel
    when the batch is 1, and only the normalized output is used."""
    a = bound_args(node)
    shape = ctx.shape(a["input"])
    if len(shape) < 3 or not isinstance(shape[0], int) or shape[0] != 1 or not isinstance(shape[1], int):
        return False  # reported as unsupported
    return _replace_first_output(ctx, node, aten.group_norm.default, (
        a["input"], shape[1], a["weight"], a["bias"], float(a["eps"]), True))


def _native_layer_norm(ctx, node):
    a = bound_args(node)
    return _replace_first_output(ctx, node, aten.layer_norm.default, (
        a["input"], list(a["normalized_shape"]), a["weight"], a["bias"], a["eps"], False))


def _simple(new_target):
    def rewrite(ctx, node):
        new = ctx.call(new_target, node.args, node.kwargs, like=node, val=node.meta["val"])
        ctx.replace(node, new)
        return True
    return rewrite


def _softmax_like(new_target):
    def rewrite(ctx, node):
        a = bound_args(node)
        x, dtype = a["self"], a["dtype"]
        if dtype is not None and dtype != ctx.dtype(x):
            x = ctx.call(aten._to_copy.default, (x,), {"dtype": dtype}, like=node)
        new = ctx.call(new_target, (x, a["dim"], False), like=node, val=node.meta["val"])
        ctx.replace(node, new)
        return True
    return rewrite


def _to_view(ctx, node):
    new = ctx.call(aten.view.default, (node.args[0], ctx.shape(node)), like=node, val=node.meta["val"])
    ctx.replace(node, new)
    return True


def _copy(ctx, node):
    """copy(self, src) is src broadcast to self's shape in self's dtype (what
    `buf[2:6] = x` becomes, before a slice_scatter): an expand and a cast."""
    a = bound_args(node)
    target, src = a["self"], a["src"]
    x = src
    if ctx.dtype(src) != ctx.dtype(target):
        x = ctx.call(aten._to_copy.default, (x,), {"dtype": ctx.dtype(target)}, like=node)
    if not same_shape(ctx.shape(src), ctx.shape(target)):
        x = ctx.call(aten.expand.default, (x, ctx.shape(target)), like=node, val=node.meta["val"])
    ctx.replace(node, x)
    return True


def _t(ctx, node):
    x = node.args[0]
    if len(ctx.shape(x)) < 2:
        ctx.replace(node, x)
    else:
        ctx.replace(node, ctx.call(aten.permute.default, (x, [1, 0]), like=node, val=node.meta["val"]))
    return True


def _squeeze(ctx, node):
    x = node.args[0]
    shape = ctx.shape(x)
    if node.target is aten.squeeze.default:
        # A dynamic dim is never squeezed: its size may be 1 at run time only sometimes.
        dims = [i for i, s in enumerate(shape) if isinstance(s, int) and s == 1]
    else:
        dims = [node.args[1] if len(node.args) > 1 else node.kwargs["dim"]]
    ctx.replace(node, ctx.call(aten.squeeze.dims, (x, dims), like=node, val=node.meta["val"]))
    return True


def _scalar_binary(new_target, swap=False):
    def rewrite(ctx, node):
        a = bound_args(node)
        self_, other = (a["other"], a["self"]) if swap else (a["self"], a["other"])
        kwargs = {"alpha": a["alpha"]} if "alpha" in a and a["alpha"] != 1 else {}
        ctx.replace(node, ctx.call(new_target, (self_, other), kwargs, like=node, val=node.meta["val"]))
        return True
    return rewrite


def _on_bools(logical, otherwise=None):
    """mul and add of bools are logical and / or (what ATen computes for bool tensors), which
    kiln has kernels for; other dtypes go to `otherwise` (or stay as they are)."""
    def rewrite(ctx, node):
        if ctx.dtype(node) != torch.bool:
            return otherwise(ctx, node) if otherwise is not None else False
        a = bound_args(node)
        ctx.replace(node, ctx.call(logical, (a["self"], a["other"]), like=node, val=node.meta["val"]))
        return True
    return rewrite


def _where_scalar(ctx, node):
    a = bound_args(node)
    ctx.replace(node, ctx.call(aten.where.self, (a["condition"], a["self"], a["other"]),
                               like=node, val=node.meta["val"]))
    return True


def _masked_fill_tensor(ctx, node):
    a = bound_args(node)
    value = a["value"]
    if not ctx.is_constant(value) or ctx.constants[value].numel() != 1:
        return False
    scalar = ctx.constants[value].reshape(()).item()
    ctx.replace(node, ctx.call(aten.masked_fill.Scalar, (a["self"], a["mask"], scalar),
                               like=node, val=node.meta["val"]))
    return True


def _clamp_one_side(side):
    def rewrite(ctx, node):
        x, bound = node.args[0], node.args[1]
        args = (x, bound, None) if side == "min" else (x, None, bound)
        ctx.replace(node, ctx.call(aten.clamp.default, args, like=node, val=node.meta["val"]))
        return True
    return rewrite


def _upsample_vec(new_target, *extra):
    """upsample_*2d.vec(input, output_size?, [align_corners,] scale_factors?) is what eager runs as
    upsample_*2d.default(input, the output's [H, W], [align_corners,] scales_h, scales_w): the output
    size from the node (symbolic when dynamic), the scale factors passed on so that the kernel maps
    indices with them as ATen does (they differ from in / out when the size was rounded down)."""
    def rewrite(ctx, node):
        a = bound_args(node)
        shape = ctx.shape(node)
        if len(shape) != 4:
            return False  # reported as unsupported
        scales = a["scale_factors"]
        if scales is not None and len(scales) != 2:
            return False
        sh, sw = (None, None) if scales is None else (float(scales[0]), float(scales[1]))
        args = (a["input"], shape[2:], *[a[e] for e in extra], sh, sw)
        with warnings.catch_warnings():
            # A size computed from a scale factor is a bare torch.SymInt when the input's size is
            # dynamic; the lowering turns it into run-time IntOps (lowering/symbolic.py), as for view sizes.
            warnings.filterwarnings("ignore", message="Raw SymInt value")
            new = ctx.call(new_target, args, like=node, val=node.meta["val"])
        ctx.replace(node, new)
        return True
    return rewrite


def _full_reduction(new_target):
    """sum.dim_IntList(x, [] or None, keepdim=False) reduces every dim: sum.default."""
    def rewrite(ctx, node):
        a = bound_args(node)
        if a["dim"] or a["keepdim"]:
            return False
        kwargs = {"dtype": a["dtype"]} if a["dtype"] is not None else {}
        ctx.replace(node, ctx.call(new_target, (a["self"],), kwargs, like=node,
                                   val=node.meta["val"]))
        return True
    return rewrite


REWRITES = {
    aten.sum.dim_IntList: _full_reduction(aten.sum.default),
    aten.mean.dim: _full_reduction(aten.mean.default),
    aten.convolution.default: _convolution,
    aten.conv2d.padding: _conv2d_padding,
    aten.max_pool2d_with_indices.default: _max_pool_with_indices,
    aten._adaptive_avg_pool2d.default: _simple(aten.adaptive_avg_pool2d.default),
    aten.native_layer_norm.default: _native_layer_norm,
    aten._native_batch_norm_legit.no_stats: _batch_norm_no_stats,
    aten.scatter.reduce: _scatter_reduce_legacy,
    aten.softmax.int: _softmax_like(aten._softmax.default),
    aten.log_softmax.int: _softmax_like(aten._log_softmax.default),
    aten.reshape.default: _to_view,
    aten._unsafe_view.default: _to_view,
    aten.view_copy.default: _to_view,
    aten.flatten.using_ints: _to_view,
    aten.unflatten.int: _to_view,
    aten.t.default: _t,
    aten.copy.default: _copy,
    aten.squeeze.default: _squeeze,
    aten.squeeze.dim: _squeeze,
    aten.add.Scalar: _on_bools(aten.logical_or.default, _scalar_binary(aten.add.Tensor)),
    aten.sub.Scalar: _scalar_binary(aten.sub.Tensor),
    aten.mul.Scalar: _on_bools(aten.logical_and.default, _scalar_binary(aten.mul.Tensor)),
    aten.add.Tensor: _on_bools(aten.logical_or.default),
    aten.mul.Tensor: _on_bools(aten.logical_and.default),
    aten.div.Scalar: _scalar_binary(aten.div.Tensor),
    aten.rsub.Scalar: _scalar_binary(aten.sub.Tensor, swap=True),
    aten.rsub.Tensor: _scalar_binary(aten.sub.Tensor, swap=True),
    # `5 % x`: the Python scalar becomes a 0-d constant of the output dtype (lowering).
    aten.remainder.Scalar_Tensor: _simple(aten.remainder.Tensor),
    aten.where.ScalarOther: _where_scalar,
    aten.where.ScalarSelf: _where_scalar,
    aten.where.Scalar: _where_scalar,
    aten.masked_fill.Tensor: _masked_fill_tensor,
    aten.upsample_nearest2d.vec: _upsample_vec(aten.upsample_nearest2d.default),
    aten.upsample_bilinear2d.vec: _upsample_vec(aten.upsample_bilinear2d.default, "align_corners"),
    # max(x) / min(x) without a dim: the extremum of every element, which amax/amin over no dims are.
    aten.max.default: lambda ctx, node: (ctx.replace(node, ctx.call(
        aten.amax.default, (node.args[0], [], False), like=node, val=node.meta["val"])) or True),
    aten.min.default: lambda ctx, node: (ctx.replace(node, ctx.call(
        aten.amin.default, (node.args[0], [], False), like=node, val=node.meta["val"])) or True),
    aten.permute_copy.default: _simple(aten.permute.default),
    aten.clamp_min.default: _clamp_one_side("min"),
    aten.clamp_max.default: _clamp_one_side("max"),
    aten.relu6.default: lambda ctx, node: (ctx.replace(node, ctx.call(
        aten.hardtanh.default, (node.args[0], 0.0, 6.0), like=node, val=node.meta["val"])) or True),
}


def run(ctx: PassContext) -> None:
    for node in list(ctx.graph.nodes):
        if node.op != "call_function":
            continue
        rewrite = REWRITES.get(node.target)
        if rewrite is not None and rewrite(ctx, node):
            ctx.count("canonicalized")
