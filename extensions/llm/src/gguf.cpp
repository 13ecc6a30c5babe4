// GgufFile: reading a GGUF file's header, metadata and tensor table, checked against the file's size.
#include "kiln/llm/gguf.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "file.h"

namespace kiln::llm {

namespace internal {
struct GgufData {
  std::string path;
  const uint8_t* base = nullptr;
  size_t size = 0;
  bool mapped = false;  // else a copy owned with malloc
  uint32_t version = 0;
  std::vector<std::string> keys;
  std::unordered_map<std::string, GgufValue> values;
  std::vector<GgufTensorInfo> tensors;

  ~GgufData() {
    if (base != nullptr && mapped) ::munmap(const_cast<uint8_t*>(base), size);
    if (!mapped) std::free(const_cast<uint8_t*>(base));
  }
};
}  // namespace internal

namespace {

// ggml tensor types kiln knows the block layout of: (type, block elements, block bytes).
struct GgmlTypeInfo {
  uint32_t type;
  const char* name;
  uint32_t block;
  uint32_t bytes;
};
constexpr GgmlTypeInfo kGgmlTypes[] = {
    {0, "F32", 1, 4},       {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},    {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},    {8, "Q8_0", 32, 34},    {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},  {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {24, "I8", 1, 1},       {25, "I16", 1, 2},
    {26, "I32", 1, 4},      {27, "I64", 1, 8},      {28, "F64", 1, 8},      {30, "BF16", 1, 2},
};

const GgmlTypeInfo* ggml_type_info(uint32_t type) {
  for (const auto& t : kGgmlTypes) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

constexpr int kMaxArrayDepth = 4;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

struct Reader {
  const uint8_t* base;
  size_t size;
  size_t pos = 0;
  const std::string& path;

  Status truncated(const char* what) const {
    return Status(Error::InvalidProgram,
                  format("'%s' is truncated or corrupt: %s at byte %zu runs past the end of the %zu-byte file",
                         path.c_str(), what, pos, size));
  }
  size_t left() const { return size - pos; }

  template <typename T>
  Status read(T* out, const char* what) {
    if (left() < sizeof(T)) return truncated(what);
    std::memcpy(out, base + pos, sizeof(T));  // GGUF is little-endian, like every supported host
    pos += sizeof(T);
    return Status::ok();
  }

  Status read_string(std::string* out, const char* what) {
    uint64_t n;
    KILN_RETURN_IF_ERROR(read(&n, what));
    if (n > left()) return truncated(what);  // never allocate what the file merely claims
    out->assign(reinterpret_cast<const char*>(base + pos), static_cast<size_t>(n));
    pos += static_cast<size_t>(n);
    return Status::ok();
  }

  static size_t scalar_size(GgufType t) {
    switch (t) {
      case GgufType::UInt8:
      case GgufType::Int8:
      case GgufType::Bool: return 1;
      case GgufType::UInt16:
      case GgufType::Int16: return 2;
      case GgufType::UInt32:
      case GgufType::Int32:
      case GgufType::Float32: return 4;
      case GgufType::UInt64:
      case GgufType::Int64:
      case GgufType::Float64: return 8;
      default: return 0;
    }
  }

  Status read_scalar(GgufType t, int64_t* i, double* f, const char* what) {
    switch (t) {
      case GgufType::UInt8: {
        uint8_t v;
        KILN_RETURN_IF_ERROR(read(&v, what));
        *i = v;
        return Status::ok();
      }
      case GgufType::Int8: {
        int8_t v;
        KILN_RETURN_IF_ERROR(read(&v, what));
        *i = v;
        return Status::ok();
      }
      case GgufType::Bool: {
        uint8_t v;
        KILN_RETURN_IF_ERROR(read(&v, what));
        KILN_CHECK_OR_RETURN(v <= 1, InvalidProgram, "'%s': %s is a bool of value %u", path.c_str(), what, v);
        *i = v;
        return Status::ok();
      }
      case GgufType::UInt16: {
        uint16_t v;
        KILN_RETURN_IF_ERROR(read(&v, what));
        *i = v;
        return Status::ok();
      }
      case GgufType::Int16: {
        int16_t v;
        KILN_RETURN_IF_ERROR(read(&v, what));
        *i = v;
        return Status::ok();
      }
      case GgufType::UInt32: {
        uint32_t v;
        KILN_RETURN_IF_ERROR(read(&v, what));
        *i = v;
        return Status::ok();
      }
      case GgufType::Int32: {
        int32_t v;
        KILN_RETURN_IF_ERROR(read(&v, what));
        *i = v;
        return Status::ok();
      }
      case GgufType::Int64: {
        int64_t v;
        KILN_RETURN_IF_ERROR(read(&v, what));
        *i = v;
        return Status::ok();
      }
      case GgufType::UInt64: {
        uint64_t v;
        KILN_RETURN_IF_ERROR(read(&v, what));
        KILN_CHECK_OR_RETURN(v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), InvalidProgram,
                             "'%s': %s holds %llu, which kiln cannot represent", path.c_str(), what,
                             static_cast<unsigned long long>(v));
        *i = static_cast<int64_t>(v);
        return Status::ok();
      }
      case GgufType::Float32: {
        float v;
        KILN_RETURN_IF_ERROR(read(&v, what));
        *f = v;
        return Status::ok();
      }
      case GgufType::Float64: {
        double v;
        KILN_RETURN_IF_ERROR(read(&v, what));
        *f = v;
        return Status::ok();
      }
      default: break;
    }
    return Status(Error::InvalidProgram,
                  format("'%s': %s has unknown type %u", path.c_str(), what, static_cast<unsigned>(t)));
  }

  Status read_value(GgufType type, GgufValue* out, const char* what, int depth) {
    out->type = type;
    if (type == GgufType::String) return read_string(&out->str, what);
    if (type != GgufType::Array) return read_scalar(type, &out->i, &out->f, what);
    KILN_CHECK_OR_RETURN(depth < kMaxArrayDepth, InvalidProgram, "'%s': %s nests arrays too deeply", path.c_str(),
                         what);
    uint32_t item_type;
    uint64_t n;
    KILN_RETURN_IF_ERROR(read(&item_type, what));
    KILN_RETURN_IF_ERROR(read(&n, what));
    out->array_type = static_cast<GgufType>(item_type);
    out->array_size = n;
    // Every item takes at least one byte (8 for a string's length): a count the
    // rest of the file cannot hold is refused before anything is reserved.
    size_t item_min =
        out->array_type == GgufType::String || out->array_type == GgufType::Array ? 8 : scalar_size(out->array_type);
    KILN_CHECK_OR_RETURN(item_min > 0, InvalidProgram, "'%s': %s is an array of unknown type %u", path.c_str(), what,
                         item_type);
    if (n > left() / item_min) return truncated(what);
    if (out->array_type == GgufType::String) {
      out->strings.resize(static_cast<size_t>(n));
      for (auto& s : out->strings) KILN_RETURN_IF_ERROR(read_string(&s, what));
    } else if (out->array_type == GgufType::Array) {
      for (uint64_t k = 0; k < n; ++k) {  // kept empty: no supported key uses nested arrays
        GgufValue inner;
        KILN_RETURN_IF_ERROR(read_value(GgufType::Array, &inner, what, depth + 1));
      }
    } else if (out->array_type == GgufType::Float32 || out->array_type == GgufType::Float64) {
      out->floats.resize(static_cast<size_t>(n));
      int64_t unused;
      for (auto& v : out->floats) KILN_RETURN_IF_ERROR(read_scalar(out->array_type, &unused, &v, what));
    } else {
      out->ints.resize(static_cast<size_t>(n));
      double unused;
      for (auto& v : out->ints) KILN_RETURN_IF_ERROR(read_scalar(out->array_type, &v, &unused, what));
    }
    return Status::ok();
  }
};

}  // namespace

std::string ggml_type_name(uint32_t ggml_type) {
  const GgmlTypeInfo* info = ggml_type_info(ggml_type);
  return info ? info->name : format("type %u", ggml_type);
}

GgufFile::GgufFile(std::unique_ptr<internal::GgufData> data) : d_(std::move(data)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

namespace {
constexpr size_t kHeaderBytes = 24;  // magic, version, tensor count, metadata count
}  // namespace

Result<GgufFile> GgufFile::open(const std::string& path) {
  auto file = internal::InputFile::open(path, "GGUF file", kHeaderBytes, std::numeric_limits<size_t>::max());
  if (!file.ok()) return file.status();
  auto d = std::make_unique<internal::GgufData>();
  d->path = path;
  auto base = file->map();
  if (!base.ok()) return base.status();
  d->base = base.value();
  d->size = file->size();
  d->mapped = true;
  KILN_RETURN_IF_ERROR(parse(*d));
  return GgufFile(std::move(d));
}

Result<GgufFile> GgufFile::from_copy(const void* data, size_t size, const std::string& name) {
  KILN_CHECK_OR_RETURN(data != nullptr || size == 0, InvalidArgument, "null buffer of %zu bytes", size);
  KILN_CHECK_OR_RETURN(size >= kHeaderBytes, InvalidProgram,
                       "'%s' is %zu bytes, too small for a GGUF file header (truncated?)", name.c_str(), size);
  auto d = std::make_unique<internal::GgufData>();
  d->path = name;
  void* copy = std::malloc(size);
  KILN_CHECK_OR_RETURN(copy != nullptr, OutOfMemory, "cannot copy a %zu-byte GGUF file", size);
  std::memcpy(copy, data, size);
  d->base = static_cast<const uint8_t*>(copy);
  d->size = size;
  KILN_RETURN_IF_ERROR(parse(*d));
  return GgufFile(std::move(d));
}

Status GgufFile::parse(internal::GgufData& data) {
  internal::GgufData* d = &data;
  const std::string& path = d->path;
  Reader r{d->base, d->size, 0, d->path};
  KILN_CHECK_OR_RETURN(std::memcmp(d->base, "GGUF", 4) == 0, InvalidProgram, "'%s' is not a GGUF file (bad magic)",
                       path.c_str());
  r.pos = 4;
  KILN_RETURN_IF_ERROR(r.read(&d->version, "the version"));
  KILN_CHECK_OR_RETURN(d->version == 2 || d->version == 3, NotSupported,
                       "'%s' is GGUF version %u; kiln reads versions 2 and 3", path.c_str(), d->version);
  uint64_t n_tensors, n_kv;
  KILN_RETURN_IF_ERROR(r.read(&n_tensors, "the tensor count"));
  KILN_RETURN_IF_ERROR(r.read(&n_kv, "the metadata count"));
  // Each metadata entry takes at least 13 bytes, each tensor entry at least 24.
  if (n_kv > r.left() / 13) return r.truncated("the metadata count");
  if (n_tensors > r.left() / 24) return r.truncated("the tensor count");

  d->keys.reserve(static_cast<size_t>(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key;
    KILN_RETURN_IF_ERROR(r.read_string(&key, "a metadata key"));
    uint32_t type;
    KILN_RETURN_IF_ERROR(r.read(&type, "a metadata type"));
    GgufValue value;
    std::string what = "metadata '" + key + "'";
    KILN_RETURN_IF_ERROR(r.read_value(static_cast<GgufType>(type), &value, what.c_str(), 0));
    KILN_CHECK_OR_RETURN(d->values.emplace(key, std::move(value)).second, InvalidProgram,
                         "'%s': metadata key '%s' appears twice", path.c_str(), key.c_str());
    d->keys.push_back(std::move(key));
  }

  uint64_t alignment = 32;
  auto found = d->values.find("general.alignment");
  if (found != d->values.end()) {
    const GgufValue* a = &found->second;
    KILN_CHECK_OR_RETURN(a->is_int() && a->i > 0 && a->i <= 65536 && (a->i & (a->i - 1)) == 0, InvalidProgram,
                         "'%s': general.alignment must be a power of two up to 65536", path.c_str());
    alignment = static_cast<uint64_t>(a->i);
  }

  d->tensors.resize(static_cast<size_t>(n_tensors));
  // Names are how every user finds a tensor: a second one of a name would be
  // silently shadowed (the gguf package refuses such files too).
  std::unordered_set<std::string_view> names;
  names.reserve(static_cast<size_t>(n_tensors));
  for (auto& t : d->tensors) {
    KILN_RETURN_IF_ERROR(r.read_string(&t.name, "a tensor name"));
    KILN_CHECK_OR_RETURN(names.insert(t.name).second, InvalidProgram, "'%s': tensor '%s' appears twice", path.c_str(),
                         t.name.c_str());
    uint32_t n_dims;
    KILN_RETURN_IF_ERROR(r.read(&n_dims, "a tensor's dimension count"));
    KILN_CHECK_OR_RETURN(n_dims >= 1 && n_dims <= kMaxDims, InvalidProgram,
                         "'%s': tensor '%s' has %u dimensions (1 to %u allowed)", path.c_str(), t.name.c_str(), n_dims,
                         kMaxDims);
    t.dims.resize(n_dims);
    uint64_t numel = 1;
    for (auto& dim : t.dims) {
      KILN_RETURN_IF_ERROR(r.read(&dim, "a tensor dimension"));
      KILN_CHECK_OR_RETURN(dim == 0 || numel <= (uint64_t{1} << 62) / dim, InvalidProgram,
                           "'%s': tensor '%s' has sizes whose product overflows", path.c_str(), t.name.c_str());
      numel *= dim;
    }
    KILN_RETURN_IF_ERROR(r.read(&t.ggml_type, "a tensor type"));
    KILN_RETURN_IF_ERROR(r.read(&t.offset, "a tensor offset"));
    KILN_CHECK_OR_RETURN(t.offset % alignment == 0, InvalidProgram, "'%s': tensor '%s' is misaligned", path.c_str(),
                         t.name.c_str());
    if (const GgmlTypeInfo* info = ggml_type_info(t.ggml_type)) {
      KILN_CHECK_OR_RETURN(t.dims[0] % info->block == 0, InvalidProgram,
                           "'%s': tensor '%s' of type %s has rows of %llu, not a multiple of its %u-element blocks",
                           path.c_str(), t.name.c_str(), info->name, static_cast<unsigned long long>(t.dims[0]),
                           info->block);
      const uint64_t blocks = numel / info->block;
      KILN_CHECK_OR_RETURN(blocks <= (uint64_t{1} << 62) / info->bytes, InvalidProgram,
                           "'%s': tensor '%s' has sizes whose product overflows", path.c_str(), t.name.c_str());
      t.nbytes = blocks * info->bytes;
    }
  }
  const uint64_t data_start = (r.pos + alignment - 1) / alignment * alignment;
  for (auto& t : d->tensors) {
    uint64_t begin = data_start + t.offset;
    KILN_CHECK_OR_RETURN(t.offset <= d->size && begin <= d->size && t.nbytes <= d->size - begin, InvalidProgram,
                         "'%s' is truncated: tensor '%s' needs bytes [%llu, %llu) of a %zu-byte file", path.c_str(),
                         t.name.c_str(), static_cast<unsigned long long>(begin),
                         static_cast<unsigned long long>(begin + t.nbytes), d->size);
    t.offset = begin;
  }
  return Status::ok();
}

uint32_t GgufFile::version() const { return d_->version; }
const std::string& GgufFile::path() const { return d_->path; }
const std::vector<std::string>& GgufFile::keys() const { return d_->keys; }
const std::vector<GgufTensorInfo>& GgufFile::tensors() const { return d_->tensors; }

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = d_->values.find(key);
  return it == d_->values.end() ? nullptr : &it->second;
}

Result<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return Status(Error::NotFound, format("'%s' has no metadata '%s'", d_->path.c_str(), key.c_str()));
  KILN_CHECK_OR_RETURN(v->type == GgufType::String, InvalidProgram, "'%s': metadata '%s' is not a string",
                       d_->path.c_str(), key.c_str());
  return v->str;
}

Result<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return Status(Error::NotFound, format("'%s' has no metadata '%s'", d_->path.c_str(), key.c_str()));
  KILN_CHECK_OR_RETURN(v->is_int(), InvalidProgram, "'%s': metadata '%s' is not an integer", d_->path.c_str(),
                       key.c_str());
  return v->i;
}

Result<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return Status(Error::NotFound, format("'%s' has no metadata '%s'", d_->path.c_str(), key.c_str()));
  KILN_CHECK_OR_RETURN(v->is_float() || v->is_int(), InvalidProgram, "'%s': metadata '%s' is not a number",
                       d_->path.c_str(), key.c_str());
  return v->is_float() ? v->f : static_cast<double>(v->i);
}

Span<const uint8_t> GgufFile::tensor_data(size_t index) const {
  const GgufTensorInfo& t = d_->tensors[index];
  return Span<const uint8_t>(d_->base + t.offset, static_cast<size_t>(t.nbytes));
}

}  // namespace kiln::llm
