// The runtime-owned thread pool that every kernel and backend shares.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kiln/api.h"

namespace kiln {

// The largest pool: set_num_threads and KILN_NUM_THREADS ask for at most this.
constexpr int kMaxThreads = 1024;

// Number of threads that parallel_for uses (the caller's thread included); in a
// profiled call with KILN_SIMULATE_THREADS=N, N (kiln/profile.h).
KILN_API int num_threads() noexcept;
// Sets the pool size, at most kMaxThreads; n < 1 means "one per available core"
// (or KILN_NUM_THREADS).
// Waits for parallel work in flight (and for methods executing) to finish.
// Ignored when called from inside parallel_for.
KILN_API void set_num_threads(int n) noexcept;
// The calling thread's index in the pool: 1 .. num_threads() - 1 for the pool's
// workers, 0 for every other thread (the one that called parallel_for). Kernels
// use it to pick their per-worker scratch (worker_scratch() in kernel.h).
KILN_API int worker_index() noexcept;

namespace internal {
using RangeFn = void (*)(void* closure, int64_t begin, int64_t end);
KILN_API void parallel_for_impl(int64_t n, int64_t grain, RangeFn fn, void* closure) noexcept;
}  // namespace internal

// Calls fn(begin, end) on disjoint chunks covering [0, n), each at least `grain`
// long (but the last), and returns when all are done. Nested calls run inline.
// Calls from different threads (e.g. two methods executing at once) proceed at
// the same time, sharing the workers. `fn` must not throw.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& fn) noexcept {
  using Fn = std::remove_reference_t<F>;
  internal::parallel_for_impl(
      n, grain, [](void* closure, int64_t begin, int64_t end) { (*static_cast<Fn*>(closure))(begin, end); },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

}  // namespace kiln
