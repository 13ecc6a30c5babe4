// Program and Method: load a .kiln file, verify it, and run its methods.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/api.h"
#include "kiln/cpu.h"
#include "kiln/error.h"
#include "kiln/span.h"
#include "kiln/tensor.h"

namespace kiln {

namespace internal {
struct ProgramData;
struct MethodState;
}  // namespace internal

struct TensorSpec {
  std::string name;
  ScalarType dtype = ScalarType::Float32;
  // Largest sizes; a dimension listed in dynamic_dims may be smaller at run time,
  // down to min_sizes (equal to sizes for static dimensions).
  std::vector<int64_t> sizes;
  std::vector<int> dynamic_dims;
  std::vector<int64_t> min_sizes;
};

struct MethodSpec {
  std::string name;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  // Mutable state (module buffers the method updates): persists across
  // execute() calls of one loaded Method; each loaded Method has its own.
  std::vector<TensorSpec> state;
  std::vector<uint64_t> arena_sizes;   // planned activation memory, bytes per arena
  size_t num_instructions = 0;
};

struct LoadOptions {
  // Refuse what would need more memory than this: a method whose planned
  // arenas and kernel scratch add up to more, or packed weights that would take
  // the program's total (packed weights plus the method's memory) beyond it.
  uint64_t max_memory_bytes = uint64_t{4} << 30;
  // Which kernels serve instructions: "optimized" (the highest tier whose
  // prepare accepts each instruction) or "portable" (the lowest tier: the
  // reference kernels). Empty: the KILN_KERNELS environment variable, else
  // "optimized".
  std::string kernels;
  // The instruction-set level optimized kernels may use (cpu.h: "baseline",
  // "avx2", "avx512", "neon"); a level above what the CPU supports is lowered to
  // it. Empty: the KILN_ISA environment variable, else what the CPU supports.
  std::string isa;
};

// How one instruction of a loaded method is served.
struct InstructionInfo {
  std::string kind;        // "kernel", "backend", "move" or "int_op"
  std::string op;          // "aten::linear.default", the backend's name, or the int op
  std::string library;     // file of the kernel or backend ("" for moves and int ops)
  int32_t tier = 0;        // of the kernel (kernel.h: kTierPortable, kTierOptimized, ...)
  uint64_t packed_bytes = 0;   // packed constants this instruction's kernel created
  uint64_t scratch_bytes = 0;  // scratch it asked for: per call plus per worker times the pool size
};

class Method;

class KILN_API Program {
 public:
  // Memory-maps the file; constant data is used in place.
  static Result<Program> load(const std::string& path, const LoadOptions& options = {});
  // Uses `data` in place when it is 64-byte aligned (the caller keeps it alive
  // and unchanged while the program or any method lives); otherwise copies it.
  static Result<Program> load_from_buffer(const void* data, size_t size,
                                          const LoadOptions& options = {});
  // Copies `data` first: the caller may change or free it as soon as this returns.
  static Result<Program> load_from_copy(const void* data, size_t size, const LoadOptions& options = {});

  std::vector<std::string> method_names() const;
  Result<MethodSpec> method_spec(const std::string& name) const;
  // Resolves every kernel and backend, allocates the planned arenas once, and
  // runs kernel prepare functions. Fails here, not in the middle of a run.
  Result<Method> load_method(const std::string& name) const;

  size_t size_bytes() const;
  std::string producer() const;
  // Named metadata (docs/format.md, Metadata), e.g. an LLM's tokenizer: the
  // keys in file order, and the bytes of one key, in place in the program
  // (valid while this Program lives). NotFound when the key is absent.
  std::vector<std::string> metadata_keys() const;
  Result<Span<const uint8_t>> metadata(const std::string& key) const;
  // Bytes of packed constants (prepacked weights) the loaded methods created,
  // shared by every method of this program.
  uint64_t packed_bytes() const;

  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  ~Program();

 private:
  explicit Program(std::shared_ptr<const internal::ProgramData> data);
  std::shared_ptr<const internal::ProgramData> data_;
};

class KILN_API Method {
 public:
  const MethodSpec& spec() const;
  size_t num_inputs() const;
  size_t num_outputs() const;

  // Binds input `index` to the caller's memory without copying. The tensor must
  // match the input's dtype and sizes (dynamic dims within their bounds) and
  // stay alive until execute() returns.
  Status set_input(size_t index, const Tensor& input);
  // Runs every instruction. Allocates nothing. State tensors keep their
  // updates for the next call.
  Status execute();
  // Output `index` of the last execute(); its bytes live in the method's arena
  // and are overwritten by the next execute(). Precondition: index < num_outputs().
  const Tensor& output(size_t index) const;

  // Restores every state tensor to its value in the program file (as right
  // after load_method). Other loaded Methods are not affected.
  void reset_state();

  // One entry per instruction: which kernel (library and tier) or backend
  // serves it, and what it packed and planned.
  const std::vector<InstructionInfo>& instructions() const;
  // The instruction-set level the method's optimized kernels were prepared for.
  Isa isa() const;

  // set_input for each input, then execute(); returns views of the outputs.
  Result<std::vector<Tensor>> run(Span<const Tensor> inputs);

  Method(Method&&) noexcept;
  Method& operator=(Method&&) noexcept;
  ~Method();

 private:
  friend class Program;
  explicit Method(std::unique_ptr<internal::MethodState> state);
  std::unique_ptr<internal::MethodState> state_;
};

}  // namespace kiln
