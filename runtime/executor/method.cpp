// The executor: builds a method's value table and memory once, then runs its
// instructions. Every index and byte range used here was checked by
// loader/verifier.cpp; this file trusts them and says which check it relies on.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <utility>

#include "core/pages.h"
#include "core/thread_pool_internal.h"
#include "executor/method_state.h"
#include "kiln/log.h"

namespace kiln {
namespace internal {
namespace {

using schema::TensorStorage;
using schema::ValueKind;

bool same_sizes(Span<const int64_t> a, Span<const int64_t> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

bool all_zero(const uint8_t* p, size_t n) {
  static const uint8_t zeros[4096] = {};
  for (size_t done = 0; done < n; done += sizeof(zeros)) {
    size_t chunk = n - done < sizeof(zeros) ? n - done : sizeof(zeros);
    if (std::memcmp(p + done, zeros, chunk) != 0) return false;
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
    case K::Add:
      if (__builtin_add_overflow(a, b, &r)) return overflow();
      break;
    case K::Sub:
      if (__builtin_sub_overflow(a, b, &r)) return overflow();
      break;
    case K::Mul:
      if (__builtin_mul_overflow(a, b, &r)) return overflow();
      break;
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

// Every kernel that may serve `op` with these arguments, in the order they are
// tried: highest tier first, or only the lowest tier when the reference
// kernels are forced.
Status find_candidates(const std::string& op, const std::vector<const Value*>& args, bool reference_only,
                       std::vector<const KernelEntry*>* out) {
  std::vector<ScalarType> dtypes;
  for (const Value* v : args) {
    if (v->is_tensor()) dtypes.push_back(v->tensor->dtype());
  }
  *out = find_kernels(op, dtypes);
  if (!out->empty()) {
    if (reference_only) {
      const int32_t lowest = out->back()->tier;
      out->erase(std::remove_if(out->begin(), out->end(), [&](const KernelEntry* k) { return k->tier != lowest; }),
                 out->end());
    }
    return Status::ok();
  }
  std::string known;
  for (const auto& k : registered_kernels()) {
    if (k.op_name == op) known += (known.empty() ? "" : ", ") + std::string("(") + k.dtypes + ")";
  }
  // The project's extension libraries name their operators kiln_<name>::...: say
  // which library provides them and how to link it (docs/architecture.md).
  std::string provider;
  const size_t ns = op.find("::");
  if (known.empty() && op.compare(0, 5, "kiln_") == 0 && ns != std::string::npos && ns > 5) {
    const std::string name = op.substr(5, ns - 5);
    provider = "; the extension library libkiln_" + name + ".so.0 provides it: link kiln::" + name + " (libkiln_" +
               name + ".so.0; pkg-config kiln-" + name + "), or load it with kiln::load_library";
  }
  return Status(Error::MissingKernel, "no kernel for " + op + " with dtypes (" + signature_string(dtypes) + ")" +
                                          (known.empty() ? "; no kernel is registered for this operator" + provider
                                                         : "; registered dtypes: " + known));
}

size_t round_up_64(size_t n) { return (n + 63) / 64 * 64; }

// a + b and a * b, saturating (for byte totals compared against a limit).
uint64_t sat_add(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }
uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

}  // namespace

Result<std::unique_ptr<MethodState>> MethodState::create(std::shared_ptr<const ProgramData> program, size_t index) {
  auto state = std::make_unique<MethodState>();
  MethodState& s = *state;
  s.program = std::move(program);
  s.method = s.program->program->methods()->Get(static_cast<flatbuffers::uoffset_t>(index));
  s.spec = s.program->specs[index];
  KILN_RETURN_IF_ERROR(s.allocate_arenas());
  KILN_RETURN_IF_ERROR(s.build_values());
  // Resolve every kernel and backend now, so that a missing one fails the load
  // and never a run; prepare once all steps exist, so that a failure leaves
  // every state for the destructor to release.
  KILN_RETURN_IF_ERROR(s.bind_steps());
  KILN_RETURN_IF_ERROR(s.prepare_steps());
  s.reset_state();
  return state;
}

// Planned memory, once per loaded method (verify_program bounded the total).
Status MethodState::allocate_arenas() {
  if (method->arena_sizes() == nullptr) return Status::ok();
  for (uint64_t size : *method->arena_sizes()) {
    Arena a;
    a.size = static_cast<size_t>(size);
    if (a.size > 0) {
      a.data = allocate_pages(a.size);
      if (a.data == nullptr) return Status(Error::OutOfMemory, format("cannot allocate a %zu-byte arena", a.size));
    }
    arenas.push_back(a);
  }
  return Status::ok();
}

// The value table. Counts first so that the vectors never reallocate.
Status MethodState::build_values() {
  const auto& vals = *method->values();
  size_t num_tensors = 0, num_list_items = 0, num_list_ints = 0;
  for (const schema::Value* v : vals) {
    if (v->value_type() == ValueKind::Tensor) ++num_tensors;
    if (v->value_type() == ValueKind::TensorList && v->value_as_TensorList()->items()) {
      num_list_items += v->value_as_TensorList()->items()->size();
    }
    if (v->value_type() == ValueKind::IntValueList && v->value_as_IntValueList()->items()) {
      num_list_ints += v->value_as_IntValueList()->items()->size();
    }
  }
  tensors.resize(num_tensors);
  values.resize(vals.size());
  list_items.reserve(num_list_items);
  list_ints.resize(num_list_ints);
  list_refs.assign(vals.size(), IntRange{});
  size_t next_tensor = 0;
  for (flatbuffers::uoffset_t i = 0; i < vals.size(); ++i) {
    const schema::Value* v = vals.Get(i);
    Value& out = values[i];
    switch (v->value_type()) {
      case ValueKind::Tensor: {
        const schema::Tensor& t = *v->value_as_Tensor();
        Tensor& tensor = tensors[next_tensor++];
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
          data = static_cast<uint8_t*>(arenas[t.arena()].data) + t.arena_offset();
        }
        if (t.storage() == TensorStorage::State) {
          // verify_program: the segment holds the initial [offset, offset + nbytes).
          const schema::Segment* seg = program->program->segments()->Get(t.segment());
          state.push_back({&tensor, program->segments_base() + seg->offset() + t.segment_offset(), Tensor(), false});
        }
        tensor.reset(data, sizes, dtype, nbytes);
        out.kind = kiln::ValueKind::Tensor;
        out.tensor = &tensor;
        break;
      }
      case ValueKind::Int:
        out.kind = kiln::ValueKind::Int;
        out.i = v->value_as_Int()->value();
        break;
      case ValueKind::Double:
        out.kind = kiln::ValueKind::Double;
        out.d = v->value_as_Double()->value();
        break;
      case ValueKind::Bool:
        out.kind = kiln::ValueKind::Bool;
        out.b = v->value_as_Bool()->value();
        break;
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
      case ValueKind::TensorList: break;    // filled below, once every tensor has its address
      case ValueKind::IntValueList: break;  // filled below, once every int has its value
      default: out.kind = kiln::ValueKind::None; break;
    }
  }
  for (size_t i = 0; i < state.size(); ++i) {
    StateInit& st = state[i];
    st.declared = *st.tensor;
    // The exporter deduplicates initial values, so the caches of every layer usually share one
    // segment: it is scanned once.
    const StateInit* same = nullptr;
    for (size_t j = 0; j < i && same == nullptr; ++j) {
      if (state[j].initial == st.initial && state[j].declared.capacity() >= st.declared.capacity()) same = &state[j];
    }
    st.zero_initial = same != nullptr ? same->zero_initial : all_zero(st.initial, st.declared.capacity());
  }
  // Each IntValueList: its storage in list_ints, and one IntRef per item (in
  // int_refs, ranged by list_refs) that refreshes it from its Int value.
  size_t next_int = 0;
  int_refs.reserve(num_list_ints);
  for (flatbuffers::uoffset_t i = 0; i < vals.size(); ++i) {
    const schema::Value* v = vals.Get(i);
    if (v->value_type() != ValueKind::IntValueList) continue;
    const auto* items = v->value_as_IntValueList()->items();
    size_t n = items ? items->size() : 0;
    list_refs[i] = {static_cast<uint32_t>(int_refs.size()), static_cast<uint32_t>(n)};
    // verify_program: each item is an Int value. Kernels see a plain IntList.
    for (size_t k = 0; k < n; ++k) {
      const Value* item = &values[items->Get(static_cast<flatbuffers::uoffset_t>(k))];
      list_ints[next_int + k] = item->i;
      int_refs.push_back({list_ints.data() + next_int + k, item});
    }
    values[i].kind = kiln::ValueKind::IntList;
    values[i].ints = {list_ints.data() + next_int, n};
    next_int += n;
  }
  for (flatbuffers::uoffset_t i = 0; i < vals.size(); ++i) {
    const schema::Value* v = vals.Get(i);
    if (v->value_type() != ValueKind::TensorList) continue;
    const auto* items = v->value_as_TensorList()->items();
    size_t begin = list_items.size();
    if (items) {
      for (uint32_t item : *items) {
        // verify_program: each item is a Tensor or None value in range.
        list_items.push_back(values[item].is_tensor() ? values[item].tensor : nullptr);
      }
    }
    values[i].kind = kiln::ValueKind::TensorList;
    values[i].tensors = {list_items.data() + begin, list_items.size() - begin};
  }

  if (method->inputs()) {
    for (uint32_t index : *method->inputs()) inputs.push_back(values[index].tensor);
  }
  input_bound.assign(inputs.size(), false);
  if (method->outputs()) {
    for (uint32_t index : *method->outputs()) outputs.push_back(values[index].tensor);
  }
  return Status::ok();
}

// One Step per instruction, with its arguments bound and its kernel
// candidates or backend found.
Status MethodState::bind_steps() {
  const schema::Method& m = *method;
  if (!m.instructions()) return Status::ok();
  const auto& vals = *m.values();
  // By value index: the last step that listed an IntValueList (a step refreshes it once).
  std::vector<uint32_t> list_last_step(vals.size(), UINT32_MAX);
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
  step_inputs.reserve(total_in);
  step_outputs.reserve(total_out);
  steps.reserve(m.instructions()->size());
  for (flatbuffers::uoffset_t i = 0; i < m.instructions()->size(); ++i) {
    const schema::Instruction* ins = m.instructions()->Get(i);
    Step step{};
    auto bind_args = [&](const flatbuffers::Vector<uint32_t>* in, const flatbuffers::Vector<uint32_t>* out) {
      step.inputs_begin = static_cast<uint32_t>(step_inputs.size());
      step.lists_begin = static_cast<uint32_t>(step_lists.size());
      if (in) {
        for (uint32_t v : *in) {
          step_inputs.push_back(&values[v]);
          // Each list once per step, however often the step reads it.
          if (vals.Get(v)->value_type() != ValueKind::IntValueList || list_last_step[v] == i) continue;
          list_last_step[v] = i;
          step_lists.push_back(list_refs[v]);
        }
      }
      step.num_lists = static_cast<uint32_t>(step_lists.size()) - step.lists_begin;
      step.num_inputs = static_cast<uint32_t>(step_inputs.size()) - step.inputs_begin;
      step.outputs_begin = static_cast<uint32_t>(step_outputs.size());
      // verify_program: outputs are planned tensors.
      if (out)
        for (uint32_t v : *out) step_outputs.push_back(values[v].tensor);
      step.num_outputs = static_cast<uint32_t>(step_outputs.size()) - step.outputs_begin;
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
        std::vector<const Value*> args(step_inputs.begin() + step.inputs_begin, step_inputs.end());
        Status st = find_candidates(step.name, args, program->reference_kernels, &step.candidates);
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
        step.move_src = values[mv->src()].tensor;
        step.move_dst = values[mv->dst()].tensor;
        step.move_keeps_shape = vals.Get(mv->dst())->value_as_Tensor()->storage() == TensorStorage::State;
        break;
      }
      case schema::InstructionKind::IntOp: {
        // verify_program: the arity fits the kind; inputs are ints (a SizeOf's
        // first is a tensor) and the output is an int.
        const auto* op = ins->instruction_as_IntOp();
        step.kind = Step::Kind::IntOp;
        step.name = std::string("int op ") + schema::EnumNameIntOpKind(op->kind());
        step.int_kind = op->kind();
        for (flatbuffers::uoffset_t k = 0; k < op->inputs()->size(); ++k)
          step.int_args[k] = &values[op->inputs()->Get(k)];
        if (op->kind() == schema::IntOpKind::SizeOf) step.int_tensor = step.int_args[0]->tensor;
        step.int_out = &values[op->output()];
        break;
      }
      default: return Status(Error::Internal, where + " has a kind the verifier should have rejected");
    }
    steps.push_back(std::move(step));
  }
  return Status::ok();
}

// Chooses each step's kernel (the first candidate whose prepare accepts it),
// initializes delegates, and plans the kernels' scratch.
Status MethodState::prepare_steps() {
  const schema::Method& m = *method;
  uint64_t arena_bytes = 0;
  for (const Arena& a : arenas) arena_bytes = sat_add(arena_bytes, a.size);
  KernelServices services;
  services.cache = program->packed.get();
  services.memory_limit = program->options.max_memory_bytes;
  services.file = program->bytes.get();
  infos.resize(steps.size());
  size_t call_bytes = 0, worker_bytes = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    Step& step = steps[i];
    InstructionInfo& info = infos[i];
    Span<const Value* const> in(step_inputs.data() + step.inputs_begin, step.num_inputs);
    Span<Tensor* const> out(step_outputs.data() + step.outputs_begin, step.num_outputs);
    step.ctx.op_name = step.name.c_str();
    std::string where = format("instruction %zu (%s)", i, step.name.c_str());
    switch (step.kind) {
      case Step::Kind::Kernel: {
        std::string declined;
        for (const KernelEntry* k : step.candidates) {
          step.ctx.isa = program->isa;
          step.ctx.gemm_precision = program->gemm_precision;
          step.ctx.scratch_bytes = step.ctx.worker_scratch_bytes = 0;
          step.ctx.services = &services;
          services.method_bytes =
              sat_add(arena_bytes, sat_add(call_bytes, sat_mul(worker_bytes, static_cast<uint64_t>(num_threads()))));
          services.packed_bytes = 0;
          void* kstate = nullptr;
          Status st = k->prepare != nullptr ? k->prepare(step.ctx, in, out, &kstate) : Status::ok();
          step.ctx.services = nullptr;
          info.packed_bytes += services.packed_bytes;
          if (st.code() == Error::NotSupported && k != step.candidates.back()) {
            // Declined: the next (lower) tier is tried.
            declined += format("%s%s (tier %d): %s", declined.empty() ? "" : "; ", k->library.c_str(), k->tier,
                               st.message().c_str());
            continue;
          }
          if (!st.is_ok()) {
            if (!declined.empty()) st = std::move(st).with_context("after higher tiers declined (" + declined + ")");
            return std::move(st).with_context(where);
          }
          step.kernel = k;
          step.ctx.state = kstate;
          break;
        }
        step.candidates.clear();
        step.candidates.shrink_to_fit();
        call_bytes = std::max(call_bytes, round_up_64(step.ctx.scratch_bytes));
        worker_bytes = std::max(worker_bytes, round_up_64(step.ctx.worker_scratch_bytes));
        info.kind = "kernel";
        info.op = step.name;
        info.library = step.kernel->library;
        info.tier = step.kernel->tier;
        info.scratch_bytes = sat_add(step.ctx.scratch_bytes,
                                     sat_mul(step.ctx.worker_scratch_bytes, static_cast<uint64_t>(num_threads())));
        break;
      }
      case Step::Kind::Backend: {
        const schema::Delegate* d = m.delegates()->Get(
            m.instructions()->Get(static_cast<flatbuffers::uoffset_t>(i))->instruction_as_BackendCall()->delegate());
        const schema::Segment* seg = program->program->segments()->Get(d->segment());
        Span<const uint8_t> blob(program->segments_base() + seg->offset(), seg->size());
        std::vector<CompileSpecView> specs;
        if (d->compile_specs()) {
          for (const auto* cs : *d->compile_specs()) {
            specs.push_back({cs->key()->c_str(), cs->value()
                                                     ? Span<const uint8_t>(cs->value()->data(), cs->value()->size())
                                                     : Span<const uint8_t>()});
          }
        }
        Status st = step.backend->def.init(blob, specs, &step.backend_handle);
        if (!st.is_ok()) return std::move(st).with_context(where);
        info.kind = "backend";
        info.op = d->backend()->str();
        info.library = step.backend->library;
        break;
      }
      case Step::Kind::Move:
        info.kind = "move";
        info.op = "move";
        break;
      case Step::Kind::IntOp:
        info.kind = "int_op";
        info.op = step.name.substr(7);
        break;
    }
  }
  call_scratch_bytes = call_bytes;
  worker_scratch_stride = worker_bytes;
  return plan_scratch(num_threads());
}

Status MethodState::plan_scratch(int workers) {
  if (scratch.data != nullptr) free_pages(scratch.data, scratch.size);
  scratch = Arena{};
  scratch_workers = workers;
  uint64_t total = call_scratch_bytes;
  total = sat_add(total, sat_mul(worker_scratch_stride, static_cast<uint64_t>(workers)));
  uint64_t arena_bytes = 0;
  for (const Arena& a : arenas) arena_bytes = sat_add(arena_bytes, a.size);
  const uint64_t limit = program->options.max_memory_bytes;
  KILN_CHECK_OR_RETURN(sat_add(arena_bytes, total) <= limit, OutOfMemory,
                       "method '%s' needs %llu bytes of arenas and %llu bytes of kernel scratch for %d threads, more "
                       "than the limit of %llu bytes (LoadOptions::max_memory_bytes)",
                       spec.name.c_str(), (unsigned long long)arena_bytes, (unsigned long long)total, workers,
                       (unsigned long long)limit);
  if (total > 0) {
    scratch.size = static_cast<size_t>(total);
    scratch.data = allocate_pages(scratch.size);
    KILN_CHECK_OR_RETURN(scratch.data != nullptr, OutOfMemory, "cannot allocate %zu bytes of kernel scratch",
                         scratch.size);
  }
  uint8_t* base = static_cast<uint8_t*>(scratch.data);
  for (Step& step : steps) {
    if (step.kind != Step::Kind::Kernel) continue;
    step.ctx.scratch = step.ctx.scratch_bytes > 0 ? base : nullptr;
    step.ctx.worker_scratch_base = step.ctx.worker_scratch_bytes > 0 ? base + call_scratch_bytes : nullptr;
    step.ctx.worker_scratch_stride = step.ctx.worker_scratch_bytes > 0 ? worker_scratch_stride : 0;
  }
  return Status::ok();
}

void MethodState::reset_state() {
  for (StateInit& st : state) {
    *st.tensor = st.declared;  // a kernel may have resized it within its capacity
    if (st.tensor->capacity() == 0) continue;
    if (st.zero_initial) {
      zero_pages(st.tensor->data(), st.tensor->capacity());  // the state lives in an arena: allocate_pages
    } else {
      std::memcpy(st.tensor->data(), st.initial, st.tensor->capacity());
    }
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
    if (a.data) free_pages(a.data, a.size);
  }
  if (scratch.data) free_pages(scratch.data, scratch.size);
}

Status MethodState::set_input(size_t index, const Tensor& input) {
  KILN_CHECK_OR_RETURN(index < inputs.size(), InvalidInput, "method '%s' has %zu inputs, got input index %zu",
                       spec.name.c_str(), inputs.size(), index);
  const TensorSpec& want = spec.inputs[index];
  // The message is built only on a mismatch: binding is on every call's path.
  auto mismatch = [&](const char* what, const char* hint = "") {
    std::string expected = std::string(scalar_type_name(want.dtype)) + "[";
    for (size_t d = 0; d < want.sizes.size(); ++d) {
      if (d > 0) expected += ", ";
      if (want.min_sizes[d] != want.sizes[d]) expected += std::to_string(want.min_sizes[d]) + "..";
      expected += std::to_string(want.sizes[d]);
    }
    expected += "]";
    return Status(Error::InvalidInput,
                  format("method '%s' input %zu ('%s'): %s: expected %s, got %s%s", spec.name.c_str(), index,
                         want.name.c_str(), what, expected.c_str(), describe(input).c_str(), hint));
  };
  // No silent conversion (a float64 array would lose precision, an int one would change meaning):
  // the caller converts, and the message says so.
  if (input.dtype() != want.dtype) {
    return mismatch("wrong dtype",
                    " (inputs are not converted: convert the data first, e.g. with numpy's "
                    "x.astype(...) or torch's x.to(...))");
  }
  if (static_cast<size_t>(input.dim()) != want.sizes.size()) return mismatch("wrong number of dimensions");
  for (size_t d = 0; d < want.sizes.size(); ++d) {
    int64_t got = input.sizes()[d];
    if (got < want.min_sizes[d] || got > want.sizes[d]) return mismatch("wrong shape");
  }
  KILN_CHECK_OR_RETURN(input.data() != nullptr || input.numel() == 0, InvalidInput,
                       "method '%s' input %zu ('%s') has no data", spec.name.c_str(), index, want.name.c_str());
  KILN_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(input.data()) % element_size(input.dtype()) == 0, InvalidInput,
                       "method '%s' input %zu ('%s') is not aligned to its %zu-byte element size", spec.name.c_str(),
                       index, want.name.c_str(), element_size(input.dtype()));
  inputs[index]->reset(input.data(), input.sizes(), input.dtype(), input.nbytes());
  input_bound[index] = true;
  return Status::ok();
}

namespace {

void add_shape(const Tensor& t, std::vector<ProfiledShape>* out) {
  out->push_back({t.dtype(), std::vector<int64_t>(t.sizes().begin(), t.sizes().end())});
}

void shapes_of(Span<const Value* const> values, std::vector<ProfiledShape>* out) {
  for (const Value* v : values) {
    if (v->is_tensor()) {
      add_shape(*v->tensor, out);
    } else if (v->kind == kiln::ValueKind::TensorList) {
      for (const Tensor* t : v->as_tensors()) {
        if (t != nullptr) add_shape(*t, out);
      }
    }
  }
}

// KILN_SIMULATE_THREADS for a profiled call (kiln/profile.h): 0 when unset or empty.
Result<int> simulated_threads() {
  const char* env = std::getenv("KILN_SIMULATE_THREADS");
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(env, &end, 10);
  KILN_CHECK_OR_RETURN(errno == 0 && *end == '\0' && n >= 1 && n <= kMaxThreads, InvalidArgument,
                       "KILN_SIMULATE_THREADS must be a thread count from 1 to %d, got '%s'", kMaxThreads, env);
  return static_cast<int>(n);
}

// Records one profiled call: the executing thread fills in the instruction
// spans; the pool reports the chunks of its parallel_for calls from whichever
// thread ran them (thread_pool_internal.h).
class CallRecorder final : public ChunkObserver {
 public:
  CallRecorder(Profile& profile, uint32_t call) : profile_(profile), call_(call), previous_(observe_chunks(this)) {}
  ~CallRecorder() { observe_chunks(previous_); }
  CallRecorder(const CallRecorder&) = delete;
  CallRecorder& operator=(const CallRecorder&) = delete;

  // The instruction whose chunks come next. Set between parallel_for calls,
  // which publish it to the workers when they post their job.
  void set_instruction(uint32_t index) { index_ = index; }

  uint32_t job() noexcept override { return jobs_++; }

  void chunk(const ChunkSpan& span) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      profile_.chunks.push_back(
          {call_, index_, span.thread, span.start_ns, span.end_ns, span.job, span.begin, span.end, span.n});
    } catch (...) {  // out of memory: the profile misses a chunk, the call goes on
    }
  }

 private:
  Profile& profile_;
  const uint32_t call_;
  uint32_t index_ = 0;
  uint32_t jobs_ = 0;  // parallel_for calls split so far; only the executing thread counts
  ChunkObserver* previous_;
  std::mutex mutex_;
};

}  // namespace

Status MethodState::execute(Profile* profile) {
  if (profile == nullptr) return execute_steps(nullptr);
  // Recording allocates; no exception may leave the runtime.
  try {
    return execute_steps(profile);
  } catch (const std::bad_alloc&) {
    return Status(Error::OutOfMemory, format("method '%s': out of memory while profiling", spec.name.c_str()));
  }
}

Status MethodState::execute_steps(Profile* profile) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK_OR_RETURN(input_bound[i], InvalidInput, "method '%s' input %zu ('%s') was not set", spec.name.c_str(), i,
                         spec.inputs[i].name.c_str());
  }
  if (profile != nullptr) {
    if (profile->calls.empty()) {
      profile->method = spec.name;
      profile->instructions = infos;
    }
    KILN_CHECK_OR_RETURN(profile->method == spec.name, InvalidArgument,
                         "this Profile holds calls of method '%s', not '%s' (clear() it first)",
                         profile->method.c_str(), spec.name.c_str());
  }
  // The pool keeps its size until this returns, so the per-worker scratch
  // stays large enough; it grows here once if the pool grew since load.
  PoolSession session;
  if (worker_scratch_stride > 0 && num_threads() > scratch_workers) KILN_RETURN_IF_ERROR(plan_scratch(num_threads()));
  std::unique_ptr<CallRecorder> recorder;
  std::optional<VirtualWorkers> virtual_workers;  // after the scratch: only worker 0's is used
  if (profile != nullptr) {
    Result<int> simulated = simulated_threads();
    if (!simulated.ok()) return simulated.status();
    if (*simulated > 0) virtual_workers.emplace(*simulated);
    recorder = std::make_unique<CallRecorder>(*profile, static_cast<uint32_t>(profile->calls.size()));
    profile->calls.push_back({now_ns(), 0});
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    Step& step = steps[i];
    Span<const Value* const> in(step_inputs.data() + step.inputs_begin, step.num_inputs);
    Span<Tensor* const> out(step_outputs.data() + step.outputs_begin, step.num_outputs);
    for (uint32_t l = step.lists_begin; l < step.lists_begin + step.num_lists; ++l) {
      const IntRange& list = step_lists[l];
      for (uint32_t r = list.begin; r < list.begin + list.count; ++r) *int_refs[r].dst = int_refs[r].src->i;
    }
    ProfiledInstruction* record = nullptr;
    if (recorder) {
      // Shapes are taken outside the timed span: the profiler's own work does
      // not count as the instruction's.
      record = &profile->records.emplace_back();
      record->call = static_cast<uint32_t>(profile->calls.size() - 1);
      record->index = static_cast<uint32_t>(i);
      shapes_of(in, &record->inputs);
      recorder->set_instruction(record->index);
      record->start_ns = now_ns();
    }
    Status st;
    switch (step.kind) {
      case Step::Kind::IntOp: st = run_int_op(step); break;
      case Step::Kind::Kernel: st = step.kernel->run(step.ctx, in, out); break;
      case Step::Kind::Backend: st = step.backend->def.execute(step.backend_handle, in, out); break;
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
    if (record != nullptr) {
      record->end_ns = now_ns();
      for (const Tensor* t : out) add_shape(*t, &record->outputs);
      profile->calls.back().end_ns = record->end_ns;  // a call that fails ends here
    }
    if (!st.is_ok()) {
      return std::move(st).with_context(
          format("method '%s', instruction %zu (%s)", spec.name.c_str(), i, step.name.c_str()));
    }
  }
  if (recorder) profile->calls.back().end_ns = now_ns();
  return Status::ok();
}

}  // namespace internal

namespace {

bool held_here(const internal::MethodState& s) {
  return s.holder.load(std::memory_order_relaxed) == std::this_thread::get_id();
}

// The turn for one call of a thread that does not hold the Method: taken if
// free, else the call is refused (program.h: a call never waits unasked, and
// never runs while another thread's call or turn is in progress).
class CallTurn {
 public:
  explicit CallTurn(internal::MethodState& s) : s_(s) {
    if (held_here(s)) return;  // inside this thread's lock()
    owned_ = s.turn.try_lock();
    busy_ = !owned_;
  }
  ~CallTurn() {
    if (owned_) s_.turn.unlock();
  }
  CallTurn(const CallTurn&) = delete;
  CallTurn& operator=(const CallTurn&) = delete;

  Status status() const {
    if (!busy_) return Status::ok();
    return Status(Error::Busy, format("method '%s' is in use by another thread: share a Method by holding it "
                                      "(std::lock_guard<kiln::Method>) around each call, or load one Method per thread",
                                      s_.spec.name.c_str()));
  }

 private:
  internal::MethodState& s_;
  bool owned_ = false, busy_ = false;
};

}  // namespace

Method::Method(std::unique_ptr<internal::MethodState> state) : state_(std::move(state)) {}
Method::Method(Method&&) noexcept = default;
Method& Method::operator=(Method&&) noexcept = default;
Method::~Method() = default;

const MethodSpec& Method::spec() const { return state_->spec; }
size_t Method::num_inputs() const { return state_->inputs.size(); }
size_t Method::num_outputs() const { return state_->outputs.size(); }
const Tensor& Method::output(size_t index) const { return *state_->outputs[index]; }
const std::vector<InstructionInfo>& Method::instructions() const { return state_->infos; }
Isa Method::isa() const { return state_->program->isa; }
GemmPrecision Method::gemm_precision() const { return state_->program->gemm_precision; }

Status Method::set_input(size_t index, const Tensor& input) {
  CallTurn turn(*state_);
  KILN_RETURN_IF_ERROR(turn.status());
  return state_->set_input(index, input);
}

Status Method::execute() {
  CallTurn turn(*state_);
  KILN_RETURN_IF_ERROR(turn.status());
  return state_->execute();
}

void Method::reset_state() {
  if (held_here(*state_)) {
    state_->reset_state();
    return;
  }
  std::lock_guard<std::mutex> lock(state_->turn);
  state_->reset_state();
}

Status Method::execute(Profile* profile) {
  CallTurn turn(*state_);
  KILN_RETURN_IF_ERROR(turn.status());
  return state_->execute(profile);
}

Result<std::vector<Tensor>> Method::run(Span<const Tensor> inputs) { return run(inputs, nullptr); }

Result<std::vector<Tensor>> Method::run(Span<const Tensor> inputs, Profile* profile) {
  CallTurn turn(*state_);
  KILN_RETURN_IF_ERROR(turn.status());
  KILN_CHECK_OR_RETURN(inputs.size() == num_inputs(), InvalidInput, "method '%s' takes %zu inputs, got %zu",
                       state_->spec.name.c_str(), num_inputs(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) KILN_RETURN_IF_ERROR(state_->set_input(i, inputs[i]));
  KILN_RETURN_IF_ERROR(state_->execute(profile));
  std::vector<Tensor> outputs;
  outputs.reserve(num_outputs());
  for (size_t i = 0; i < num_outputs(); ++i) outputs.push_back(output(i));
  return outputs;
}

void Method::lock() {
  state_->turn.lock();
  state_->holder.store(std::this_thread::get_id(), std::memory_order_relaxed);
}

bool Method::try_lock() {
  if (!state_->turn.try_lock()) return false;
  state_->holder.store(std::this_thread::get_id(), std::memory_order_relaxed);
  return true;
}

void Method::unlock() {
  state_->holder.store(std::thread::id(), std::memory_order_relaxed);
  state_->turn.unlock();
}

}  // namespace kiln
