// MethodState: a loaded method's values, planned memory and resolved instructions.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kiln/kernel.h"
#include "kiln/profile.h"
#include "kiln/program.h"
#include "kiln/value.h"
#include "loader/program_data.h"
#include "registry/registry_internal.h"

namespace kiln::internal {

// An item of an IntValueList, copied from its Int value before a step reads the list.
struct IntRef {
  int64_t* dst;
  const Value* src;
};

// The IntRefs of one IntValueList: [begin, begin + count) in MethodState::int_refs.
struct IntRange {
  uint32_t begin = 0, count = 0;
};

struct Step {
  enum class Kind : uint8_t { Kernel, Backend, Move, IntOp } kind;
  // The kernel that serves the step; until prepare, every candidate, highest
  // tier first (registry_internal.h find_kernels).
  const KernelEntry* kernel = nullptr;
  std::vector<const KernelEntry*> candidates;
  const BackendEntry* backend = nullptr;
  void* backend_handle = nullptr;
  KernelContext ctx;
  // Ranges in MethodState::step_inputs / step_outputs.
  uint32_t inputs_begin = 0, num_inputs = 0, outputs_begin = 0, num_outputs = 0;
  // Range in MethodState::step_lists: the int lists this step reads, refreshed first.
  uint32_t lists_begin = 0, num_lists = 0;
  Tensor* move_src = nullptr;
  Tensor* move_dst = nullptr;
  bool move_keeps_shape = false;  // dst is a state tensor
  // IntOp: kind, operands (a SizeOf reads int_tensor and int_args[1]) and result.
  schema::IntOpKind int_kind = schema::IntOpKind::SizeOf;
  const Tensor* int_tensor = nullptr;
  const Value* int_args[3] = {nullptr, nullptr, nullptr};
  Value* int_out = nullptr;
  std::string name;  // "aten::linear.default", for error messages
};

struct MethodState {
  static Result<std::unique_ptr<MethodState>> create(std::shared_ptr<const ProgramData> program, size_t index);
  ~MethodState();

  Status set_input(size_t index, const Tensor& input);
  // With a profile, records the call into it (kiln/profile.h).
  Status execute(Profile* profile = nullptr);
  Status execute_steps(Profile* profile);
  void reset_state();

  // The steps of create(), in order.
  Status allocate_arenas();
  Status build_values();
  Status bind_steps();
  Status prepare_steps();
  // (Re)allocates the scratch every kernel asked for, for `workers` pool threads,
  // and points each step's context at it.
  Status plan_scratch(int workers);

  std::shared_ptr<const ProgramData> program;
  const schema::Method* method = nullptr;
  MethodSpec spec;

  struct Arena {
    void* data = nullptr;
    size_t size = 0;
  };
  std::vector<Arena> arenas;
  // Kernel scratch: one block per call (the largest any step asked for) and one
  // per pool worker, shared by all steps since they run one after another.
  Arena scratch;
  size_t call_scratch_bytes = 0;     // 64-byte multiple
  size_t worker_scratch_stride = 0;  // 64-byte multiple
  int scratch_workers = 0;           // pool size the scratch was planned for
  std::vector<InstructionInfo> infos;
  // Stable storage: sized once at load, so pointers into them never move.
  std::vector<Tensor> tensors;
  std::vector<Value> values;
  std::vector<Tensor*> list_items;
  std::vector<const Value*> step_inputs;
  std::vector<Tensor*> step_outputs;
  std::vector<Step> steps;
  std::vector<Tensor*> inputs;
  std::vector<bool> input_bound;
  std::vector<const Tensor*> outputs;
  // Storage of the IntValueLists (what kernels see as IntList) and where their items come from.
  std::vector<int64_t> list_ints;
  std::vector<IntRef> int_refs;      // one per list item, grouped by list
  std::vector<IntRange> step_lists;  // the lists each step reads (Step::lists_begin)
  std::vector<IntRange> list_refs;   // by value index: an IntValueList's range in int_refs
  // State tensors and the bytes they start from (a constant segment).
  struct StateInit {
    Tensor* tensor;
    const uint8_t* initial;
    Tensor declared;    // the tensor as loaded: data, sizes and capacity
    bool zero_initial;  // reset by zero_pages: a KV cache holds only the pages written since
  };
  std::vector<StateInit> state;

  // The turn of program.h's thread contract: held by Method::lock(), or by one
  // call of a thread that does not hold it. `holder` is the thread that took it
  // with lock() (only that thread writes its own id, so a relaxed load that
  // sees this thread's id is exact).
  std::mutex turn;
  std::atomic<std::thread::id> holder{};
};

}  // namespace kiln::internal
