// Private pool API for the executor: keeping the pool size fixed while a method
// runs, and observing the chunks of its parallel_for calls (the profiler).
#pragma once

#include <cstdint>

namespace kiln::internal {

// Steady-clock nanoseconds (the profiler's clock).
uint64_t now_ns() noexcept;

// Told about each chunk the pool runs for a parallel_for of the thread that set
// it (observe_chunks), from the thread that ran the chunk, as it ends.
class ChunkObserver {
 public:
  virtual void chunk(int thread, uint64_t start_ns, uint64_t end_ns) noexcept = 0;

 protected:
  ~ChunkObserver() = default;
};

// Sets the calling thread's observer (nullptr: none, the default); returns the
// previous one. With none, a chunk costs one extra branch.
ChunkObserver* observe_chunks(ChunkObserver* observer) noexcept;

// While one exists on a thread, set_num_threads() from any thread waits, so
// num_threads() (and therefore the per-worker scratch a method planned) stays
// valid for the whole execution. Nests freely on one thread.
class PoolSession {
 public:
  PoolSession() noexcept;
  ~PoolSession();
  PoolSession(const PoolSession&) = delete;
  PoolSession& operator=(const PoolSession&) = delete;
};

}  // namespace kiln::internal
