// Advanced indexing with a Tensor?[] list: index_put.default (scatter, in place when the output is self;
// the gather, index.Tensor, with masks and None anywhere, is op_index_tensor.cpp). Supported forms: any
// number of leading None, then consecutive i64/i32 index tensors broadcast together, then nothing or None;
// negative indices wrap once, anything out of range fails before a byte is read or written.
#include <cstring>

#include "common/broadcast.h"
#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"
#include "common/strided_copy.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// self viewed as [pre, indexed dims..., post]; the result (of index, or the
// region index_put writes) is [pre dims..., broadcast index shape..., post dims...].
struct IndexPlan {
  int first = 0, count = 0;                      // indexed dims [first, first + count)
  const Tensor* idx[kMaxDims] = {};              // the index tensors
  int64_t idx_strides[kMaxDims][kMaxDims] = {};  // element strides of idx[j] over `bshape` (0: broadcast)
  int64_t dim_size[kMaxDims] = {};               // size of indexed dim j
  int64_t src_stride[kMaxDims] = {};             // element stride of indexed dim j in self
  Dims bshape;                                   // broadcast shape of the indices
  int64_t nb = 1;                                // numel of bshape
  int64_t pre = 1, post = 1, block = 1;          // block: elements of self per pre position
  Dims result;
};

template <typename I>
Status check_index_values(const char* op, const Tensor& t, int j, int64_t size) {
  const I* p = t.data_as<const I>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = static_cast<int64_t>(p[i]);
    KILN_CHECK_OR_RETURN(v >= -size && v < size, KernelFailure,
                         "%s: index %lld is out of bounds for dim %d with size %lld", op, static_cast<long long>(v), j,
                         static_cast<long long>(size));
  }
  return Status::ok();
}

Status make_plan(const char* op, const Tensor& self, const Value* list, IndexPlan* p) {
  KILN_CHECK_OR_RETURN(list != nullptr && list->kind == ValueKind::TensorList &&
                           (list->tensors.size == 0 || list->tensors.data != nullptr),
                       KernelFailure, "%s: argument 1 (indices) must be a tensor list", op);
  Span<Tensor* const> items = list->as_tensors();
  KILN_CHECK_OR_RETURN(items.size() <= static_cast<size_t>(self.dim()), KernelFailure,
                       "%s: too many indices (%zu) for %s", op, items.size(), describe(self).c_str());
  int first = -1, last = -1;
  for (size_t k = 0; k < items.size(); ++k) {
    if (items[k] == nullptr) continue;
    if (first < 0) first = static_cast<int>(k);
    KILN_CHECK_OR_RETURN(last == static_cast<int>(k) - 1 || last < 0, NotSupported,
                         "%s: index tensors separated by None (slices) are not supported", op);
    last = static_cast<int>(k);
  }
  p->first = first < 0 ? 0 : first;
  p->count = first < 0 ? 0 : last - first + 1;
  for (int j = 0; j < p->count; ++j) {
    const Tensor* t = items[static_cast<size_t>(p->first + j)];
    KILN_RETURN_IF_ERROR(check_tensor(op, "index", *t));
    KILN_CHECK_OR_RETURN(t->dtype() != ScalarType::Bool && t->dtype() != ScalarType::UInt8, NotSupported,
                         "%s: boolean mask indices are not supported (got %s)", op, describe(*t).c_str());
    KILN_CHECK_OR_RETURN(t->dtype() == ScalarType::Int64 || t->dtype() == ScalarType::Int32, KernelFailure,
                         "%s: indices must be i64 or i32, got %s", op, describe(*t).c_str());
    p->idx[j] = t;
  }
  if (p->count > 0) KILN_RETURN_IF_ERROR(broadcast_shapes(op, p->idx, p->count, &p->bshape));
  p->nb = p->bshape.numel();
  const int nd = self.dim();
  KILN_CHECK_OR_RETURN(nd - p->count + p->bshape.n <= kMaxDims, KernelFailure,
                       "%s: the result of indexing %s has more than %d dims", op, describe(self).c_str(), kMaxDims);
  int64_t strides[kMaxDims];
  contiguous_strides(self.sizes(), strides);
  for (int d = 0; d < p->first; ++d) p->pre *= self.sizes()[d], p->result.push(self.sizes()[d]);
  for (int d = 0; d < p->bshape.n; ++d) p->result.push(p->bshape[d]);
  for (int d = p->first + p->count; d < nd; ++d) p->post *= self.sizes()[d], p->result.push(self.sizes()[d]);
  p->block = p->post;
  for (int j = 0; j < p->count; ++j) {
    const int d = p->first + j;
    p->dim_size[j] = self.sizes()[d];
    p->src_stride[j] = strides[d];
    p->block *= self.sizes()[d];
    const Tensor& t = *p->idx[j];
    int64_t s = 1;
    for (int e = t.dim() - 1; e >= 0; --e) {
      const int bd = e + p->bshape.n - t.dim();
      p->idx_strides[j][bd] = t.sizes()[e] == 1 ? 0 : s;
      s *= t.sizes()[e];
    }
  }
  KILN_RETURN_IF_ERROR(check_shape(op, "result shape", p->result.span()));
  // Every index value is checked once, up front; the copies below check again.
  for (int j = 0; j < p->count; ++j) {
    const Tensor& t = *p->idx[j];
    KILN_RETURN_IF_ERROR(t.dtype() == ScalarType::Int64
                             ? check_index_values<int64_t>(op, t, p->first + j, p->dim_size[j])
                             : check_index_values<int32_t>(op, t, p->first + j, p->dim_size[j]));
  }
  return Status::ok();
}

int64_t index_value(const Tensor& t, int64_t off) {
  return t.dtype() == ScalarType::Int64 ? t.data_as<const int64_t>()[off]
                                        : static_cast<int64_t>(t.data_as<const int32_t>()[off]);
}

// Offset in self (elements, within one pre block) of broadcast index position b; -1 if an index is out of range.
int64_t source_offset(const IndexPlan& p, int64_t b) {
  int64_t pos[kMaxDims];
  for (int d = p.bshape.n - 1; d >= 0; --d) pos[d] = b % p.bshape[d], b /= p.bshape[d];
  int64_t off = 0;
  for (int j = 0; j < p.count; ++j) {
    int64_t io = 0;
    for (int d = 0; d < p.bshape.n; ++d) io += pos[d] * p.idx_strides[j][d];
    int64_t v = index_value(*p.idx[j], io);
    if (v < 0) v += p.dim_size[j];
    if (v < 0 || v >= p.dim_size[j]) return -1;
    off += v * p.src_stride[j];
  }
  return off;
}

template <typename T>
void put_typed(const IndexPlan& p, const Tensor& values, Tensor& y, bool accumulate) {
  T* yp = y.data_as<T>();
  const T* vp = values.data_as<const T>();
  // Element strides of values over the result shape (right-aligned broadcast).
  const Dims& r = p.result;
  int64_t vst[kMaxDims] = {};
  {
    int64_t s = 1;
    for (int e = values.dim() - 1; e >= 0; --e) {
      vst[e + r.n - values.dim()] = values.sizes()[e] == 1 ? 0 : s;
      s *= values.sizes()[e];
    }
  }
  const int npre = p.first, nb = p.bshape.n, npost = r.n - npre - nb;
  // The post part of values is either contiguous, a broadcast scalar, or general.
  bool post_contig = true, post_zero = true;
  {
    int64_t s = 1;
    for (int d = r.n - 1; d >= npre + nb; --d) {
      if (r[d] != 1 && vst[d] != s) post_contig = false;
      if (r[d] != 1 && vst[d] != 0) post_zero = false;
      s *= r[d];
    }
  }
  const int64_t post = p.post;
  auto store = [accumulate](T* dst, T v) {
    if (!accumulate)
      *dst = v;
    else if constexpr (std::is_same_v<T, bool>)
      *dst = load(dst) || v;
    else
      *dst = wrapping_add(*dst, v);
  };
  // Different pre positions write disjoint blocks; duplicates within one block are applied in order.
  parallel_for(p.pre, grain_for(sat_mul(p.nb, post)), [&](int64_t p0, int64_t p1) {
    for (int64_t pi = p0; pi < p1; ++pi) {
      int64_t vpre = 0, rem = pi;
      for (int d = npre - 1; d >= 0; --d) vpre += (rem % r[d]) * vst[d], rem /= r[d];
      for (int64_t b = 0; b < p.nb; ++b) {
        const int64_t off = source_offset(p, b);
        if (off < 0) continue;
        int64_t vb = vpre, brem = b;
        for (int d = npre + nb - 1; d >= npre; --d) vb += (brem % r[d]) * vst[d], brem /= r[d];
        T* dst = yp + pi * p.block + off;
        if (post_zero) {
          const T v = load(vp + vb);
          for (int64_t q = 0; q < post; ++q) store(dst + q, v);
        } else if (post_contig) {
          for (int64_t q = 0; q < post; ++q) store(dst + q, load(vp + vb + q));
        } else {
          for (int64_t q = 0; q < post; ++q) {
            int64_t vo = vb, qrem = q;
            for (int d = r.n - 1; d >= r.n - npost; --d) vo += (qrem % r[d]) * vst[d], qrem /= r[d];
            store(dst + q, load(vp + vo));
          }
        }
      }
    }
  });
}

}  // namespace

Status index_put_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::index_put.default";
  bool in_place, accumulate;
  const Tensor *x, *values;
  KILN_RETURN_IF_ERROR(check_arity_inplace(op, in, out, 4, 1, &in_place));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 2, "values", &values));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 3, "accumulate", &accumulate));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", y, "output"));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", *values, "values"));
  KILN_CHECK_OR_RETURN(x->dim() > 0, KernelFailure, "%s: cannot index a 0-D tensor", op);
  IndexPlan p;
  KILN_RETURN_IF_ERROR(make_plan(op, *x, in[1], &p));
  // values must broadcast to the indexed region.
  KILN_CHECK_OR_RETURN(values->dim() <= p.result.n, KernelFailure, "%s: values %s cannot be broadcast to %s", op,
                       describe(*values).c_str(), describe_sizes(p.result.span()).c_str());
  for (int e = 0; e < values->dim(); ++e) {
    const int64_t vs = values->sizes()[e], rs = p.result[e + p.result.n - values->dim()];
    KILN_CHECK_OR_RETURN(vs == 1 || vs == rs, KernelFailure, "%s: values %s cannot be broadcast to %s", op,
                         describe(*values).c_str(), describe_sizes(p.result.span()).c_str());
  }
  const Dims self_sizes(x->sizes());
  KILN_RETURN_IF_ERROR(resize_output(op, &y, self_sizes.span()));
  if (!in_place) copy_elements(y.data(), x->data(), x->numel(), element_size(x->dtype()));
  if (p.result.numel() == 0) return Status::ok();
  if (x->dtype() == ScalarType::Float16 || x->dtype() == ScalarType::BFloat16) {
    // A 16-bit KV cache written (kiln.llm.model): stores are copies of the bits; sums would need float16 math.
    KILN_CHECK_OR_RETURN(!accumulate, KernelFailure, "%s: accumulate=True into %s is not supported", op,
                         describe(*x).c_str());
    put_typed<uint16_t>(p, *values, y, false);
    return Status::ok();
  }
  const bool ok = dispatch_all(x->dtype(), [&](auto tag) { put_typed<decltype(tag)>(p, *values, y, accumulate); });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, describe(*x).c_str());
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::index_put.default", "*", index_put_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
