// Private pool API for the executor: keeping the pool size fixed while a method
// runs, and observing the chunks of its parallel_for calls (the profiler).
#pragma once

#include <cstdint>

namespace kiln::internal {

// Steady-clock nanoseconds (the profiler's clock); under VirtualWorkers, the
// calling thread's CPU time instead.
uint64_t now_ns() noexcept;

// One chunk of a parallel_for: [begin, end) of its range [0, n), run by pool
// thread `thread` (worker_index()) from start_ns to end_ns.
struct ChunkSpan {
  uint32_t job;  // the number ChunkObserver::job() gave its parallel_for
  int thread;
  int64_t begin, end, n;
  uint64_t start_ns, end_ns;
};

// Told about each chunk the pool runs for a parallel_for of the thread that set
// it (observe_chunks), from the thread that ran the chunk, as it ends.
class ChunkObserver {
 public:
  // Called once per parallel_for that is split, on the calling thread, before
  // any of its chunks runs; the number goes into each of its ChunkSpans.
  virtual uint32_t job() noexcept = 0;
  virtual void chunk(const ChunkSpan& span) noexcept = 0;

 protected:
  ~ChunkObserver() = default;
};

// Sets the calling thread's observer (nullptr: none, the default); returns the
// previous one. With none, a chunk costs one extra branch.
ChunkObserver* observe_chunks(ChunkObserver* observer) noexcept;

// While one exists on a thread, num_threads() there answers `workers` and its
// parallel_for calls split their range as the pool would for that many threads
// (the same chunk sizes), but run every chunk on this thread, one after the
// other: the profiler's thread-scaling simulation (docs/profiling.md); now_ns()
// reads the thread's CPU clock meanwhile. Kernels
// see `workers` threads while only worker_index() 0 runs, so the per-worker
// scratch planned for the real pool stays enough. Nests; the innermost wins.
class VirtualWorkers {
 public:
  explicit VirtualWorkers(int workers) noexcept;
  ~VirtualWorkers();
  VirtualWorkers(const VirtualWorkers&) = delete;
  VirtualWorkers& operator=(const VirtualWorkers&) = delete;

 private:
  int previous_;
};

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
