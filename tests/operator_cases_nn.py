"""Cases of tests/test_operators.py for convolution, pooling, sampling, normalization and scatter
operators, kept here so that each file stays readable: NN_CASES joins CASES and
NN_DYNAMIC_CASES joins DYNAMIC_CASES (same formats)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

# A generator of its own (test_operators.py draws from another one): every draw differs.
GEN = torch.Generator().manual_seed(11)


def randn(*shape):
    return torch.randn(*shape, generator=GEN)


def randint(lo, hi, *shape, dtype=torch.int64):
    return torch.randint(lo, hi, shape, generator=GEN, dtype=dtype)


def with_random_params(module):
    """`module` with its parameters drawn from GEN (not the ones / zeros they start as)."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(randn(*p.shape))
    return module


def _dim(name, lo=1, hi=16):
    return torch.export.Dim(name, min=lo, max=hi)


NN_CASES = {
    # 1-d convolution and pooling: canonicalized onto the 2-d operators
    "conv1d": ("aten::conv2d.default", lambda x, w, b: F.conv1d(x, w, b, padding=1),
               (randn(2, 3, 10), randn(4, 3, 3), randn(4))),
    "conv1d_stride_dilation_groups": ("aten::conv2d.default",
                                      lambda x, w: F.conv1d(x, w, stride=2, padding=3, dilation=2, groups=3),
                                      (randn(1, 6, 11), randn(9, 2, 4))),
    "conv1d_same_even_length_1": ("aten::conv2d.default", lambda x, w: F.conv1d(x, w, padding="same"),
                                  (randn(3, 2, 1), randn(5, 2, 3))),
    "conv1d_unbatched": ("aten::conv2d.default", lambda x, w: F.conv1d(x, w, stride=3), (randn(4, 7), randn(2, 4, 2))),
    "max_pool1d": ("aten::max_pool2d.default", lambda x: F.max_pool1d(x, 3, 2, padding=1), (randn(2, 3, 10),)),
    "max_pool1d_ceil_dilation": ("aten::max_pool2d.default",
                                 lambda x: F.max_pool1d(x, 2, 2, dilation=2, ceil_mode=True), (randn(1, 2, 9),)),
    "avg_pool1d": ("aten::avg_pool2d.default", lambda x: F.avg_pool1d(x, 4, 3, padding=2, ceil_mode=True,
                                                                      count_include_pad=False), (randn(2, 3, 11),)),
    "avg_pool1d_unbatched": ("aten::avg_pool2d.default", lambda x: F.avg_pool1d(x, 3), (randn(5, 7),)),
    "adaptive_avg_pool1d": ("aten::adaptive_avg_pool2d.default", lambda x: F.adaptive_avg_pool1d(x, 4),
                            (randn(2, 3, 11),)),
    # max pooling with its indices used (flat positions in the input plane, as ATen computes them)
    "max_pool2d_with_indices": ("aten::max_pool2d_with_indices.default",
                                lambda x: F.max_pool2d(x, 3, 2, padding=1, return_indices=True), (randn(2, 3, 7, 6),)),
    "max_pool2d_with_indices_ties_dilation_ceil": (
        "aten::max_pool2d_with_indices.default",
        lambda x: F.max_pool2d(x, (2, 3), (2, 1), dilation=(2, 1), ceil_mode=True, return_indices=True),
        (randint(0, 3, 1, 2, 9, 5).float(),)),
    "max_pool2d_with_indices_all_minus_inf": ("aten::max_pool2d_with_indices.default",
                                              lambda x: F.max_pool2d(x - float("inf"), 2, 1, padding=1,
                                                                     return_indices=True), (randn(3, 4, 4),)),
    "max_pool1d_with_indices": ("aten::max_pool2d_with_indices.default",
                                lambda x: F.max_pool1d(x, 3, 2, return_indices=True), (randn(2, 3, 10),)),
    "max_pool2d_indices_only": ("aten::max_pool2d_with_indices.default",
                                lambda x: F.max_pool2d(x, 2, return_indices=True)[1], (randn(1, 1, 5, 5),)),
    # scatter along a dim (every index in [0, size), like ATen)
    "scatter_src": ("aten::scatter.src", lambda x, i, s: x.scatter(1, i, s),
                    (randn(3, 5), torch.tensor([[4, 0], [1, 2], [3, 4]]), randn(3, 4))),
    "scatter_src_neg_dim_3d_i32": ("aten::scatter.src", lambda x, i, s: x.scatter(-3, i, s),
                                   (randn(4, 3, 2), torch.tensor([[[3], [0]], [[1], [2]]], dtype=torch.int32),
                                    randn(2, 3, 2))),
    "scatter_value": ("aten::scatter.value", lambda x, i: x.scatter(0, i, 2.5),
                      (randn(4, 3), torch.tensor([[3, 0, 1], [2, 1, 0]]))),
    "scatter_value_int64_0d": ("aten::scatter.value", lambda x, i: x.scatter(0, i, -7),
                               (torch.tensor(5), torch.tensor(0))),
    "scatter_legacy_reduce_multiply": ("aten::scatter_reduce.two",
                                       lambda x, i, s: x.scatter(1, i, s, reduce="multiply"),
                                       (randn(2, 4), torch.tensor([[1, 1, 3], [0, 2, 0]]), randn(2, 3))),
    "scatter_legacy_reduce_add": ("aten::scatter_reduce.two", lambda x, i, s: x.scatter(0, i, s, reduce="add"),
                                  (randn(2, 4), torch.tensor([[1, 1, 0, 1], [0, 1, 1, 1]]), randn(3, 4))),
    "scatter_add_duplicates": ("aten::scatter_add.default", lambda x, i, s: x.scatter_add(1, i, s),
                               (randn(2, 4, 3), torch.tensor([[[0, 3, 3]] * 3, [[1, 1, 1]] * 3]), randn(2, 3, 3))),
    "scatter_add_int32": ("aten::scatter_add.default", lambda x, i, s: x.scatter_add(0, i, s),
                          (randint(-5, 5, 3, 2, dtype=torch.int32), torch.tensor([[2, 2], [0, 2], [2, 1], [0, 0]]),
                           randint(-50, 50, 4, 2, dtype=torch.int32))),
    "scatter_add_empty_index": ("aten::scatter_add.default", lambda x, i, s: x.scatter_add(0, i, s),
                                (randn(3, 2), torch.zeros(0, 2, dtype=torch.int64), randn(1, 2))),
    **{f"scatter_reduce_{r}{'' if inc else '_exclude_self'}": (
        "aten::scatter_reduce.two", lambda x, i, s, r=r, inc=inc: x.scatter_reduce(-1, i, s, r, include_self=inc),
        (randn(3, 6) * 2, torch.tensor([[5, 0, 5, 2], [1, 1, 1, 4], [0, 3, 2, 3]]), randn(3, 5) + 0.5))
       for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)},
    **{f"scatter_reduce_{r}_int64{'' if inc else '_exclude_self'}": (
        "aten::scatter_reduce.two", lambda x, i, s, r=r, inc=inc: x.scatter_reduce(0, i, s, r, include_self=inc),
        (randint(-20, 20, 4, 2), torch.tensor([[3, 0], [3, 0], [1, 0]]), randint(-9, 9, 3, 2)))
       for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)},
    "scatter_reduce_amax_nan": ("aten::scatter_reduce.two", lambda x, i, s: x.scatter_reduce(0, i, s, "amax"),
                                (torch.tensor([1.0, float("nan"), 3.0]), torch.tensor([0, 2, 2]),
                                 torch.tensor([float("nan"), 2.0, 5.0]))),
    # index_add is index_put with accumulate=True after torch.export's decomposition (alpha a mul before it)
    "index_add": ("aten::index_put.default", lambda x, i, s: x.index_add(0, i, s),
                  (randn(4, 3), torch.tensor([3, 0, 3]), randn(3, 3))),
    "index_add_alpha_neg_dim": ("aten::index_put.default", lambda x, i, s: x.index_add(-1, i, s, alpha=-2.0),
                                (randn(2, 3, 5), torch.tensor([4, 4, 1, 0]), randn(2, 3, 4))),
    "index_add_int64": ("aten::index_put.default", lambda x, i, s: x.index_add(1, i, s),
                        (randint(-9, 9, 2, 3), torch.tensor([2, 2]), randint(-9, 9, 2, 2))),
    # instance_norm: batch norm on (1, N * C, ...) with its own statistics, run as group_norm
    "instance_norm": ("aten::group_norm.default", lambda x: F.instance_norm(x), (randn(2, 3, 5, 4) * 3 + 1,)),
    "instance_norm_affine_module": ("aten::group_norm.default",
                                    with_random_params(torch.nn.InstanceNorm2d(3, affine=True, eps=1e-3)),
                                    (randn(2, 3, 1, 7),)),
    "instance_norm_1d_eps": ("aten::group_norm.default", lambda x: F.instance_norm(x, eps=0.1), (randn(1, 4, 9),)),
    "instance_norm_3d": ("aten::group_norm.default", with_random_params(torch.nn.InstanceNorm3d(2, affine=True)),
                         (randn(3, 2, 2, 3, 4),)),
    # grid_sample: bilinear and nearest, every padding mode, align_corners both ways; grid points
    # beyond [-1, 1] so that the padding modes matter
    **{f"grid_sample_{mode}_{pad}{'_align' if ac else ''}": (
        "aten::grid_sampler_2d.default",
        lambda x, g, mode=mode, pad=pad, ac=ac: F.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=ac),
        (randn(2, 3, 5, 4), torch.rand(2, 6, 7, 2, generator=GEN) * 3.2 - 1.6))
       for mode in ("bilinear", "nearest") for pad in ("zeros", "border", "reflection") for ac in (False, True)},
    "grid_sample_1x1_input": ("aten::grid_sampler_2d.default",
                              lambda x, g: F.grid_sample(x, g, padding_mode="reflection", align_corners=True),
                              (randn(1, 2, 1, 1), torch.rand(1, 3, 2, 2, generator=GEN) * 4 - 2)),
    # 3-d pools
    "max_pool3d": ("aten::max_pool3d_with_indices.default", lambda x: F.max_pool3d(x, 2), (randn(2, 3, 4, 5, 6),)),
    "max_pool3d_indices_padding_dilation_ceil": (
        "aten::max_pool3d_with_indices.default",
        lambda x: F.max_pool3d(x, (3, 2, 2), (2, 1, 2), padding=(1, 0, 1), dilation=(1, 2, 1), ceil_mode=True,
                               return_indices=True), (randn(1, 2, 5, 6, 7),)),
    "max_pool3d_unbatched_ties": ("aten::max_pool3d_with_indices.default",
                                  lambda x: F.max_pool3d(x, 2, 1, return_indices=True),
                                  (randint(0, 2, 2, 3, 3, 4).float(),)),
    "avg_pool3d": ("aten::avg_pool3d.default", lambda x: F.avg_pool3d(x, 2), (randn(2, 3, 4, 5, 6),)),
    "avg_pool3d_padding_ceil_exclude_pad": ("aten::avg_pool3d.default",
                                            lambda x: F.avg_pool3d(x, (3, 2, 3), (2, 2, 1), padding=(1, 1, 0),
                                                                   ceil_mode=True, count_include_pad=False),
                                            (randn(1, 2, 5, 6, 7),)),
    "avg_pool3d_divisor_unbatched": ("aten::avg_pool3d.default",
                                     lambda x: F.avg_pool3d(x, 3, 2, padding=1, divisor_override=5),
                                     (randn(3, 4, 5, 3),)),
    "adaptive_avg_pool3d": ("aten::_adaptive_avg_pool3d.default", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 4)),
                            (randn(2, 3, 5, 7, 4),)),
    "adaptive_avg_pool3d_unbatched_upsample": ("aten::_adaptive_avg_pool3d.default",
                                               lambda x: F.adaptive_avg_pool3d(x, (1, 5, 3)), (randn(2, 3, 2, 7),)),
    # 3-d convolution
    "conv3d": ("aten::conv3d.default", lambda x, w, b: F.conv3d(x, w, b, padding=1), (randn(2, 3, 4, 5, 6),
                                                                                     randn(4, 3, 3, 3, 3), randn(4))),
    "conv3d_stride_dilation_groups": ("aten::conv3d.default",
                                      lambda x, w: F.conv3d(x, w, stride=(2, 1, 3), padding=(0, 2, 1),
                                                            dilation=(1, 2, 1), groups=2),
                                      (randn(1, 4, 5, 6, 7), randn(6, 2, 2, 3, 2))),
    "conv3d_module_unbatched": ("aten::conv3d.default", with_random_params(torch.nn.Conv3d(2, 3, (1, 2, 3))),
                                (randn(2, 3, 4, 5),)),
    "conv3d_same": ("aten::conv3d.default", lambda x, w: F.conv3d(x, w, padding="same"),
                    (randn(1, 2, 3, 1, 4), randn(2, 2, 3, 1, 3))),
    # transposed convolution (1-d through the 2-d kernel on a height of 1)
    "conv_transpose2d": ("aten::conv_transpose2d.input",
                         lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1),
                         (randn(2, 3, 5, 4), randn(3, 4, 3, 3), randn(4))),
    "conv_transpose2d_all_args": ("aten::conv_transpose2d.input",
                                  lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(3, 2), padding=(2, 0),
                                                                     output_padding=(1, 1), groups=2, dilation=(2, 1)),
                                  (randn(1, 4, 3, 5), randn(4, 3, 3, 2), randn(6))),
    "conv_transpose2d_unbatched_1x1": ("aten::conv_transpose2d.input", lambda x, w: F.conv_transpose2d(x, w),
                                       (randn(3, 1, 1), randn(3, 2, 1, 1))),
    "conv_transpose2d_output_padding_dilation": ("aten::conv_transpose2d.input",
                                                 lambda x, w: F.conv_transpose2d(x, w, output_padding=1, dilation=2),
                                                 (randn(2, 2, 4, 3), randn(2, 1, 2, 3))),
    "conv_transpose2d_module": ("aten::conv_transpose2d.input", torch.nn.ConvTranspose2d(3, 5, 4, stride=2, padding=1),
                                (randn(1, 3, 6, 7),)),
    "conv_transpose1d": ("aten::conv_transpose2d.input",
                         lambda x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2),
                         (randn(2, 4, 7), randn(4, 3, 4), randn(3))),
    "conv_transpose1d_groups_dilation": ("aten::conv_transpose2d.input",
                                         lambda x, w: F.conv_transpose1d(x, w, groups=3, dilation=3, padding=2),
                                         (randn(1, 6, 5), randn(6, 1, 3))),
}

NN_DYNAMIC_CASES = {
    "conv1d": ("aten::conv2d.default", lambda x, w: F.conv1d(x, w, stride=2, padding=1),
               (randn(2, 3, 9), randn(4, 3, 3)),
               ({0: _dim("b"), 2: _dim("l", 3, 32)}, None), [(randn(1, 3, 3), randn(4, 3, 3)),
                                                            (randn(3, 3, 17), randn(4, 3, 3))]),
    "max_pool1d_with_indices": ("aten::max_pool2d_with_indices.default",
                                lambda x: F.max_pool1d(x, 3, 2, padding=1, return_indices=True), (randn(2, 3, 9),),
                                ({2: _dim("l", 3, 32)},), [(randn(2, 3, 3),), (randn(2, 3, 20),)]),
    "scatter_add": ("aten::scatter_add.default", lambda x, i, s: x.scatter_add(0, i, s),
                    (randn(5, 3), randint(0, 5, 4, 3), randn(4, 3)), ({0: _dim("m")}, {0: _dim("n")}, {0: _dim("n")}),
                    [(randn(2, 3), randint(0, 2, 7, 3), randn(7, 3)), (randn(9, 3), randint(0, 9, 1, 3), randn(1, 3))]),
    "grid_sample": ("aten::grid_sampler_2d.default", lambda x, g: F.grid_sample(x, g, padding_mode="border"),
                    (randn(1, 2, 4, 5), torch.rand(1, 3, 6, 2, generator=GEN) * 2.4 - 1.2),
                    ({2: _dim("h"), 3: _dim("w")}, {1: _dim("oh"), 2: _dim("ow")}),
                    [(randn(1, 2, 1, 9), torch.rand(1, 7, 1, 2, generator=GEN) * 2 - 1),
                     (randn(1, 2, 6, 2), torch.rand(1, 2, 11, 2, generator=GEN) * 2 - 1)]),
    "max_pool3d": ("aten::max_pool3d_with_indices.default", lambda x: F.max_pool3d(x, 2, 1, padding=1),
                   (randn(1, 2, 3, 4, 5),), ({2: _dim("d", 3), 4: _dim("w", 3)},),
                   [(randn(1, 2, 3, 4, 9),), (randn(1, 2, 7, 4, 3),)]),
    "avg_pool3d": ("aten::avg_pool3d.default", lambda x: F.avg_pool3d(x, 3, 2, padding=1, count_include_pad=False),
                   (randn(2, 2, 3, 4, 5),), ({0: _dim("b"), 2: _dim("d", 3)},),
                   [(randn(1, 2, 4, 4, 5),), (randn(3, 2, 11, 4, 5),)]),
    "conv3d": ("aten::conv3d.default", lambda x, w: F.conv3d(x, w, stride=2, padding=1),
               (randn(1, 2, 4, 5, 6), randn(3, 2, 3, 3, 3)), ({2: _dim("d", 3), 3: _dim("h", 3)}, None),
               [(randn(1, 2, 3, 9, 6), randn(3, 2, 3, 3, 3)), (randn(1, 2, 12, 3, 6), randn(3, 2, 3, 3, 3))]),
    "instance_norm": ("aten::group_norm.default", lambda x: F.instance_norm(x), (randn(2, 3, 4, 5),),
                      ({2: _dim("h", 2), 3: _dim("w")},), [(randn(2, 3, 9, 1),), (randn(2, 3, 2, 16),)]),
    "conv_transpose2d": ("aten::conv_transpose2d.input", lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1),
                         (randn(2, 3, 4, 5), randn(3, 2, 3, 3)), ({0: _dim("b"), 2: _dim("h"), 3: _dim("w")}, None),
                         [(randn(1, 3, 1, 2), randn(3, 2, 3, 3)), (randn(3, 3, 9, 6), randn(3, 2, 3, 3))]),
}
