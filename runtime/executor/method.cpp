// The executor: builds a method's value table and memory once, then runs its
// instructions. Every index and byte range used here was checked by
// loader/verifier.cpp; this file trusts them and says which check it relies on.
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <limits>

#include "executor/method_state.h"
#include "kiln/log.h"

namespace kiln {
namespace internal {
namespace {

using schema::TensorStorage;
using schema::ValueKind;

// Planned memory: an anonymous mapping, zero-filled and committed by the OS page
// by page as it is first written. Under AddressSanitizer arenas come from the
// heap instead, so that its redzones catch a kernel writing past an arena.
void* allocate_arena(size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  return std::calloc(1, size);
#else
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
#endif
}

void free_arena(void* p, size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  (void)size;
  std::free(p);
#else
  ::munmap(p, size);
#endif
}

bool same_sizes(Span<const int64_t> a, Span<const int64_t> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// Python semantics for // and % (floor), as torch.export's symbolic ints use.
Status run_int_op(Step& step) {
  using K = schema::IntOpKind;
  auto overflow = [&]() { return Status(Error::KernelFailure, "integer overflow in a size computation"); };
  // A SizeOf's first operand is a tensor: only its second is an int.
  int64_t a = step.int_kind == K::SizeOf ? 0 : step.int_args[0]->i;
  int64_t b = step.int_args[1] ? step.int_args[1]->i : 0, r = 0;
  switch (step.int_kind) {
    case K::SizeOf: {
      const Tensor& t = *step.int_tensor;
      KILN_CHECK_OR_RETURN(b >= 0 && b < t.dim(), InvalidProgram, "size of dimension %lld of a %d-D tensor",
                           (long long)b, t.dim());
      r = t.sizes()[b];
      break;
    }
    case K::Add: if (__builtin_add_overflow(a, b, &r)) return overflow(); break;
    case K::Sub: if (__builtin_sub_overflow(a, b, &r)) return overflow(); break;
    case K::Mul: if (__builtin_mul_overflow(a, b, &r)) return overflow(); break;
    case K::FloorDiv:
    case K::Mod: {
      KILN_CHECK_OR_RETURN(b != 0, KernelFailure, "integer division by zero in a size computation");
      if (a == std::numeric_limits<int64_t>::min() && b == -1) return overflow();
      int64_t q = a / b, m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) {
        q -= 1;
        m += b;
      }
      r = step.int_kind == K::FloorDiv ? q : m;
      break;
    }
    case K::Min: r = a < b ? a : b; break;
    case K::Max: r = a < b ? b : a; break;
    case K::Neg:
      if (a == std::numeric_limits<int64_t>::min()) return overflow();
      r = -a;
      break;
    case K::CheckEqual:
      // verify_program: the third operand is a String.
      KILN_CHECK_OR_RETURN(a == b, InvalidInput, "%.*s (%lld vs %lld)", static_cast<int>(step.int_args[2]->str.size),
                           step.int_args[2]->str.data, (long long)a, (long long)b);
      r = a;
      break;
  }
  step.int_out->i = r;
  return Status::ok();
}

Status resolve_kernel(const std::string& op, const std::vector<const Value*>& args, const KernelEntry** out) {
  std::vector<ScalarType> dtypes;
  for (const Value* v : args) {
    if (v->is_tensor()) dtypes.push_back(v->tensor->dtype());
  }
  *out = find_kernel(op, dtypes);
  if (*out != nullptr) return Status::ok();
  std::string known;
  for (const auto& k : registered_kernels()) {
    if (k.op_name == op) known += (known.empty() ? "" : ", ") + std::string("(") + k.dtypes + ")";
  }
  return Status(Error::MissingKernel,
                "no kernel for " + op + " with dtypes (" + signature_string(dtypes) + ")" +
                    (known.empty() ? "; no kernel is registered for this operator"
                                   : "; registered dtypes: " + known));
}

}  // namespace

Result<std::unique_ptr<MethodState>> MethodState::create(std::shared_ptr<const ProgramData> program, size_t index) {
  auto state = std::make_unique<MethodState>();
  MethodState& s = *state;
  s.program = program;
  s.method = program->program->methods()->Get(static_cast<flatbuffers::uoffset_t>(index));
  s.spec = program->specs[index];
  const schema::Method& m = *s.method;
  const auto& values = *m.values();

  // Planned memory, once per loaded method (verify_program bounded the total).
  if (m.arena_sizes() != nullptr) {
    for (uint64_t size : *m.arena_sizes()) {
      Arena a;
      a.size = static_cast<size_t>(size);
      if (a.size > 0) {
        a.data = allocate_arena(a.size);
        if (a.data == nullptr) return Status(Error::OutOfMemory, format("cannot allocate a %zu-byte arena", a.size));
      }
      s.arenas.push_back(a);
    }
  }

  // Value table. Counts first so that the vectors never reallocate.
  size_t num_tensors = 0, num_list_items = 0, num_list_ints = 0;
  for (const schema::Value* v : values) {
    if (v->value_type() == ValueKind::Tensor) ++num_tensors;
    if (v->value_type() == ValueKind::TensorList && v->value_as_TensorList()->items()) {
      num_list_items += v->value_as_TensorList()->items()->size();
    }
    if (v->value_type() == ValueKind::IntValueList && v->value_as_IntValueList()->items()) {
      num_list_ints += v->value_as_IntValueList()->items()->size();
    }
  }
  s.tensors.resize(num_tensors);
  s.values.resize(values.size());
  s.list_items.reserve(num_list_items);
  s.list_ints.resize(num_list_ints);
  // By value index: the range of an IntValueList's refresh entries in int_refs,
  // and the last step that listed it (so that a step refreshes it once).
  std::vector<IntRange> list_refs(values.size());
  std::vector<uint32_t> list_last_step(values.size(), UINT32_MAX);
  size_t next_tensor = 0;
  for (flatbuffers::uoffset_t i = 0; i < values.size(); ++i) {
    const schema::Value* v = values.Get(i);
    Value& out = s.values[i];
    switch (v->value_type()) {
      case ValueKind::Tensor: {
        const schema::Tensor& t = *v->value_as_Tensor();
        Tensor& tensor = s.tensors[next_tensor++];
        Span<const int64_t> sizes;
        if (t.sizes()) sizes = {t.sizes()->data(), t.sizes()->size()};
        auto dtype = static_cast<ScalarType>(t.dtype());
        size_t nbytes = static_cast<size_t>(declared_nbytes(t));
        void* data = nullptr;
        if (t.storage() == TensorStorage::Constant) {
          // verify_program: the segment and [offset, offset + nbytes) are in range.
          const schema::Segment* seg = program->program->segments()->Get(t.segment());
          data = const_cast<uint8_t*>(program->segments_base() + seg->offset() + t.segment_offset());
          tensor.set_constant(true);
        } else if (t.storage() == TensorStorage::Planned || t.storage() == TensorStorage::State) {
          // verify_program: the arena exists and holds [offset, offset + nbytes).
          data = static_cast<uint8_t*>(s.arenas[t.arena()].data) + t.arena_offset();
        }
        if (t.storage() == TensorStorage::State) {
          // verify_program: the segment holds the initial [offset, offset + nbytes).
          const schema::Segment* seg = program->program->segments()->Get(t.segment());
          s.state.push_back({&tensor, program->segments_base() + seg->offset() + t.segment_offset(), Tensor()});
        }
        tensor.reset(data, sizes, dtype, nbytes);
        out.kind = kiln::ValueKind::Tensor;
        out.tensor = &tensor;
        break;
      }
      case ValueKind::Int: out.kind = kiln::ValueKind::Int; out.i = v->value_as_Int()->value(); break;
      case ValueKind::Double: out.kind = kiln::ValueKind::Double; out.d = v->value_as_Double()->value(); break;
      case ValueKind::Bool: out.kind = kiln::ValueKind::Bool; out.b = v->value_as_Bool()->value(); break;
      case ValueKind::IntList: {
        const auto* items = v->value_as_IntList()->items();
        out.kind = kiln::ValueKind::IntList;
        out.ints = {items ? items->data() : nullptr, items ? items->size() : 0};
        break;
      }
      case ValueKind::DoubleList: {
        const auto* items = v->value_as_DoubleList()->items();
        out.kind = kiln::ValueKind::DoubleList;
        out.doubles = {items ? items->data() : nullptr, items ? items->size() : 0};
        break;
      }
      case ValueKind::BoolList: {
        const auto* items = v->value_as_BoolList()->items();
        out.kind = kiln::ValueKind::BoolList;
        out.bools = {items ? reinterpret_cast<const bool*>(items->data()) : nullptr, items ? items->size() : 0};
        break;
      }
      case ValueKind::String: {
        const auto* str = v->value_as_String()->value();
        out.kind = kiln::ValueKind::String;
        out.str = {str->c_str(), str->size()};
        break;
      }
      case ValueKind::TensorList:
        break;  // filled below, once every tensor has its address
      case ValueKind::IntValueList:
        break;  // filled below, once every int has its value
      default:
        out.kind = kiln::ValueKind::None;
        break;
    }
  }
  for (StateInit& st : s.state) st.declared = *st.tensor;
  // Each IntValueList: its storage in list_ints, and one IntRef per item (in
  // int_refs, ranged by list_refs) that refreshes it from its Int value.
  size_t next_int = 0;
  s.int_refs.reserve(num_list_ints);
  for (flatbuffers::uoffset_t i = 0; i < values.size(); ++i) {
    const schema::Value* v = values.Get(i);
    if (v->value_type() != ValueKind::IntValueList) continue;
    const auto* items = v->value_as_IntValueList()->items();
    size_t n = items ? items->size() : 0;
    list_refs[i] = {static_cast<uint32_t>(s.int_refs.size()), static_cast<uint32_t>(n)};
    // verify_program: each item is an Int value. Kernels see a plain IntList.
    for (size_t k = 0; k < n; ++k) {
      const Value* item = &s.values[items->Get(static_cast<flatbuffers::uoffset_t>(k))];
      s.list_ints[next_int + k] = item->i;
      s.int_refs.push_back({s.list_ints.data() + next_int + k, item});
    }
    s.values[i].kind = kiln::ValueKind::IntList;
    s.values[i].ints = {s.list_ints.data() + next_int, n};
    next_int += n;
  }
  for (flatbuffers::uoffset_t i = 0; i < values.size(); ++i) {
    const schema::Value* v = values.Get(i);
    if (v->value_type() != ValueKind::TensorList) continue;
    const auto* items = v->value_as_TensorList()->items();
    size_t begin = s.list_items.size();
    if (items) {
      for (uint32_t item : *items) {
        // verify_program: each item is a Tensor or None value in range.
        s.list_items.push_back(s.values[item].is_tensor() ? s.values[item].tensor : nullptr);
      }
    }
    s.values[i].kind = kiln::ValueKind::TensorList;
    s.values[i].tensors = {s.list_items.data() + begin, s.list_items.size() - begin};
  }

  if (m.inputs()) {
    for (uint32_t index : *m.inputs()) s.inputs.push_back(s.values[index].tensor);
  }
  s.input_bound.assign(s.inputs.size(), false);
  if (m.outputs()) {
    for (uint32_t index : *m.outputs()) s.outputs.push_back(s.values[index].tensor);
  }

  // Instructions: resolve every kernel and backend now, so that a missing one
  // fails the load and never a run.
  if (m.instructions()) {
    size_t total_in = 0, total_out = 0;
    for (const schema::Instruction* ins : *m.instructions()) {
      const flatbuffers::Vector<uint32_t>* in = nullptr;
      const flatbuffers::Vector<uint32_t>* out = nullptr;
      if (ins->instruction_type() == schema::InstructionKind::KernelCall) {
        in = ins->instruction_as_KernelCall()->inputs();
        out = ins->instruction_as_KernelCall()->outputs();
      } else if (ins->instruction_type() == schema::InstructionKind::BackendCall) {
        in = ins->instruction_as_BackendCall()->inputs();
        out = ins->instruction_as_BackendCall()->outputs();
      }
      total_in += in ? in->size() : 0;
      total_out += out ? out->size() : 0;
    }
    s.step_inputs.reserve(total_in);
    s.step_outputs.reserve(total_out);
    s.steps.reserve(m.instructions()->size());
    for (flatbuffers::uoffset_t i = 0; i < m.instructions()->size(); ++i) {
      const schema::Instruction* ins = m.instructions()->Get(i);
      Step step{};
      auto bind_args = [&](const flatbuffers::Vector<uint32_t>* in, const flatbuffers::Vector<uint32_t>* out) {
        step.inputs_begin = static_cast<uint32_t>(s.step_inputs.size());
        step.lists_begin = static_cast<uint32_t>(s.step_lists.size());
        if (in) {
          for (uint32_t v : *in) {
            s.step_inputs.push_back(&s.values[v]);
            // Each list once per step, however often the step reads it.
            if (values.Get(v)->value_type() != ValueKind::IntValueList || list_last_step[v] == i) continue;
            list_last_step[v] = i;
            s.step_lists.push_back(list_refs[v]);
          }
        }
        step.num_lists = static_cast<uint32_t>(s.step_lists.size()) - step.lists_begin;
        step.num_inputs = static_cast<uint32_t>(s.step_inputs.size()) - step.inputs_begin;
        step.outputs_begin = static_cast<uint32_t>(s.step_outputs.size());
        // verify_program: outputs are planned tensors.
        if (out) for (uint32_t v : *out) s.step_outputs.push_back(s.values[v].tensor);
        step.num_outputs = static_cast<uint32_t>(s.step_outputs.size()) - step.outputs_begin;
      };
      std::string where = format("instruction %u", i);
      switch (ins->instruction_type()) {
        case schema::InstructionKind::KernelCall: {
          const auto* call = ins->instruction_as_KernelCall();
          const schema::Operator* op = m.operators()->Get(call->op());
          step.kind = Step::Kind::Kernel;
          step.name = op->name()->str();
          if (op->overload() && op->overload()->size() > 0) step.name += "." + op->overload()->str();
          bind_args(call->inputs(), call->outputs());
          std::vector<const Value*> args(s.step_inputs.begin() + step.inputs_begin, s.step_inputs.end());
          Status st = resolve_kernel(step.name, args, &step.kernel);
          if (!st.is_ok()) return std::move(st).with_context(where);
          break;
        }
        case schema::InstructionKind::BackendCall: {
          const auto* call = ins->instruction_as_BackendCall();
          const schema::Delegate* d = m.delegates()->Get(call->delegate());
          step.kind = Step::Kind::Backend;
          step.name = "backend " + d->backend()->str();
          bind_args(call->inputs(), call->outputs());
          step.backend = find_backend(d->backend()->str());
          if (step.backend == nullptr) {
            return Status(Error::MissingBackend,
                          where + ": no backend named '" + d->backend()->str() + "' is registered");
          }
          break;
        }
        case schema::InstructionKind::Move: {
          const auto* mv = ins->instruction_as_Move();
          step.kind = Step::Kind::Move;
          step.name = "move";
          step.move_src = s.values[mv->src()].tensor;
          step.move_dst = s.values[mv->dst()].tensor;
          step.move_keeps_shape = values.Get(mv->dst())->value_as_Tensor()->storage() == TensorStorage::State;
          break;
        }
        case schema::InstructionKind::IntOp: {
          // verify_program: the arity fits the kind; inputs are ints (a SizeOf's
          // first is a tensor) and the output is an int.
          const auto* op = ins->instruction_as_IntOp();
          step.kind = Step::Kind::IntOp;
          step.name = std::string("int op ") + schema::EnumNameIntOpKind(op->kind());
          step.int_kind = op->kind();
          for (flatbuffers::uoffset_t k = 0; k < op->inputs()->size(); ++k) step.int_args[k] = &s.values[op->inputs()->Get(k)];
          if (op->kind() == schema::IntOpKind::SizeOf) step.int_tensor = step.int_args[0]->tensor;
          step.int_out = &s.values[op->output()];
          break;
        }
        default:
          return Status(Error::Internal, where + " has a kind the verifier should have rejected");
      }
      s.steps.push_back(std::move(step));
    }
  }

  // Prepare kernels and initialize delegates (after all steps exist, so that a
  // failure leaves every state for the destructor to release).
  for (size_t i = 0; i < s.steps.size(); ++i) {
    Step& step = s.steps[i];
    Span<const Value* const> in(s.step_inputs.data() + step.inputs_begin, step.num_inputs);
    Span<Tensor* const> out(s.step_outputs.data() + step.outputs_begin, step.num_outputs);
    step.ctx.op_name = step.name.c_str();
    std::string where = format("instruction %zu (%s)", i, step.name.c_str());
    if (step.kind == Step::Kind::Kernel && step.kernel->prepare != nullptr) {
      void* kstate = nullptr;
      Status st = step.kernel->prepare(step.ctx, in, out, &kstate);
      step.ctx.state = kstate;
      if (!st.is_ok()) return std::move(st).with_context(where);
    } else if (step.kind == Step::Kind::Backend) {
      const schema::Delegate* d = m.delegates()->Get(
          m.instructions()->Get(static_cast<flatbuffers::uoffset_t>(i))->instruction_as_BackendCall()->delegate());
      const schema::Segment* seg = program->program->segments()->Get(d->segment());
      Span<const uint8_t> blob(program->segments_base() + seg->offset(), seg->size());
      std::vector<CompileSpecView> specs;
      if (d->compile_specs()) {
        for (const auto* cs : *d->compile_specs()) {
          specs.push_back({cs->key()->c_str(), cs->value() ? Span<const uint8_t>(cs->value()->data(), cs->value()->size())
                                                           : Span<const uint8_t>()});
        }
      }
      Status st = step.backend->def.init(blob, specs, &step.backend_handle);
      if (!st.is_ok()) return std::move(st).with_context(where);
    }
  }
  s.reset_state();
  return state;
}

void MethodState::reset_state() {
  for (StateInit& st : state) {
    *st.tensor = st.declared;  // a kernel may have resized it within its capacity
    if (st.tensor->capacity() > 0) std::memcpy(st.tensor->data(), st.initial, st.tensor->capacity());
  }
}

MethodState::~MethodState() {
  for (Step& step : steps) {
    if (step.kind == Step::Kind::Kernel && step.kernel && step.kernel->release && step.ctx.state) {
      step.kernel->release(step.ctx.state);
    } else if (step.kind == Step::Kind::Backend && step.backend_handle && step.backend->def.destroy) {
      step.backend->def.destroy(step.backend_handle);
    }
  }
  for (Arena& a : arenas) {
    if (a.data) free_arena(a.data, a.size);
  }
}

Status MethodState::set_input(size_t index, const Tensor& input) {
  KILN_CHECK_OR_RETURN(index < inputs.size(), InvalidInput, "method '%s' has %zu inputs, got input index %zu",
                       spec.name.c_str(), inputs.size(), index);
  const TensorSpec& want = spec.inputs[index];
  std::string expected = std::string(scalar_type_name(want.dtype)) + "[";
  for (size_t d = 0; d < want.sizes.size(); ++d) {
    if (d > 0) expected += ", ";
    if (want.min_sizes[d] != want.sizes[d]) expected += std::to_string(want.min_sizes[d]) + "..";
    expected += std::to_string(want.sizes[d]);
  }
  expected += "]";
  auto mismatch = [&](const char* what) {
    return Status(Error::InvalidInput,
                  format("method '%s' input %zu ('%s'): %s: expected %s, got %s", spec.name.c_str(), index,
                         want.name.c_str(), what, expected.c_str(), describe(input).c_str()));
  };
  if (input.dtype() != want.dtype) return mismatch("wrong dtype");
  if (static_cast<size_t>(input.dim()) != want.sizes.size()) return mismatch("wrong number of dimensions");
  for (size_t d = 0; d < want.sizes.size(); ++d) {
    int64_t got = input.sizes()[d];
    if (got < want.min_sizes[d] || got > want.sizes[d]) return mismatch("wrong shape");
  }
  KILN_CHECK_OR_RETURN(input.data() != nullptr || input.numel() == 0, InvalidInput,
                       "method '%s' input %zu ('%s') has no data", spec.name.c_str(), index, want.name.c_str());
  KILN_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(input.data()) % element_size(input.dtype()) == 0, InvalidInput,
                       "method '%s' input %zu ('%s') is not aligned to its %zu-byte element size",
                       spec.name.c_str(), index, want.name.c_str(), element_size(input.dtype()));
  inputs[index]->reset(input.data(), input.sizes(), input.dtype(), input.nbytes());
  input_bound[index] = true;
  return Status::ok();
}

Status MethodState::execute() {
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK_OR_RETURN(input_bound[i], InvalidInput, "method '%s' input %zu ('%s') was not set",
                         spec.name.c_str(), i, spec.inputs[i].name.c_str());
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    Step& step = steps[i];
    Span<const Value* const> in(step_inputs.data() + step.inputs_begin, step.num_inputs);
    Span<Tensor* const> out(step_outputs.data() + step.outputs_begin, step.num_outputs);
    for (uint32_t l = step.lists_begin; l < step.lists_begin + step.num_lists; ++l) {
      const IntRange& list = step_lists[l];
      for (uint32_t r = list.begin; r < list.begin + list.count; ++r) *int_refs[r].dst = int_refs[r].src->i;
    }
    Status st;
    switch (step.kind) {
      case Step::Kind::IntOp:
        st = run_int_op(step);
        break;
      case Step::Kind::Kernel:
        st = step.kernel->run(step.ctx, in, out);
        break;
      case Step::Kind::Backend:
        st = step.backend->def.execute(step.backend_handle, in, out);
        break;
      case Step::Kind::Move:
        // verify_program: same dtype and dst capacity >= src's declared bytes; a
        // state destination has src's declared sizes, which src must still have.
        if (step.move_keeps_shape && !same_sizes(step.move_src->sizes(), step.move_dst->sizes())) {
          st = Status(Error::KernelFailure, "a new state value " + describe(*step.move_src) +
                                                " does not have the state's shape " + describe(*step.move_dst));
          break;
        }
        st = step.move_dst->resize(step.move_src->sizes());
        if (st.is_ok()) std::memmove(step.move_dst->data(), step.move_src->data(), step.move_src->nbytes());
        break;
    }
    if (!st.is_ok()) {
      return std::move(st).with_context(format("method '%s', instruction %zu (%s)", spec.name.c_str(), i,
                                               step.name.c_str()));
    }
  }
  return Status::ok();
}

}  // namespace internal

Method::Method(std::unique_ptr<internal::MethodState> state) : state_(std::move(state)) {}
Method::Method(Method&&) noexcept = default;
Method& Method::operator=(Method&&) noexcept = default;
Method::~Method() = default;

const MethodSpec& Method::spec() const { return state_->spec; }
size_t Method::num_inputs() const { return state_->inputs.size(); }
size_t Method::num_outputs() const { return state_->outputs.size(); }
Status Method::set_input(size_t index, const Tensor& input) { return state_->set_input(index, input); }
Status Method::execute() { return state_->execute(); }
const Tensor& Method::output(size_t index) const { return *state_->outputs[index]; }
void Method::reset_state() { state_->reset_state(); }

Result<std::vector<Tensor>> Method::run(Span<const Tensor> inputs) {
  KILN_CHECK_OR_RETURN(inputs.size() == num_inputs(), InvalidInput, "method '%s' takes %zu inputs, got %zu",
                       state_->spec.name.c_str(), num_inputs(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) KILN_RETURN_IF_ERROR(set_input(i, inputs[i]));
  KILN_RETURN_IF_ERROR(execute());
  std::vector<Tensor> outputs;
  outputs.reserve(num_outputs());
  for (size_t i = 0; i < num_outputs(); ++i) outputs.push_back(output(i));
  return outputs;
}

}  // namespace kiln
