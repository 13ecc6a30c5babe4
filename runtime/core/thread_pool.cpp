// The runtime-owned thread pool behind kiln::parallel_for (process-wide state).
//
// Several parallel_for calls may be in flight at once, one per calling thread:
// each posts its job into a free slot, works through its own chunks, and the
// workers help whichever posted job still has chunks left. A caller only ever
// runs chunks of its own job (worker_index() 0 stays meaningful per job).
// Workers spin briefly after running out of work so that back-to-back
// operators do not pay a sleep and wake-up each.
#include "kiln/thread_pool.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "core/thread_pool_internal.h"

namespace kiln {
namespace {

thread_local bool t_inside_parallel_for = false;
thread_local internal::ChunkObserver* t_observer = nullptr;
thread_local int t_worker_index = 0;
thread_local int t_session_depth = 0;
thread_local int t_virtual_workers = 0;  // 0: the real pool (internal::VirtualWorkers)

// How long an idle worker, and a caller waiting for workers, spin before sleeping.
constexpr auto kSpin = std::chrono::microseconds(100);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

int default_thread_count() {
  if (const char* env = std::getenv("KILN_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return std::min(n, kMaxThreads);
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// How parallel_for cuts [0, n) for `threads` threads: at most one chunk per
// thread, each at least `grain` long, all of one length but the last. One chunk
// per thread keeps the per-call overhead to one claim per thread; kernels that
// need finer load balance pick their own tasks and pass grain 1.
struct RangeSplit {
  int64_t chunk, num_chunks;
};

RangeSplit split_range(int64_t n, int64_t grain, int threads) {
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, threads);
  return {(n + chunks - 1) / chunks, chunks};
}

struct Job {
  internal::RangeFn fn;
  void* closure;
  int64_t n, chunk, num_chunks;
  uint32_t id = 0;  // the observer's number for it
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::atomic<bool> caller_sleeping{false};
  internal::ChunkObserver* observer = nullptr;  // the caller's (profiling), or none
};

// A posted job. `users` counts workers that may be looking at `job`: the caller
// clears `job` and then waits for `users` to drain before its Job (on its
// stack) goes away.
struct Slot {
  std::atomic<Job*> job{nullptr};
  std::atomic<int> users{0};
};

class Pool {
 public:
  Pool() { start(default_thread_count()); }

  int size() const { return size_.load(std::memory_order_relaxed); }

  void resize(int n) {
    std::unique_lock<std::shared_mutex> lock(resize_mutex_);
    stop();
    start(n < 1 ? default_thread_count() : std::min(n, kMaxThreads));
  }

  std::shared_mutex& resize_mutex() { return resize_mutex_; }

  void run(int64_t n, int64_t grain, internal::RangeFn fn, void* closure) {
    const RangeSplit split = split_range(n, grain, size());
    Slot* slot = split.num_chunks > 1 ? claim_slot() : nullptr;
    if (slot == nullptr) {  // nothing to share, or every slot busy
      fn(closure, 0, n);
      return;
    }
    Job job;
    job.fn = fn;
    job.closure = closure;
    job.n = n;
    job.chunk = split.chunk;
    job.num_chunks = split.num_chunks;
    job.observer = t_observer;
    if (job.observer != nullptr) job.id = job.observer->job();
    slot->job.store(&job);
    posted_.fetch_add(1);
    if (sleepers_.load() > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      work_cv_.notify_all();
    }
    work_through(job);
    wait_done(job);
    slot->job.store(nullptr);
    while (slot->users.load() != 0) cpu_relax();
    slot_busy_[slot - slots_].store(false);
  }

 private:
  static constexpr int kSlots = 16;

  Slot* claim_slot() {
    for (int i = 0; i < kSlots; ++i) {
      bool expected = false;
      if (slot_busy_[i].compare_exchange_strong(expected, true)) return &slots_[i];
    }
    return nullptr;
  }

  // Runs unclaimed chunks of `job`; true if it ran any.
  static bool work_through(Job& job) {
    bool ran = false;
    const bool was_inside = t_inside_parallel_for;
    t_inside_parallel_for = true;
    for (int64_t c = job.next.fetch_add(1); c < job.num_chunks; c = job.next.fetch_add(1)) {
      const int64_t begin = c * job.chunk, end = std::min(job.n, begin + job.chunk);
      if (begin < end) {
        if (job.observer == nullptr) {
          job.fn(job.closure, begin, end);
        } else {
          const uint64_t start = internal::now_ns();
          job.fn(job.closure, begin, end);
          job.observer->chunk({job.id, t_worker_index, begin, end, job.n, start, internal::now_ns()});
        }
      }
      ran = true;
      if (job.done.fetch_add(1) + 1 == job.num_chunks && job.caller_sleeping.load()) {
        // The caller gave up spinning: wake it. Taking the mutex orders this
        // after its check of `done`.
        std::lock_guard<std::mutex> lock(done_mutex());
        done_cv().notify_all();
      }
    }
    t_inside_parallel_for = was_inside;
    return ran;
  }

  void wait_done(Job& job) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (job.done.load() != job.num_chunks) {
      if (std::chrono::steady_clock::now() < until) {
        cpu_relax();
        continue;
      }
      std::unique_lock<std::mutex> lock(done_mutex());
      job.caller_sleeping.store(true);
      done_cv().wait(lock, [&] { return job.done.load() == job.num_chunks; });
    }
  }

  static std::mutex& done_mutex() {
    static std::mutex* m = new std::mutex();
    return *m;
  }
  static std::condition_variable& done_cv() {
    static std::condition_variable* cv = new std::condition_variable();
    return *cv;
  }

  // One pass over the slots; true if it ran any chunk.
  bool help() {
    bool ran = false;
    for (Slot& slot : slots_) {
      if (slot.job.load(std::memory_order_relaxed) == nullptr) continue;
      slot.users.fetch_add(1);
      if (Job* job = slot.job.load()) ran |= work_through(*job);
      slot.users.fetch_sub(1);
    }
    return ran;
  }

  void worker_loop(int index) {
    t_worker_index = index;
    for (;;) {
      const uint64_t seen = posted_.load();
      if (stopping_.load()) return;
      if (help()) continue;
      const auto until = std::chrono::steady_clock::now() + kSpin;
      bool posted = false;
      while (std::chrono::steady_clock::now() < until) {
        if (posted_.load(std::memory_order_relaxed) != seen || stopping_.load(std::memory_order_relaxed)) {
          posted = true;
          break;
        }
        cpu_relax();
      }
      if (posted) continue;
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1);
      work_cv_.wait(lock, [&] { return stopping_.load() || posted_.load() != seen; });
      sleepers_.fetch_sub(1);
    }
  }

  void start(int n) {
    stopping_.store(false);
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
    size_.store(n);
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_.store(true);
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    size_.store(1);
  }

  std::shared_mutex resize_mutex_;  // shared by calls in flight, exclusive for resize
  std::atomic<int> size_{1};
  std::vector<std::thread> workers_;
  Slot slots_[kSlots];
  std::atomic<bool> slot_busy_[kSlots] = {};
  std::atomic<uint64_t> posted_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::condition_variable work_cv_;
};

Pool& pool() {
  // Leaked on purpose: workers must outlive every static destructor that might
  // still run a kernel during process exit.
  static Pool* p = new Pool();
  return *p;
}

}  // namespace

// Virtual workers (internal::VirtualWorkers): the real pool's split for
// `workers` threads, every chunk run here in order.
void run_virtual(int64_t n, int64_t grain, internal::RangeFn fn, void* closure, int workers) {
  const RangeSplit split = split_range(n, grain, workers);
  if (split.num_chunks <= 1) {
    fn(closure, 0, n);
    return;
  }
  internal::ChunkObserver* observer = t_observer;
  const uint32_t id = observer != nullptr ? observer->job() : 0;
  t_inside_parallel_for = true;
  for (int64_t c = 0; c < split.num_chunks; ++c) {
    const int64_t begin = c * split.chunk, end = std::min(n, begin + split.chunk);
    if (begin >= end) continue;  // as the pool skips them
    const uint64_t start = internal::now_ns();
    fn(closure, begin, end);
    if (observer != nullptr) observer->chunk({id, t_worker_index, begin, end, n, start, internal::now_ns()});
  }
  t_inside_parallel_for = false;
}

int num_threads() noexcept { return t_virtual_workers > 0 ? t_virtual_workers : pool().size(); }

void set_num_threads(int n) noexcept {
  // Inside parallel_for or a method's execution the caller holds the pool; a
  // resize would wait for itself.
  if (t_inside_parallel_for || t_session_depth > 0) return;
  pool().resize(n);
}

int worker_index() noexcept { return t_worker_index; }

namespace internal {

uint64_t now_ns() noexcept {
  if (t_virtual_workers > 0) {
    // Every chunk runs on this thread: its CPU time is the one clock they share, and it stands
    // still while another process has the core (a shared machine's time slices stay out).
    timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
      return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
    }
  }
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

ChunkObserver* observe_chunks(ChunkObserver* observer) noexcept {
  ChunkObserver* previous = t_observer;
  t_observer = observer;
  return previous;
}

VirtualWorkers::VirtualWorkers(int workers) noexcept : previous_(t_virtual_workers) {
  t_virtual_workers = std::clamp(workers, 1, kMaxThreads);
}

VirtualWorkers::~VirtualWorkers() { t_virtual_workers = previous_; }

PoolSession::PoolSession() noexcept {
  if (t_session_depth++ == 0) pool().resize_mutex().lock_shared();
}

PoolSession::~PoolSession() {
  if (--t_session_depth == 0) pool().resize_mutex().unlock_shared();
}

void parallel_for_impl(int64_t n, int64_t grain, RangeFn fn, void* closure) noexcept {
  if (n <= 0) return;
  if (t_inside_parallel_for || n <= grain) {
    fn(closure, 0, n);
    return;
  }
  if (t_virtual_workers > 0) {
    run_virtual(n, grain, fn, closure, t_virtual_workers);
    return;
  }
  PoolSession session;
  pool().run(n, grain, fn, closure);
}

}  // namespace internal

}  // namespace kiln
