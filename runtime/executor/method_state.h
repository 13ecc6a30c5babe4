// MethodState: a loaded method's values, planned memory and resolved instructions.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/kernel.h"
#include "kiln/program.h"
#include "kiln/value.h"
#include "loader/program_data.h"
#include "registry/registry_internal.h"

namespace kiln::internal {

struct Step {
  enum class Kind : uint8_t { Kernel, Backend, Move } kind;
  const KernelEntry* kernel = nullptr;
  const BackendEntry* backend = nullptr;
  void* backend_handle = nullptr;
  KernelContext ctx;
  // Ranges in MethodState::step_inputs / step_outputs.
  uint32_t inputs_begin = 0, num_inputs = 0, outputs_begin = 0, num_outputs = 0;
  Tensor* move_src = nullptr;
  Tensor* move_dst = nullptr;
  std::string name;  // "aten::linear.default", for error messages
};

struct MethodState {
  static Result<std::unique_ptr<MethodState>> create(std::shared_ptr<const ProgramData> program, size_t index);
  ~MethodState();

  Status set_input(size_t index, const Tensor& input);
  Status execute();

  std::shared_ptr<const ProgramData> program;
  const schema::Method* method = nullptr;
  MethodSpec spec;

  struct Arena { void* data = nullptr; size_t size = 0; };
  std::vector<Arena> arenas;
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
};

}  // namespace kiln::internal
