// The process's one record of which levels' microkernel tables were dispatched (isa_dispatch.h).
#include "optimized/isa_dispatch.h"

namespace kiln::kernels {

std::atomic<uint64_t> g_isa_dispatch_log{0};

}  // namespace kiln::kernels
