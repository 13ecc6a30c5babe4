// Program and Method: load a .kiln file, verify it, and run its methods.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
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
  std::vector<uint64_t> arena_sizes;  // planned activation memory, bytes per arena
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
  // The instruction-set level optimized kernels may use (a name of
  // kiln::isa_levels(), cpu.h): the features of the levels above it are taken
  // away and the method uses the best level whose features the CPU has, so a
  // level above what the CPU supports is lowered to it. Empty: the KILN_ISA
  // environment variable, else the best level of this CPU.
  std::string isa;
  // Program::load: true maps the file and uses its constants in place (the
  // program table is always read into private memory and verified there);
  // false reads the whole file into memory the program owns, so that nothing
  // done to the file after load can affect the program (docs/threads-and-files.md).
  bool map_file = true;
  // The packed-weight cache (docs/memory.md): a directory where the packed
  // weights of a mapped program are written once and then mapped read-only by
  // every later load of the same file, by this process or another, so that they
  // hold one physical copy and skip packing. "1" or "auto": $XDG_CACHE_HOME/kiln/packed
  // (else ~/.cache/kiln/packed); "0" or "off": none. Empty: the KILN_PACKED_CACHE
  // environment variable, else none. A cache that cannot be used never fails the
  // load: Program::packed_cache_report() says what happened.
  std::string packed_cache;
  // How products with a constant weight (linear, mm, addmm, matmul) compute (GemmPrecision, cpu.h):
  // "float32" or "bfloat16" (operands rounded to bfloat16, float32 sums: vdpbf16ps where the CPU has
  // AVX512_BF16, the same bits emulated elsewhere; packed weights take half the memory). Empty: the
  // KILN_GEMM_PRECISION environment variable, else the program's own choice (the metadata key
  // kiln.gemm_precision, which kiln.export writes for a model whose linear weights are bfloat16; it
  // takes effect only where the CPU has AVX512_BF16), else "float32". Method::gemm_precision() says
  // which one a method runs.
  std::string gemm_precision;
};

// How one instruction of a loaded method is served.
struct InstructionInfo {
  std::string kind;            // "kernel", "backend", "move" or "int_op"
  std::string op;              // "aten::linear.default", the backend's name, or the int op
  std::string library;         // file of the kernel or backend ("" for moves and int ops)
  int32_t tier = 0;            // of the kernel (kernel.h: kTierPortable, kTierOptimized, ...)
  uint64_t packed_bytes = 0;   // packed constants this instruction's kernel created
  uint64_t scratch_bytes = 0;  // scratch it asked for: per call plus per worker times the pool size
};

class Method;
class Profile;

class KILN_API Program {
 public:
  // Memory-maps the file (or reads it, LoadOptions::map_file); constant data
  // is used in place. While a program or method lives, a mapped file must not
  // be truncated or written in place (replace it by renaming a new file over
  // it): its constants are read from it, and a truncated mapping faults.
  static Result<Program> load(const std::string& path, const LoadOptions& options = {});
  // Uses `data` in place when it is 64-byte aligned (the caller keeps it alive
  // and unchanged while the program or any method lives); otherwise copies it.
  static Result<Program> load_from_buffer(const void* data, size_t size, const LoadOptions& options = {});
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
  // The part of packed_bytes() used in place from the packed-weight cache file
  // (shared with every process that maps it), and what happened to that file:
  // "" when no cache was asked for, else e.g. "mapped PATH (12 packed constants)"
  // or "no PATH yet; wrote PATH (...)" or "refused PATH: why; wrote PATH (...)".
  uint64_t packed_mapped_bytes() const;
  std::string packed_cache_report() const;

  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  ~Program();

 private:
  explicit Program(std::shared_ptr<const internal::ProgramData> data);
  std::shared_ptr<const internal::ProgramData> data_;
};

// Threads. A Program is immutable once loaded: its const members and
// load_method() may be called from any number of threads at once, and the
// Methods it loads are independent (each has its own memory and state; they
// share the program's packed weights and the thread pool), so separate Methods
// run in parallel without any locking.
//
// A Method is one execution context: its bound inputs, planned memory, outputs
// and state. Calls on one Method take turns:
//  - Method is Lockable (lock, try_lock, unlock). A thread that holds it may
//    call set_input, execute, output and run; the outputs it reads are its own
//    until it unlocks. This is how one Method is shared between threads:
//        { std::lock_guard<kiln::Method> turn(method);
//          auto outputs = method.run(inputs);  // use or copy them here
//        }
//    State advances one whole turn at a time, in the order turns are taken.
//  - A thread that does not hold the Method may still call it alone (one thread
//    at a time, as without threads). A call that overlaps another thread's turn
//    or call (set_input, execute, run) is refused with Error::Busy before it
//    touches anything, so it can never run on another caller's inputs.
//    Sequences are not covered: two unlocked threads interleaving set_input and
//    execute can still mix their inputs; hold the lock for the whole call.
//  - reset_state() waits for the turn in progress, so it lands between calls.
//  - A Method must not be moved or destroyed while a thread holds it or calls it.
//
// The Python layer takes the turn around every call (with the GIL released
// while it waits), so one Python Method is safe to call from many threads.
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
  // after load_method). Other loaded Methods are not affected. Waits for a turn
  // another thread holds.
  void reset_state();

  // One entry per instruction: which kernel (library and tier) or backend
  // serves it, and what it packed and planned.
  const std::vector<InstructionInfo>& instructions() const;
  // The instruction-set level the method's optimized kernels were prepared for.
  Isa isa() const;
  // The GEMM precision its kernels were prepared with (LoadOptions::gemm_precision).
  GemmPrecision gemm_precision() const;

  // set_input for each input, then execute(); returns views of the outputs.
  Result<std::vector<Tensor>> run(Span<const Tensor> inputs);
  Result<std::vector<Tensor>> run(std::initializer_list<Tensor> inputs) {
    return run(Span<const Tensor>(inputs.begin(), inputs.size()));
  }

  // The same, recording into `profile` (kiln/profile.h) how long each
  // instruction and each thread-pool chunk took and the shapes each saw.
  Status execute(Profile* profile);
  Result<std::vector<Tensor>> run(Span<const Tensor> inputs, Profile* profile);
  Result<std::vector<Tensor>> run(std::initializer_list<Tensor> inputs, Profile* profile) {
    return run(Span<const Tensor>(inputs.begin(), inputs.size()), profile);
  }

  // The turn (see Threads above): waits for it, takes it if free, gives it back.
  void lock();
  bool try_lock();
  void unlock();

  Method(Method&&) noexcept;
  Method& operator=(Method&&) noexcept;
  ~Method();

 private:
  friend class Program;
  explicit Method(std::unique_ptr<internal::MethodState> state);
  std::unique_ptr<internal::MethodState> state_;
};

}  // namespace kiln
