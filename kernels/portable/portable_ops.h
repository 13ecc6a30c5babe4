// Private declarations of the portable kernels' run functions, for tests that call them directly.
#pragma once

#include "kiln/kernel.h"

namespace kiln {
namespace kernels {
namespace portable {

#define KILN_PORTABLE_OP(name) \
  Status name(KernelContext& ctx, Span<const Value* const> inputs, Span<Tensor* const> outputs)

KILN_PORTABLE_OP(relu_run);
KILN_PORTABLE_OP(hardtanh_run);
KILN_PORTABLE_OP(clamp_run);
KILN_PORTABLE_OP(sigmoid_run);
KILN_PORTABLE_OP(tanh_run);
KILN_PORTABLE_OP(silu_run);
KILN_PORTABLE_OP(hardswish_run);
KILN_PORTABLE_OP(hardsigmoid_run);
KILN_PORTABLE_OP(gelu_run);
KILN_PORTABLE_OP(adaptive_avg_pool2d_run);
KILN_PORTABLE_OP(addmm_run);
KILN_PORTABLE_OP(avg_pool2d_run);
KILN_PORTABLE_OP(batch_norm_no_training_run);
KILN_PORTABLE_OP(add_tensor_run);
KILN_PORTABLE_OP(sub_tensor_run);
KILN_PORTABLE_OP(mul_tensor_run);
KILN_PORTABLE_OP(div_tensor_run);
KILN_PORTABLE_OP(cat_run);
KILN_PORTABLE_OP(conv2d_run);
KILN_PORTABLE_OP(embedding_run);
KILN_PORTABLE_OP(expand_run);
KILN_PORTABLE_OP(layer_norm_run);
KILN_PORTABLE_OP(linear_run);
KILN_PORTABLE_OP(matmul_run);
KILN_PORTABLE_OP(max_pool2d_run);
KILN_PORTABLE_OP(mm_run);
KILN_PORTABLE_OP(bmm_run);
KILN_PORTABLE_OP(permute_run);
KILN_PORTABLE_OP(transpose_int_run);
KILN_PORTABLE_OP(sum_dim_run);
KILN_PORTABLE_OP(mean_dim_run);
KILN_PORTABLE_OP(sum_run);
KILN_PORTABLE_OP(mean_run);
KILN_PORTABLE_OP(slice_tensor_run);
KILN_PORTABLE_OP(select_int_run);
KILN_PORTABLE_OP(softmax_run);
KILN_PORTABLE_OP(log_softmax_run);
KILN_PORTABLE_OP(to_copy_run);
KILN_PORTABLE_OP(neg_run);
KILN_PORTABLE_OP(abs_run);
KILN_PORTABLE_OP(exp_run);
KILN_PORTABLE_OP(log_run);
KILN_PORTABLE_OP(sqrt_run);
KILN_PORTABLE_OP(rsqrt_run);
KILN_PORTABLE_OP(pow_tensor_scalar_run);
KILN_PORTABLE_OP(view_run);
KILN_PORTABLE_OP(squeeze_dims_run);
KILN_PORTABLE_OP(unsqueeze_run);
KILN_PORTABLE_OP(clone_run);
KILN_PORTABLE_OP(where_self_run);
KILN_PORTABLE_OP(masked_fill_scalar_run);
KILN_PORTABLE_OP(cos_run);
KILN_PORTABLE_OP(sin_run);
KILN_PORTABLE_OP(erf_run);
KILN_PORTABLE_OP(reciprocal_run);
KILN_PORTABLE_OP(sign_run);
KILN_PORTABLE_OP(index_tensor_run);
KILN_PORTABLE_OP(index_put_run);
KILN_PORTABLE_OP(index_select_run);
KILN_PORTABLE_OP(gather_run);
KILN_PORTABLE_OP(index_copy_run);
KILN_PORTABLE_OP(slice_scatter_run);
KILN_PORTABLE_OP(arange_start_step_run);
KILN_PORTABLE_OP(arange_start_run);
KILN_PORTABLE_OP(arange_run);
KILN_PORTABLE_OP(full_run);
KILN_PORTABLE_OP(full_like_run);
KILN_PORTABLE_OP(scalar_tensor_run);
KILN_PORTABLE_OP(eq_tensor_run);
KILN_PORTABLE_OP(eq_scalar_run);
KILN_PORTABLE_OP(ne_tensor_run);
KILN_PORTABLE_OP(ne_scalar_run);
KILN_PORTABLE_OP(lt_tensor_run);
KILN_PORTABLE_OP(lt_scalar_run);
KILN_PORTABLE_OP(le_tensor_run);
KILN_PORTABLE_OP(le_scalar_run);
KILN_PORTABLE_OP(gt_tensor_run);
KILN_PORTABLE_OP(gt_scalar_run);
KILN_PORTABLE_OP(ge_tensor_run);
KILN_PORTABLE_OP(ge_scalar_run);
KILN_PORTABLE_OP(maximum_run);
KILN_PORTABLE_OP(minimum_run);
KILN_PORTABLE_OP(logical_not_run);
KILN_PORTABLE_OP(logical_and_run);
KILN_PORTABLE_OP(logical_or_run);
KILN_PORTABLE_OP(logical_xor_run);
KILN_PORTABLE_OP(bitwise_not_run);
KILN_PORTABLE_OP(bitwise_and_run);
KILN_PORTABLE_OP(bitwise_or_run);
KILN_PORTABLE_OP(bitwise_xor_run);
KILN_PORTABLE_OP(argmax_run);
KILN_PORTABLE_OP(argmin_run);
KILN_PORTABLE_OP(max_dim_run);
KILN_PORTABLE_OP(min_dim_run);
KILN_PORTABLE_OP(amax_run);
KILN_PORTABLE_OP(amin_run);
KILN_PORTABLE_OP(linalg_vector_norm_run);
KILN_PORTABLE_OP(topk_run);
KILN_PORTABLE_OP(cumsum_run);
KILN_PORTABLE_OP(pow_tensor_tensor_run);
KILN_PORTABLE_OP(pow_scalar_run);
KILN_PORTABLE_OP(div_tensor_mode_run);
KILN_PORTABLE_OP(remainder_tensor_run);
KILN_PORTABLE_OP(remainder_scalar_run);
KILN_PORTABLE_OP(sdpa_run);
KILN_PORTABLE_OP(fused_linear_run);
KILN_PORTABLE_OP(fused_conv2d_run);

#undef KILN_PORTABLE_OP

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
