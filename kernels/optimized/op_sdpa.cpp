// Optimized float32 aten::scaled_dot_product_attention.default: the f32_attention microkernels over
// tasks of up to kAttentionRowChunk query rows that share a key/value head (with GQA, the rows of all
// the query heads of a group), in parallel. Nothing of size L x S is ever stored. kiln::sdpa_rows
// reads float32 caches in place, and float16 / bfloat16 caches widened a key block at a time.
#include <algorithm>

#include "common/sdpa_args.h"
#include "kiln/thread_pool.h"
#include "optimized/f32_attention.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

constexpr const char* kOp = "aten::scaled_dot_product_attention.default";
// Head dims whose per-thread scratch (a packed key block and the accumulators) stays modest;
// larger ones are left to the portable kernel.
constexpr int64_t kMaxHeadDim = 1024;

constexpr const char* kRowsOp = "kiln::sdpa_rows.default";

struct SdpaState {
  int64_t e = 0, ev = 0;  // the head dims the scratch was planned for
};

// At prepare only the head dims matter (the per-thread scratch); run checks every argument.
// Malformed arguments: the portable kernel serves, and reports them at run. kiln::sdpa_rows
// (`rows`) has its value cache [R, Ev] at argument 2 too, and needs room for a gathered block.
Status prepare_attention(const char* op, bool rows, KernelContext& ctx, Inputs in, Outputs out, void** state) {
  const Tensor *q, *v;
  Status st = check_arity(op, in, out, 8, 1);
  if (st.is_ok()) st = prepare_tensor_arg(op, in, 0, "query", &q);
  if (st.is_ok()) st = prepare_tensor_arg(op, in, 2, rows ? "v_cache" : "value", &v);
  if (!st.is_ok()) return Status(Error::NotSupported, st.message());
  if (q->dim() < 3 || v->dim() < (rows ? 2 : 3))
    return Status(Error::NotSupported, "query and value must be 3-D or 4-D (the value cache 2-D)");
  const int64_t e = q->size(-1), ev = v->size(-1);
  if (e > kMaxHeadDim || ev > kMaxHeadDim) return Status(Error::NotSupported, "head dim above 1024");
  ctx.worker_scratch_bytes = attention_scratch_bytes(e, ev, rows);
  *state = new SdpaState{e, ev};
  return Status::ok();
}

Status sdpa_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return prepare_attention(kOp, false, ctx, in, out, state);
}

Status sdpa_rows_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return prepare_attention(kRowsOp, true, ctx, in, out, state);
}

void sdpa_release(void* state) { delete static_cast<SdpaState*>(state); }

Status run_attention(const char* op, const SdpaArgs& a, KernelContext& ctx, Outputs out) {
  const auto* st = static_cast<const SdpaState*>(ctx.state);
  KILN_CHECK_OR_RETURN(a.e <= st->e && a.ev <= st->ev, KernelFailure,
                       "%s: head dims %lld and %lld exceed the prepared %lld and %lld", op, static_cast<long long>(a.e),
                       static_cast<long long>(a.ev), static_cast<long long>(st->e), static_cast<long long>(st->ev));
  Tensor& y = *out[0];
  if (y.numel() == 0) return Status::ok();

  AttentionShape sh;
  sh.rows_per_head = a.l, sh.keys = a.s, sh.e = a.e, sh.ev = a.ev;
  sh.scale = static_cast<float>(a.scale);
  sh.causal = a.causal;
  if (a.mask != nullptr) {
    if (a.mask->dtype() == ScalarType::Bool)
      sh.bool_mask = a.mask->data_as<const uint8_t>();
    else
      sh.float_mask = a.mask->data_as<const float>();
    std::copy(a.mask_strides, a.mask_strides + 4, sh.mask_strides);
  }
  // The query heads of a group are neighbours in q and y: their rows form one run of group * L rows.
  const int64_t group = a.h / a.hkv, group_rows = group * a.l;
  const int64_t chunks = (group_rows + kAttentionRowChunk - 1) / kAttentionRowChunk;
  const auto attend = f32_attention_for(ctx.isa).attend;
  const float* qp = a.q->data_as<const float>();
  const bool compact = a.cache_dtype == ScalarType::Float16 || a.cache_dtype == ScalarType::BFloat16;
  const float* kp = compact ? nullptr : a.k->data_as<const float>();
  const float* vp = compact ? nullptr : a.v->data_as<const float>();
  float* yp = y.data_as<float>();
  parallel_for(a.b * a.hkv * chunks, 1, [&](int64_t t0, int64_t t1) {
    float* scratch = static_cast<float*>(worker_scratch(ctx));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t kv = t / chunks, batch = kv / a.hkv, row0 = (t % chunks) * kAttentionRowChunk;
      const int64_t first_row = kv * group_rows + row0;  // in q's [B * H * L] rows
      AttentionTask task;
      task.q = qp + first_row * a.e;
      task.out = yp + first_row * a.ev;
      if (a.rows != nullptr) {  // the caches, read at this head's rows
        task.k = kp, task.v = vp;
        task.key_rows = a.rows + kv * a.s;
        task.cache_rows = a.cache_rows;
        if (compact) {
          task.k16 = a.k->data_as<const uint16_t>(), task.v16 = a.v->data_as<const uint16_t>();
          task.bfloat16 = a.cache_dtype == ScalarType::BFloat16;
        }
      } else {
        task.k = kp + kv * a.s * a.e;
        task.v = vp + kv * a.s * a.ev;
      }
      task.batch = batch;
      task.head = (kv % a.hkv) * group + row0 / a.l;
      task.position = row0 % a.l;
      task.rows = std::min(kAttentionRowChunk, group_rows - row0);
      attend(sh, task, scratch);
    }
  });
  return Status::ok();
}

Status sdpa_run(KernelContext& ctx, Inputs in, Outputs out) {
  SdpaArgs a;
  KILN_RETURN_IF_ERROR(sdpa_args(kOp, in, out, &a));
  return run_attention(kOp, a, ctx, out);
}

Status sdpa_rows_run(KernelContext& ctx, Inputs in, Outputs out) {
  SdpaArgs a;
  KILN_RETURN_IF_ERROR(sdpa_rows_args(kRowsOp, in, out, &a));
  return run_attention(kRowsOp, a, ctx, out);
}

}  // namespace

KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::scaled_dot_product_attention.default",
                            "f32,f32,f32|f32,f32,f32,f32|f32,f32,f32,bool", sdpa_run, sdpa_prepare, sdpa_release);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "kiln::sdpa_rows.default",
                            "f32,f32,f32,i64|f32,f32,f32,i64,f32|f32,f32,f32,i64,bool|"
                            "f32,f16,f16,i64|f32,f16,f16,i64,f32|f32,f16,f16,i64,bool|"
                            "f32,bf16,bf16,i64|f32,bf16,bf16,i64,f32|f32,bf16,bf16,i64,bool",
                            sdpa_rows_run, sdpa_rows_prepare, sdpa_release);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
