// Verification of a loaded program: structure (FlatBuffers verifier), then
// meaning (indices, byte ranges, sizes, limits). Validate at load, trust at
// execute: the executor relies on every check made here.
#include <flatbuffers/flatbuffers.h>

#include <limits>
#include <set>
#include <string>

#include "loader/program_data.h"

namespace kiln::internal {
namespace {

using schema::TensorStorage;
using schema::ValueKind;

// Bytes of a tensor of `sizes` and `item`-byte elements, or false when a size is
// negative or the product of the non-zero sizes passes 2^62 (then even a later
// zero must not hide it: kernels multiply sizes in any order).
bool checked_nbytes(const flatbuffers::Vector<int64_t>* sizes, size_t item, uint64_t* out) {
  constexpr uint64_t kLimit = uint64_t{1} << 62;
  uint64_t n = item;
  bool zero = false;
  if (sizes != nullptr) {
    for (int64_t s : *sizes) {
      if (s < 0) return false;
      if (s == 0) {
        zero = true;
        continue;
      }
      if (n > kLimit / static_cast<uint64_t>(s)) return false;
      n *= static_cast<uint64_t>(s);
    }
  }
  *out = zero ? 0 : n;
  return true;
}

// FlatBuffers checks only the 4-byte length of a vector; 8-byte elements that
// the runtime reads in place must be 8-byte aligned too.
template <typename T>
bool aligned_vector(const flatbuffers::Vector<T>* v) {
  return v == nullptr || reinterpret_cast<uintptr_t>(v->data()) % alignof(T) == 0;
}

bool same_sizes(const flatbuffers::Vector<int64_t>* a, const flatbuffers::Vector<int64_t>* b) {
  size_t na = a ? a->size() : 0, nb = b ? b->size() : 0;
  if (na != nb) return false;
  for (flatbuffers::uoffset_t i = 0; i < na; ++i) {
    if (a->Get(i) != b->Get(i)) return false;
  }
  return true;
}

bool range_fits(uint64_t offset, uint64_t length, uint64_t size) { return offset <= size && length <= size - offset; }

// Strings reach messages, specs and Python: they must be valid UTF-8 without NULs.
bool valid_utf8(const flatbuffers::String* s) {
  if (s == nullptr) return true;
  const auto* p = reinterpret_cast<const unsigned char*>(s->data());
  size_t n = s->size();
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || c == 0 || i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

struct MethodChecker {
  const ProgramData& data;
  const schema::Method& m;
  std::string where;  // "method 'forward'"
  size_t num_values = 0;

  Status fail(const std::string& what) const { return Status(Error::InvalidProgram, where + ": " + what); }

  const schema::Tensor* tensor_at(uint32_t index) const {
    const schema::Value* v = m.values()->Get(index);
    return v->value_type() == ValueKind::Tensor ? v->value_as_Tensor() : nullptr;
  }

  Status check_tensor(size_t index, const schema::Tensor& t) const {
    std::string tw = "value " + std::to_string(index) + " (tensor)";
    auto dtype = static_cast<ScalarType>(t.dtype());
    size_t item = element_size(dtype);
    if (item == 0) return fail(tw + " has unknown dtype " + std::to_string(static_cast<int>(t.dtype())));
    if (!aligned_vector(t.sizes())) return fail(tw + " has misaligned sizes");
    size_t ndim = t.sizes() ? t.sizes()->size() : 0;
    if (ndim > static_cast<size_t>(kMaxDims)) {
      return fail(tw + format(" has %zu dims, at most %d are supported", ndim, kMaxDims));
    }
    uint64_t nbytes = 0;
    if (!checked_nbytes(t.sizes(), item, &nbytes)) {
      return fail(tw + " has a negative size or a size product that overflows");
    }
    if (t.dim_order() != nullptr) {
      if (t.dim_order()->size() != ndim) return fail(tw + " has a dim_order of the wrong length");
      for (size_t i = 0; i < ndim; ++i) {
        if (t.dim_order()->Get(static_cast<flatbuffers::uoffset_t>(i)) != i) {
          return Status(Error::NotSupported, where + ": " + tw + " is not in contiguous (identity) dim order");
        }
      }
    }
    if (t.dynamic_dims() != nullptr) {
      for (uint8_t d : *t.dynamic_dims()) {
        if (d >= ndim) return fail(tw + format(" names dynamic dim %u of a %zu-D tensor", d, ndim));
      }
    }
    if (t.min_sizes() != nullptr) {
      if (!aligned_vector(t.min_sizes()) || t.min_sizes()->size() != ndim) {
        return fail(tw + " has misaligned min_sizes or one of the wrong length");
      }
      for (size_t d = 0; d < ndim; ++d) {
        int64_t lo = t.min_sizes()->Get(static_cast<flatbuffers::uoffset_t>(d));
        if (lo < 0 || lo > t.sizes()->Get(static_cast<flatbuffers::uoffset_t>(d))) {
          return fail(tw + format(" has min size %lld in dim %zu, outside [0, its size]", (long long)lo, d));
        }
      }
    }
    switch (t.storage()) {
      case TensorStorage::Constant: return check_segment_range(tw, t, nbytes, item);
      case TensorStorage::Planned: return check_arena_range(tw, t, nbytes, item);
      case TensorStorage::State:
        // Lives in an arena; starts as (and resets to) bytes of a segment.
        KILN_RETURN_IF_ERROR(check_segment_range(tw, t, nbytes, item));
        return check_arena_range(tw, t, nbytes, item);
      case TensorStorage::Bound: return Status::ok();
      default: return fail(tw + format(" has unknown storage kind %d", static_cast<int>(t.storage())));
    }
  }

  Status check_segment_range(const std::string& tw, const schema::Tensor& t, uint64_t nbytes, size_t item) const {
    const auto* segments = data.program->segments();
    if (segments == nullptr || t.segment() >= segments->size()) {
      return fail(
          tw + format(" uses constant segment %u, the program has %u", t.segment(), segments ? segments->size() : 0));
    }
    uint64_t seg_size = segments->Get(t.segment())->size();
    if (!range_fits(t.segment_offset(), nbytes, seg_size)) {
      return fail(tw + format(" needs %llu bytes at offset %llu of segment %u, which holds %llu",
                              (unsigned long long)nbytes, (unsigned long long)t.segment_offset(), t.segment(),
                              (unsigned long long)seg_size));
    }
    if (t.segment_offset() % item != 0) return fail(tw + " is misaligned in its segment");
    return Status::ok();
  }

  Status check_arena_range(const std::string& tw, const schema::Tensor& t, uint64_t nbytes, size_t item) const {
    const auto* arenas = m.arena_sizes();
    if (arenas == nullptr || t.arena() >= arenas->size()) {
      return fail(tw + format(" uses arena %u, the method has %u", t.arena(), arenas ? arenas->size() : 0));
    }
    uint64_t arena_size = arenas->Get(t.arena());
    if (!range_fits(t.arena_offset(), nbytes, arena_size)) {
      return fail(tw + format(" needs %llu bytes at offset %llu of arena %u, which holds %llu",
                              (unsigned long long)nbytes, (unsigned long long)t.arena_offset(), t.arena(),
                              (unsigned long long)arena_size));
    }
    if (t.arena_offset() % item != 0) return fail(tw + " is misaligned in its arena");
    return Status::ok();
  }

  bool is_int_value(uint32_t index) const {
    return index < num_values && m.values()->Get(index)->value_type() == ValueKind::Int;
  }

  // Kernels and moves may write planned memory and state, never constants
  // (read-only mappings) nor caller-owned inputs.
  bool is_writable_tensor(uint32_t index) const {
    const schema::Tensor* t = tensor_at(index);
    return t != nullptr && (t->storage() == TensorStorage::Planned || t->storage() == TensorStorage::State);
  }

  Status check_value(size_t index) const {
    const schema::Value* v = m.values()->Get(static_cast<flatbuffers::uoffset_t>(index));
    std::string vw = "value " + std::to_string(index);
    // The FlatBuffers verifier accepts a union whose type is set but whose
    // payload is missing; nothing here may read such a value.
    if (v->value() == nullptr) return fail(vw + " has a kind but no payload");
    switch (v->value_type()) {
      case ValueKind::None:
      case ValueKind::Int:
      case ValueKind::Double:
      case ValueKind::Bool: return Status::ok();
      case ValueKind::IntList:
        if (!aligned_vector(v->value_as_IntList()->items())) return fail(vw + " is a misaligned int list");
        return Status::ok();
      case ValueKind::DoubleList:
        if (!aligned_vector(v->value_as_DoubleList()->items())) return fail(vw + " is a misaligned float list");
        return Status::ok();
      case ValueKind::BoolList: {
        // Kernels read these bytes as bool: only 0 and 1 are bools.
        const auto* items = v->value_as_BoolList()->items();
        if (items != nullptr) {
          for (uint8_t b : *reinterpret_cast<const flatbuffers::Vector<uint8_t>*>(items)) {
            if (b > 1) return fail(vw + " is a bool list holding a byte that is not 0 or 1");
          }
        }
        return Status::ok();
      }
      case ValueKind::String:
        if (v->value_as_String()->value() == nullptr || !valid_utf8(v->value_as_String()->value())) {
          return fail(vw + " is a string without valid UTF-8 text");
        }
        return Status::ok();
      case ValueKind::Tensor: return check_tensor(index, *v->value_as_Tensor());
      case ValueKind::IntValueList: {
        const auto* items = v->value_as_IntValueList()->items();
        if (items == nullptr) return Status::ok();
        if (items->size() > static_cast<size_t>(kMaxDims) * 64) return fail(vw + " is an implausibly long int list");
        for (uint32_t item : *items) {
          if (!is_int_value(item)) return fail(vw + format(" lists value %u, which is not an int", item));
        }
        return Status::ok();
      }
      case ValueKind::TensorList: {
        const auto* items = v->value_as_TensorList()->items();
        if (items == nullptr) return Status::ok();
        for (uint32_t item : *items) {
          if (item >= num_values) return fail(vw + format(" lists value %u of %zu", item, num_values));
          auto kind = m.values()->Get(item)->value_type();
          if (kind != ValueKind::Tensor && kind != ValueKind::None) {
            return fail(vw + format(" lists value %u, which is not a tensor", item));
          }
        }
        return Status::ok();
      }
      default: return fail(vw + format(" has unknown kind %d", static_cast<int>(v->value_type())));
    }
  }

  // Arguments may be any value; results must be writable tensors.
  Status check_call(const std::string& iw, const flatbuffers::Vector<uint32_t>* inputs,
                    const flatbuffers::Vector<uint32_t>* outputs) const {
    if (inputs != nullptr) {
      for (uint32_t i : *inputs) {
        if (i >= num_values) return fail(iw + format(" reads value %u of %zu", i, num_values));
      }
    }
    if (outputs != nullptr) {
      for (uint32_t o : *outputs) {
        if (o >= num_values) return fail(iw + format(" writes value %u of %zu", o, num_values));
        if (!is_writable_tensor(o)) {
          return fail(iw + format(" writes value %u, which is not a planned or state tensor", o));
        }
      }
    }
    return Status::ok();
  }

  Status check_instructions() const {
    const auto* instructions = m.instructions();
    if (instructions == nullptr) return Status::ok();
    size_t num_ops = m.operators() ? m.operators()->size() : 0;
    size_t num_delegates = m.delegates() ? m.delegates()->size() : 0;
    for (flatbuffers::uoffset_t i = 0; i < instructions->size(); ++i) {
      const schema::Instruction* ins = instructions->Get(i);
      std::string iw = "instruction " + std::to_string(i);
      if (ins->instruction() == nullptr) return fail(iw + " has a kind but no payload");
      switch (ins->instruction_type()) {
        case schema::InstructionKind::KernelCall: {
          const auto* call = ins->instruction_as_KernelCall();
          if (call->op() >= num_ops) return fail(iw + format(" calls operator %u of %zu", call->op(), num_ops));
          KILN_RETURN_IF_ERROR(check_call(iw, call->inputs(), call->outputs()));
          break;
        }
        case schema::InstructionKind::BackendCall: {
          const auto* call = ins->instruction_as_BackendCall();
          if (call->delegate() >= num_delegates) {
            return fail(iw + format(" calls delegate %u of %zu", call->delegate(), num_delegates));
          }
          KILN_RETURN_IF_ERROR(check_call(iw, call->inputs(), call->outputs()));
          break;
        }
        case schema::InstructionKind::Move: {
          const auto* mv = ins->instruction_as_Move();
          if (mv->src() >= num_values || mv->dst() >= num_values) return fail(iw + " moves a value out of range");
          const schema::Tensor* src = tensor_at(mv->src());
          const schema::Tensor* dst = tensor_at(mv->dst());
          if (src == nullptr || !is_writable_tensor(mv->dst())) {
            return fail(iw + " must move a tensor into a planned or state tensor");
          }
          if (src->dtype() != dst->dtype() || declared_nbytes(*src) > declared_nbytes(*dst)) {
            return fail(iw + " moves a tensor into one of another dtype or smaller capacity");
          }
          // State keeps its declared (static) shape from call to call.
          if (dst->storage() == TensorStorage::State && !same_sizes(src->sizes(), dst->sizes())) {
            return fail(iw + " moves a tensor of another shape into a state tensor");
          }
          break;
        }
        case schema::InstructionKind::IntOp:
          KILN_RETURN_IF_ERROR(check_int_op(iw, *ins->instruction_as_IntOp()));
          break;
        default: return fail(iw + " has an unknown kind");
      }
    }
    return Status::ok();
  }

  Status check_int_op(const std::string& iw, const schema::IntOp& op) const {
    using K = schema::IntOpKind;
    size_t arity = op.kind() == K::Neg ? 1 : op.kind() == K::CheckEqual ? 3 : 2;
    if (op.kind() > K::MAX) return fail(iw + format(" is an int op of unknown kind %d", static_cast<int>(op.kind())));
    if (op.inputs() == nullptr || op.inputs()->size() != arity) {
      return fail(iw + format(" is an int op that needs %zu inputs", arity));
    }
    for (flatbuffers::uoffset_t k = 0; k < arity; ++k) {
      uint32_t in = op.inputs()->Get(k);
      bool ok = (op.kind() == K::SizeOf && k == 0) ? (in < num_values && tensor_at(in) != nullptr)
                : (op.kind() == K::CheckEqual && k == 2)
                    ? (in < num_values && m.values()->Get(in)->value_type() == ValueKind::String)
                    : is_int_value(in);
      if (!ok) return fail(iw + format(" is an int op whose input %u (value %u) has the wrong kind", k, in));
    }
    if (!is_int_value(op.output()))
      return fail(iw + format(" is an int op writing value %u, which is not an int", op.output()));
    return Status::ok();
  }

  Status check_arenas() const {
    const auto* arenas = m.arena_sizes();
    if (arenas == nullptr) return Status::ok();
    if (!aligned_vector(arenas)) return fail("has misaligned arena sizes");
    uint64_t total = 0;
    for (uint64_t a : *arenas) {
      if (a > data.options.max_memory_bytes || total > data.options.max_memory_bytes - a) {
        return Status(Error::OutOfMemory, where + format(": planned memory exceeds the limit of %llu bytes "
                                                         "(LoadOptions::max_memory_bytes)",
                                                         (unsigned long long)data.options.max_memory_bytes));
      }
      total += a;
    }
    return Status::ok();
  }

  Result<MethodSpec> check() {
    if (m.name() == nullptr || m.values() == nullptr) return fail("has no name or no value table");
    if (!valid_utf8(m.name())) return Status(Error::InvalidProgram, "a method name is not valid UTF-8");
    for (const auto* names : {m.input_names(), m.output_names()}) {
      if (names == nullptr) continue;
      for (const flatbuffers::String* name : *names) {
        if (!valid_utf8(name)) return fail("an input or output name is not valid UTF-8");
      }
    }
    num_values = m.values()->size();
    if (m.operators() != nullptr) {
      for (const auto* op : *m.operators()) {
        if (op->name() == nullptr || !valid_utf8(op->name()) || !valid_utf8(op->overload())) {
          return fail("has an operator whose name is missing or not UTF-8");
        }
      }
    }
    if (m.delegates() != nullptr) {
      size_t num_segments = data.program->segments() ? data.program->segments()->size() : 0;
      for (const auto* d : *m.delegates()) {
        if (d->backend() == nullptr || !valid_utf8(d->backend())) {
          return fail("has a delegate whose backend name is missing or not UTF-8");
        }
        if (d->segment() >= num_segments)
          return fail(format("has a delegate in segment %u of %zu", d->segment(), num_segments));
        if (d->compile_specs() != nullptr) {
          for (const auto* spec : *d->compile_specs()) {
            if (spec->key() == nullptr || !valid_utf8(spec->key()))
              return fail("has a compile spec without a valid key");
          }
        }
      }
    }
    KILN_RETURN_IF_ERROR(check_arenas());
    for (size_t i = 0; i < num_values; ++i) KILN_RETURN_IF_ERROR(check_value(i));
    KILN_RETURN_IF_ERROR(check_instructions());

    MethodSpec spec;
    spec.name = m.name()->str();
    size_t num_inputs = m.inputs() ? m.inputs()->size() : 0;
    size_t num_outputs = m.outputs() ? m.outputs()->size() : 0;
    if (m.input_names() && m.input_names()->size() != num_inputs) return fail("input_names does not match inputs");
    if (m.output_names() && m.output_names()->size() != num_outputs) return fail("output_names does not match outputs");
    std::set<uint32_t> bound_inputs;
    auto make_spec = [&](uint32_t index, const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* names,
                         size_t position, const char* prefix) {
      const schema::Tensor* t = tensor_at(index);
      TensorSpec ts;
      const flatbuffers::String* name = names ? names->Get(static_cast<flatbuffers::uoffset_t>(position)) : nullptr;
      ts.name = name ? name->str() : prefix + std::to_string(position);
      ts.dtype = static_cast<ScalarType>(t->dtype());
      if (t->sizes()) ts.sizes.assign(t->sizes()->begin(), t->sizes()->end());
      if (t->dynamic_dims()) ts.dynamic_dims.assign(t->dynamic_dims()->begin(), t->dynamic_dims()->end());
      // Static dims: exactly their size; dynamic ones: min_sizes, or 0.
      ts.min_sizes = ts.sizes;
      for (int d : ts.dynamic_dims) {
        ts.min_sizes[d] = t->min_sizes() ? t->min_sizes()->Get(static_cast<flatbuffers::uoffset_t>(d)) : 0;
      }
      return ts;
    };
    for (size_t i = 0; i < num_inputs; ++i) {
      uint32_t index = m.inputs()->Get(static_cast<flatbuffers::uoffset_t>(i));
      if (index >= num_values || tensor_at(index) == nullptr || tensor_at(index)->storage() != TensorStorage::Bound) {
        return fail(format("input %zu is not a bound tensor value", i));
      }
      if (!bound_inputs.insert(index).second) return fail(format("input %zu repeats value %u", i, index));
      spec.inputs.push_back(make_spec(index, m.input_names(), i, "input_"));
    }
    // A bound tensor that no input binds would be read with no data behind it.
    for (size_t i = 0; i < num_values; ++i) {
      const schema::Tensor* t = tensor_at(static_cast<uint32_t>(i));
      if (t != nullptr && t->storage() == TensorStorage::Bound && !bound_inputs.count(static_cast<uint32_t>(i))) {
        return fail(format("value %zu is a bound tensor that is not a method input", i));
      }
    }
    for (size_t i = 0; i < num_outputs; ++i) {
      uint32_t index = m.outputs()->Get(static_cast<flatbuffers::uoffset_t>(i));
      if (index >= num_values || tensor_at(index) == nullptr)
        return fail(format("output %zu is not a tensor value", i));
      spec.outputs.push_back(make_spec(index, m.output_names(), i, "output_"));
    }
    size_t num_state = m.state() ? m.state()->size() : 0;
    if (m.state_names() && m.state_names()->size() != num_state) return fail("state_names does not match state");
    std::set<uint32_t> state_values;
    for (size_t i = 0; i < num_state; ++i) {
      uint32_t index = m.state()->Get(static_cast<flatbuffers::uoffset_t>(i));
      if (index >= num_values || tensor_at(index) == nullptr || tensor_at(index)->storage() != TensorStorage::State) {
        return fail(format("state %zu is not a state tensor value", i));
      }
      if (!state_values.insert(index).second) return fail(format("state %zu repeats value %u", i, index));
      if (m.state_names() && !valid_utf8(m.state_names()->Get(static_cast<flatbuffers::uoffset_t>(i)))) {
        return fail("a state name is not valid UTF-8");
      }
      spec.state.push_back(make_spec(index, m.state_names(), i, "state_"));
    }
    // Every state tensor is listed, so that reset_state() restores all of them.
    for (size_t i = 0; i < num_values; ++i) {
      const schema::Tensor* t = tensor_at(static_cast<uint32_t>(i));
      if (t != nullptr && t->storage() == TensorStorage::State && !state_values.count(static_cast<uint32_t>(i))) {
        return fail(format("value %zu is a state tensor missing from the method's state list", i));
      }
    }
    if (m.arena_sizes()) spec.arena_sizes.assign(m.arena_sizes()->begin(), m.arena_sizes()->end());
    spec.num_instructions = m.instructions() ? m.instructions()->size() : 0;
    return spec;
  }
};

// Named metadata: the FlatBuffers verifier has bounded every vector by the
// program table; these limits keep a hostile file from making readers (which
// may copy keys into maps) do unbounded work, and keep keys usable as names.
Status verify_metadata(const schema::Program& program) {
  const auto* entries = program.metadata();
  if (entries == nullptr) return Status::ok();
  KILN_CHECK_OR_RETURN(entries->size() <= kMaxMetadataEntries, InvalidProgram,
                       "the program has %u metadata entries; at most %zu are allowed", entries->size(),
                       kMaxMetadataEntries);
  std::set<std::string> keys;
  for (flatbuffers::uoffset_t i = 0; i < entries->size(); ++i) {
    const schema::Metadata* e = entries->Get(i);
    KILN_CHECK_OR_RETURN(e->key() != nullptr && e->key()->size() > 0, InvalidProgram, "metadata entry %u has no key",
                         i);
    KILN_CHECK_OR_RETURN(e->key()->size() <= kMaxMetadataKeyBytes && valid_utf8(e->key()), InvalidProgram,
                         "metadata entry %u: the key is longer than %zu bytes or not valid UTF-8", i,
                         kMaxMetadataKeyBytes);
    KILN_CHECK_OR_RETURN(keys.insert(e->key()->str()).second, InvalidProgram, "metadata key '%s' appears twice",
                         e->key()->c_str());
  }
  return Status::ok();
}

}  // namespace

uint64_t declared_nbytes(const schema::Tensor& t) {
  uint64_t n = 0;
  checked_nbytes(t.sizes(), element_size(static_cast<ScalarType>(t.dtype())), &n);
  return n;
}

Status verify_program(ProgramData& data) {
  // parse_header: the program table lies inside structure() (a private copy for mapped files).
  const uint8_t* fb = data.bytes->structure() + data.header.flatbuffer_offset;
  flatbuffers::Verifier::Options opts;
  opts.max_depth = 32;
  opts.max_tables = 4'000'000;
  opts.check_alignment = true;
  flatbuffers::Verifier verifier(fb, static_cast<size_t>(data.header.flatbuffer_size), opts);
  if (!schema::VerifyProgramBuffer(verifier)) {
    return Status(Error::InvalidProgram, "the program table is corrupt (FlatBuffers verification failed)");
  }
  data.program = schema::GetProgram(fb);
  if (!valid_utf8(data.program->producer())) {
    data.program = nullptr;
    return Status(Error::InvalidProgram, "the producer string is not valid UTF-8");
  }
  const auto* segments = data.program->segments();
  if (segments != nullptr) {
    for (flatbuffers::uoffset_t i = 0; i < segments->size(); ++i) {
      const schema::Segment* s = segments->Get(i);
      if (s->offset() % kSegmentAlignment != 0 || !range_fits(s->offset(), s->size(), data.header.segments_size)) {
        data.program = nullptr;
        return Status(Error::InvalidProgram,
                      format("segment %u [%llu, +%llu) is misaligned or outside the %llu-byte segment area", i,
                             (unsigned long long)s->offset(), (unsigned long long)s->size(),
                             (unsigned long long)data.header.segments_size));
      }
    }
  }
  Status metadata = verify_metadata(*data.program);
  if (!metadata.is_ok()) {
    data.program = nullptr;
    return metadata;
  }
  const auto* methods = data.program->methods();
  if (methods == nullptr || methods->size() == 0) {
    data.program = nullptr;
    return Status(Error::InvalidProgram, "the program has no methods");
  }
  std::set<std::string> names;
  std::vector<MethodSpec> specs;
  for (flatbuffers::uoffset_t i = 0; i < methods->size(); ++i) {
    const schema::Method* m = methods->Get(i);
    MethodChecker checker{data, *m, "method " + std::to_string(i)};
    if (m->name() != nullptr && valid_utf8(m->name())) checker.where = "method '" + m->name()->str() + "'";
    Result<MethodSpec> spec = checker.check();
    if (!spec.ok()) {
      data.program = nullptr;
      return spec.status();
    }
    if (!names.insert(spec->name).second) {
      data.program = nullptr;
      return Status(Error::InvalidProgram, "two methods are named '" + spec->name + "'");
    }
    specs.push_back(std::move(spec).value());
  }
  data.specs = std::move(specs);
  return Status::ok();
}

}  // namespace kiln::internal
