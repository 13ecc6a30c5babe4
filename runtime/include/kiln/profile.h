// Profile: where profiled calls of a method spent their time, per instruction
// and per thread-pool chunk (docs/profiling.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/api.h"
#include "kiln/program.h"
#include "kiln/tensor.h"

namespace kiln {

// The dtype and sizes of a tensor argument when its instruction ran.
struct ProfiledShape {
  ScalarType dtype = ScalarType::Float32;
  std::vector<int64_t> sizes;
};

// One instruction of one profiled call. Times are steady-clock nanoseconds.
struct ProfiledInstruction {
  uint32_t call = 0;   // index into Profile::calls
  uint32_t index = 0;  // the instruction's index in the method (Profile::instructions)
  uint64_t start_ns = 0, end_ns = 0;
  std::vector<ProfiledShape> inputs;  // the tensor arguments (tensor lists expanded), in order
  std::vector<ProfiledShape> outputs;
};

// One chunk of a parallel_for an instruction ran on the pool (chunks a call
// ran alone, inline, are not recorded: they are the instruction's own span).
struct ProfiledChunk {
  uint32_t call = 0, index = 0;  // as in ProfiledInstruction
  int32_t thread = 0;            // worker_index(): 0 the calling thread, 1.. the pool's workers
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t job = 0;            // which parallel_for of the call (numbered from 0 in each call)
  int64_t begin = 0, end = 0;  // the chunk: [begin, end) of that parallel_for's range [0, n)
  int64_t n = 0;
};

// One profiled call: from the first instruction to the last (execute() alone,
// without binding inputs).
struct ProfiledCall {
  uint64_t start_ns = 0, end_ns = 0;
};

// What Method::execute(Profile*) / run(inputs, Profile*) recorded.
// With the environment variable KILN_SIMULATE_THREADS=N (1 to kMaxThreads) a
// profiled call runs on virtual workers: kernels see num_threads() == N and
// every parallel_for splits its range as the pool would for N threads, but
// all chunks run one after another on the calling thread, each recorded; this
// predicts scaling beyond the machine's cores (docs/profiling.md). The times
// of such a call are the calling thread's CPU time, not the steady clock, so
// that other processes' time slices stay out of its chunks. Calls without a
// Profile never read it. Each profiled
// call appends to the same Profile; clear() starts over. Profiling allocates
// while it records; with no Profile a call costs what it always did.
class KILN_API Profile {
 public:
  std::string method;
  std::vector<InstructionInfo> instructions;  // Method::instructions(): op, library, tier
  std::vector<ProfiledCall> calls;
  std::vector<ProfiledInstruction> records;
  std::vector<ProfiledChunk> chunks;

  // Wall time of every call, and of every instruction, summed over the calls.
  uint64_t call_ns() const;
  uint64_t instruction_ns() const;
  // The operators that took the most time, totals per call: operator, kernel
  // (tier and library), instructions, time, share, and the shapes of the
  // costliest instruction; then the total against the calls' wall time.
  std::string table(size_t top = 20) const;
  // The calls in the Chrome trace event format (chrome://tracing, Perfetto):
  // one span per call and per instruction on the calling thread, one per
  // thread-pool chunk on the thread that ran it.
  std::string chrome_trace() const;
  void clear();
};

}  // namespace kiln
