// Timing for the C++ benchmarks (gemm_bench, elementwise_bench, quantized_bench).
//
// The machine is shared: a thread that waits for a CPU does not count in CPU time, so rates per
// CPU second stay meaningful under load (wall-clock rates do not).
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace kiln::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// CPU seconds used by this process (all its threads) or, with CLOCK_THREAD_CPUTIME_ID, by the
// calling thread.
inline double cpu_seconds(clockid_t clock = CLOCK_PROCESS_CPUTIME_ID) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Median CPU seconds per call of fn over `batches` batches of calls lasting >= batch_s each, the
// process's CPU time divided by `threads` (the time per call if each pool thread had a core of its
// own; spinning pool workers count). One call first warms up outputs and scratch.
template <typename F>
double time_per_call(F&& fn, int threads, double batch_s, int batches = 5) {
  fn();
  std::vector<double> per_call;
  for (int b = 0; b < batches; ++b) {
    int64_t calls = 0;
    const double c0 = cpu_seconds();
    const auto t0 = Clock::now();
    do {
      fn();
      ++calls;
    } while (seconds_since(t0) < batch_s);
    per_call.push_back((cpu_seconds() - c0) / threads / static_cast<double>(calls));
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace kiln::bench
