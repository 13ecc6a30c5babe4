// Private pool API for the executor: keeping the pool size fixed while a method runs.
#pragma once

namespace kiln::internal {

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
