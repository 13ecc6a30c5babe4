// Broadcast shapes (broadcast.h).
#include "broadcast.h"

#include <string>

namespace kiln {
namespace kernels {

Status broadcast_shapes(const char* op, const Tensor* const* tensors, int count, Dims* out) {
  int nd = 0;
  for (int k = 0; k < count; ++k) nd = std::max(nd, tensors[k]->dim());
  out->n = nd;
  for (int d = 0; d < nd; ++d) {
    int64_t size = 1;
    for (int k = 0; k < count; ++k) {
      const Tensor& t = *tensors[k];
      const int td = d - (nd - t.dim());
      if (td < 0) continue;
      const int64_t s = t.sizes()[td];
      if (s == 1) continue;
      if (size != 1 && size != s) {
        std::string shapes;
        for (int j = 0; j < count; ++j) shapes += (j ? " and " : "") + describe(*tensors[j]);
        return Status(Error::KernelFailure, format("%s: shapes %s are not broadcastable", op, shapes.c_str()));
      }
      size = s;
    }
    (*out)[d] = size;
  }
  return Status::ok();
}

}  // namespace kernels
}  // namespace kiln
