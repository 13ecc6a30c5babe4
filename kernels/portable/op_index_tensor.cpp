// index.Tensor (advanced indexing, a gather) with ATen's semantics for a Tensor?[] list of None, i64/i32
// index tensors and bool/u8 masks. A k-D mask indexes k consecutive dims (its shape must match them) and
// acts as one 1-D index of its true positions, row-major, so the result's size depends on the data: the
// exporter planned the output for its bound and the kernel checks the actual size against it
// (resize_data_dependent). The index tensors and masks broadcast together; when they sit next to each
// other the broadcast dims replace the indexed dims in place, otherwise they come first, followed by the
// dims that are not indexed (ATen's rule). Negative indices wrap once; anything out of range fails before
// a byte is written. The true positions of the masks live in planned scratch (8 bytes per mask element at
// the mask's bound, reserved at prepare). index_put is in op_index_put.cpp.
#include <cstring>

#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"
#include "common/strided_copy.h"
#include "data_dependent.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

constexpr const char* kOp = "aten::index.Tensor";

bool is_mask(const Tensor& t) { return t.dtype() == ScalarType::Bool || t.dtype() == ScalarType::UInt8; }

// One non-None entry of the index list.
struct Entry {
  const Tensor* t = nullptr;
  bool mask = false;
  int dim = 0, ndims = 1;              // the dims of self it indexes: [dim, dim + ndims)
  int64_t dim_size = 0;                // index tensor: size of its dim
  int64_t src_stride = 0;              // element stride of its (last) dim in self
  int64_t count = 0;                   // mask: number of true elements
  const int64_t* positions = nullptr;  // mask: their row-major positions within the masked dims
  int64_t bstrides[kMaxDims] = {};     // element strides over the broadcast shape (0: broadcast)
};

struct GatherPlan {
  Entry e[kMaxDims];
  int ne = 0;
  Dims bshape;  // broadcast shape of the entries (a mask counts as [count])
  int64_t nb = 1;
  // The result is [A dims..., bshape..., M dims..., post]: A and M are dims of self that are not
  // indexed (strided in self); post is the contiguous block of the dims after the last indexed one.
  Dims a_size, m_size;
  int64_t a_stride[kMaxDims] = {}, m_stride[kMaxDims] = {};
  int64_t post = 1;
  Dims result;
};

template <typename I>
Status check_index_values(const Tensor& t, int dim, int64_t size) {
  const I* p = t.data_as<const I>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = static_cast<int64_t>(p[i]);
    KILN_CHECK_OR_RETURN(v >= -size && v < size, KernelFailure,
                         "%s: index %lld is out of bounds for dim %d with size %lld", kOp, static_cast<long long>(v),
                         dim, static_cast<long long>(size));
  }
  return Status::ok();
}

Status index_list(const Value* list, Span<Tensor* const>* items) {
  KILN_CHECK_OR_RETURN(list != nullptr && list->kind == ValueKind::TensorList &&
                           (list->tensors.size == 0 || list->tensors.data != nullptr),
                       KernelFailure, "%s: argument 1 (indices) must be a tensor list", kOp);
  *items = list->as_tensors();
  return Status::ok();
}

// Bytes of scratch the masks of the list need (their true positions, at most one per element).
size_t mask_scratch_bytes(Span<Tensor* const> items) {
  size_t bytes = 0;
  for (const Tensor* t : items) {
    if (t != nullptr && is_mask(*t)) bytes += static_cast<size_t>(t->numel()) * sizeof(int64_t);
  }
  return bytes;
}

Status index_prepare(KernelContext& ctx, Inputs in, Outputs, void**) {
  KILN_CHECK_OR_RETURN(in.size() == 2, KernelFailure, "%s: expected 2 arguments, got %zu", kOp, in.size());
  Span<Tensor* const> items;
  KILN_RETURN_IF_ERROR(index_list(in[1], &items));
  for (const Tensor* t : items) {
    if (t != nullptr) KILN_RETURN_IF_ERROR(check_shape(kOp, "index", t->sizes()));
  }
  ctx.scratch_bytes = mask_scratch_bytes(items);
  return Status::ok();
}

// Parses the list into entries and counts the true elements of the masks (their positions go to `scratch`).
Status make_entries(const Tensor& self, Span<Tensor* const> items, KernelContext& ctx, GatherPlan* p) {
  const int nd = self.dim();
  int64_t strides[kMaxDims];
  contiguous_strides(self.sizes(), strides);
  const size_t need = mask_scratch_bytes(items);
  KILN_CHECK_OR_RETURN(need <= ctx.scratch_bytes && (need == 0 || ctx.scratch != nullptr), KernelFailure,
                       "%s: the masks need %zu bytes of scratch, %zu were planned", kOp, need, ctx.scratch_bytes);
  int64_t* scratch = static_cast<int64_t*>(ctx.scratch);
  int d = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    const Tensor* t = items[k];
    if (t == nullptr) {  // None: the dim is kept
      ++d;
      KILN_CHECK_OR_RETURN(d <= nd, KernelFailure, "%s: too many indices for %s", kOp, describe(self).c_str());
      continue;
    }
    KILN_CHECK_OR_RETURN(d < nd, KernelFailure, "%s: too many indices for %s", kOp, describe(self).c_str());
    KILN_RETURN_IF_ERROR(check_tensor(kOp, "index", *t));
    Entry& e = p->e[p->ne++];  // each entry takes at least one of self's dims: ne <= nd <= kMaxDims
    e.t = t;
    e.dim = d;
    if (is_mask(*t)) {
      e.mask = true;
      e.ndims = t->dim();
      KILN_CHECK_OR_RETURN(e.ndims > 0, KernelFailure, "%s: a 0-D mask index is not supported", kOp);
      KILN_CHECK_OR_RETURN(d + e.ndims <= nd, KernelFailure, "%s: too many indices for %s (mask %s at dim %d)", kOp,
                           describe(self).c_str(), describe(*t).c_str(), d);
      for (int j = 0; j < e.ndims; ++j) {
        KILN_CHECK_OR_RETURN(t->sizes()[j] == self.sizes()[d + j], KernelFailure,
                             "%s: the shape of the mask %s at index %zu does not match the shape of the indexed "
                             "tensor %s",
                             kOp, describe(*t).c_str(), k, describe(self).c_str());
      }
      e.src_stride = strides[d + e.ndims - 1];
      const NonzeroFn is_set = nonzero_fn(t->dtype());
      const int64_t n = t->numel();
      e.positions = scratch;
      for (int64_t i = 0; i < n; ++i) {
        if (is_set(t->data(), i)) scratch[e.count++] = i;
      }
      scratch += n;
    } else {
      KILN_CHECK_OR_RETURN(t->dtype() == ScalarType::Int64 || t->dtype() == ScalarType::Int32, KernelFailure,
                           "%s: indices must be i64, i32, bool or u8, got %s", kOp, describe(*t).c_str());
      e.dim_size = self.sizes()[d];
      e.src_stride = strides[d];
      KILN_RETURN_IF_ERROR(t->dtype() == ScalarType::Int64 ? check_index_values<int64_t>(*t, d, e.dim_size)
                                                           : check_index_values<int32_t>(*t, d, e.dim_size));
    }
    d += e.ndims;
  }
  return Status::ok();
}

Status broadcast_entries(GatherPlan* p) {
  Dims& b = p->bshape;
  for (int i = 0; i < p->ne; ++i) {
    const Entry& e = p->e[i];
    const Dims s = e.mask ? Dims(Span<const int64_t>(&e.count, 1)) : Dims(e.t->sizes());
    if (s.n > b.n) {  // right-align: prepend ones
      Dims wider;
      for (int j = 0; j < s.n - b.n; ++j) wider.push(1);
      for (int j = 0; j < b.n; ++j) wider.push(b[j]);
      b = wider;
    }
    for (int j = 0; j < s.n; ++j) {
      int64_t& bj = b[b.n - s.n + j];
      const int64_t sj = s[j];
      KILN_CHECK_OR_RETURN(bj == sj || bj == 1 || sj == 1, KernelFailure,
                           "%s: shape mismatch: the indexing tensors cannot be broadcast together (%s and %s)", kOp,
                           describe_sizes(b.span()).c_str(), describe_sizes(s.span()).c_str());
      if (bj == 1) bj = sj;
    }
  }
  p->nb = b.numel();
  for (int i = 0; i < p->ne; ++i) {
    Entry& e = p->e[i];
    const Dims s = e.mask ? Dims(Span<const int64_t>(&e.count, 1)) : Dims(e.t->sizes());
    int64_t st = 1;
    for (int j = s.n - 1; j >= 0; --j) {
      e.bstrides[j + b.n - s.n] = s[j] == 1 ? 0 : st;
      st *= s[j];
    }
  }
  return Status::ok();
}

Status make_plan(const Tensor& self, Span<Tensor* const> items, KernelContext& ctx, GatherPlan* p) {
  KILN_RETURN_IF_ERROR(make_entries(self, items, ctx, p));
  KILN_RETURN_IF_ERROR(broadcast_entries(p));
  const int nd = self.dim();
  int64_t strides[kMaxDims];
  contiguous_strides(self.sizes(), strides);
  const int first = p->ne > 0 ? p->e[0].dim : nd;
  const int end = p->ne > 0 ? p->e[p->ne - 1].dim + p->e[p->ne - 1].ndims : nd;
  bool adjacent = true;
  for (int i = 0; i + 1 < p->ne; ++i) adjacent = adjacent && p->e[i].dim + p->e[i].ndims == p->e[i + 1].dim;
  bool indexed[kMaxDims] = {};
  for (int i = 0; i < p->ne; ++i) {
    for (int j = 0; j < p->e[i].ndims; ++j) indexed[p->e[i].dim + j] = true;
  }
  int kept = 0;
  for (int d = 0; d < end; ++d) kept += indexed[d] ? 0 : 1;
  KILN_CHECK_OR_RETURN(kept + p->bshape.n + (nd - end) <= kMaxDims, KernelFailure,
                       "%s: the result of indexing %s has more than %d dims", kOp, describe(self).c_str(), kMaxDims);
  for (int d = 0; d < end; ++d) {
    if (indexed[d]) continue;
    if (adjacent && d < first) {
      p->a_stride[p->a_size.n] = strides[d];
      p->a_size.push(self.sizes()[d]);
    } else {
      p->m_stride[p->m_size.n] = strides[d];
      p->m_size.push(self.sizes()[d]);
    }
  }
  for (int d = 0; d < p->a_size.n; ++d) p->result.push(p->a_size[d]);
  for (int d = 0; d < p->bshape.n; ++d) p->result.push(p->bshape[d]);
  for (int d = 0; d < p->m_size.n; ++d) p->result.push(p->m_size[d]);
  for (int d = end; d < nd; ++d) p->post *= self.sizes()[d], p->result.push(self.sizes()[d]);
  return Status::ok();
}

// Element offset in self of broadcast position b (indices were checked: always in range).
int64_t entries_offset(const GatherPlan& p, int64_t b) {
  int64_t pos[kMaxDims];
  for (int d = p.bshape.n - 1; d >= 0; --d) pos[d] = b % p.bshape[d], b /= p.bshape[d];
  int64_t off = 0;
  for (int i = 0; i < p.ne; ++i) {
    const Entry& e = p.e[i];
    int64_t io = 0;
    for (int d = 0; d < p.bshape.n; ++d) io += pos[d] * e.bstrides[d];
    int64_t v;
    if (e.mask) {
      v = e.positions[io];
    } else {
      v = e.t->dtype() == ScalarType::Int64 ? e.t->data_as<const int64_t>()[io]
                                            : static_cast<int64_t>(e.t->data_as<const int32_t>()[io]);
      if (v < 0) v += e.dim_size;
    }
    off += v * e.src_stride;
  }
  return off;
}

int64_t strided_offset(const Dims& sizes, const int64_t* strides, int64_t i) {
  int64_t off = 0;
  for (int d = sizes.n - 1; d >= 0; --d) off += (i % sizes[d]) * strides[d], i /= sizes[d];
  return off;
}

Status index_tensor_run(KernelContext& ctx, Inputs in, Outputs out) {
  const Tensor* x;
  KILN_RETURN_IF_ERROR(copy_setup(kOp, in, out, 2, &x));
  KILN_CHECK_OR_RETURN(x->dim() > 0, KernelFailure, "%s: cannot index a 0-D tensor", kOp);
  Span<Tensor* const> items;
  KILN_RETURN_IF_ERROR(index_list(in[1], &items));
  GatherPlan p;
  KILN_RETURN_IF_ERROR(make_plan(*x, items, ctx, &p));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(resize_data_dependent(kOp, "result", &y, p.result.span()));
  if (y.numel() == 0) return Status::ok();
  const size_t elem = element_size(x->dtype());
  const char* src = static_cast<const char*>(x->data());
  char* dst = static_cast<char*>(y.data());
  const size_t row = static_cast<size_t>(p.post) * elem;
  const int64_t na = p.a_size.numel(), nm = p.m_size.numel();
  parallel_for(na * p.nb * nm, grain_for(p.post), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t m = t % nm, b = (t / nm) % p.nb, a = t / nm / p.nb;
      const int64_t off =
          strided_offset(p.a_size, p.a_stride, a) + entries_offset(p, b) + strided_offset(p.m_size, p.m_stride, m);
      std::memcpy(dst + static_cast<size_t>(t) * row, src + static_cast<size_t>(off) * elem, row);
    }
  });
  return Status::ok();
}

}  // namespace

KILN_REGISTER_KERNEL("aten::index.Tensor", "*", index_tensor_run, index_prepare);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
