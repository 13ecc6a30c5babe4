// The runtime-owned thread pool behind kiln::parallel_for (process-wide state).
#include "kiln/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {
namespace {

thread_local bool t_inside_parallel_for = false;

int default_thread_count() {
  if (const char* env = std::getenv("KILN_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// Workers sleep on a condition variable and claim chunks of the current job
// through an atomic counter. The job is only replaced while no worker holds it
// (active_ == 0), so a late-waking worker can never run a stale closure.
class Pool {
 public:
  Pool() { start(default_thread_count()); }

  int size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int>(workers_.size()) + 1;
  }

  void resize(int n) {
    std::lock_guard<std::mutex> run_lock(run_mutex_);
    stop();
    start(n < 1 ? default_thread_count() : n);
  }

  void run(int64_t n, int64_t grain, internal::RangeFn fn, void* closure) {
    std::lock_guard<std::mutex> run_lock(run_mutex_);
    grain = std::max<int64_t>(grain, 1);
    int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, static_cast<int64_t>(workers_.size()) + 1);
    if (chunks <= 1) {
      fn(closure, 0, n);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fn_ = fn;
      closure_ = closure;
      n_ = n;
      chunk_ = (n + chunks - 1) / chunks;
      num_chunks_ = chunks;
      next_.store(0);
      done_.store(0);
      ++generation_;
    }
    work_cv_.notify_all();
    work_through_chunks();
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return done_.load() == num_chunks_ && active_ == 0; });
  }

 private:
  void start(int n) {
    stopping_ = false;
    for (int i = 1; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  void work_through_chunks() {
    t_inside_parallel_for = true;
    for (int64_t c = next_.fetch_add(1); c < num_chunks_; c = next_.fetch_add(1)) {
      int64_t begin = c * chunk_;
      int64_t end = std::min(n_, begin + chunk_);
      if (begin < end) fn_(closure_, begin, end);
      done_.fetch_add(1);
    }
    t_inside_parallel_for = false;
  }

  void worker_loop() {
    uint64_t seen = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      seen = generation_;
    }
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        ++active_;
      }
      work_through_chunks();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        --active_;
      }
      done_cv_.notify_all();
    }
  }

  std::mutex run_mutex_;  // one parallel_for at a time across caller threads
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::vector<std::thread> workers_;
  bool stopping_ = false;
  uint64_t generation_ = 0;
  int active_ = 0;
  internal::RangeFn fn_ = nullptr;
  void* closure_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
  int64_t num_chunks_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> done_{0};
};

Pool& pool() {
  // Leaked on purpose: workers must outlive every static destructor that might
  // still run a kernel during process exit.
  static Pool* p = new Pool();
  return *p;
}

}  // namespace

int num_threads() noexcept { return pool().size(); }

void set_num_threads(int n) noexcept {
  if (t_inside_parallel_for) return;
  pool().resize(n);
}

namespace internal {
void parallel_for_impl(int64_t n, int64_t grain, RangeFn fn, void* closure) noexcept {
  if (n <= 0) return;
  if (t_inside_parallel_for || n <= grain) {
    fn(closure, 0, n);
    return;
  }
  pool().run(n, grain, fn, closure);
}
}  // namespace internal

}  // namespace kiln
