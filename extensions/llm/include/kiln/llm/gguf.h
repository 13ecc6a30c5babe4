// GgufFile: a checked reader of GGUF files (llama.cpp's model format): metadata and tensor table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/llm/api.h"
#include "kiln/span.h"

namespace kiln::llm {

// GGUF metadata value types (the file's own codes).
enum class GgufType : uint32_t {
  UInt8 = 0,
  Int8 = 1,
  UInt16 = 2,
  Int16 = 3,
  UInt32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  UInt64 = 10,
  Int64 = 11,
  Float64 = 12,
};

// One metadata value. Integers and bools are in `i` (UInt64 above INT64_MAX is
// refused), floats in `f`, a string in `str`; an array has `array_type` and its
// items in `ints`, `floats` or `strings` (arrays of arrays are kept empty).
struct GgufValue {
  GgufType type = GgufType::UInt8;
  GgufType array_type = GgufType::UInt8;
  int64_t i = 0;
  double f = 0.0;
  std::string str;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  uint64_t array_size = 0;

  bool is_int() const noexcept {
    return type <= GgufType::Int32 || type == GgufType::UInt64 || type == GgufType::Int64 || type == GgufType::Bool;
  }
  bool is_float() const noexcept { return type == GgufType::Float32 || type == GgufType::Float64; }
};

struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;      // ggml's type code (0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 8 Q8_0, 30 BF16, ...)
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the innermost (contiguous) dimension
  uint64_t offset = 0;         // absolute byte offset of the data in the file
  uint64_t nbytes = 0;         // bytes of the data (0 when the type is unknown to kiln)
};

// Name of a ggml tensor type ("Q4_1"), or "type <n>".
KILN_LLM_API std::string ggml_type_name(uint32_t ggml_type);

namespace internal {
struct GgufData;
}

// Everything a file says is checked against its real size before use: a
// truncated or hostile file is an InvalidProgram error naming what is wrong,
// never a read out of bounds or an allocation the file merely asks for: what
// the reader keeps is at most a small multiple of the file's metadata bytes.
// Tensor names are unique (a repeated one is refused).
class KILN_LLM_API GgufFile {
 public:
  // Memory-maps the file and reads the header, metadata and tensor table. The
  // path must name a regular file (a FIFO or a device is InvalidArgument,
  // refused without reading from it).
  static Result<GgufFile> open(const std::string& path);
  // The same from a copy of `size` bytes; `name` stands for the path in messages.
  static Result<GgufFile> from_copy(const void* data, size_t size, const std::string& name = "<buffer>");

  uint32_t version() const;
  const std::string& path() const;
  // Metadata keys in file order, and one value (nullptr when absent).
  const std::vector<std::string>& keys() const;
  const GgufValue* find(const std::string& key) const;
  // Typed lookups: NotFound when absent, InvalidProgram when of another type.
  Result<std::string> get_string(const std::string& key) const;
  Result<int64_t> get_int(const std::string& key) const;
  Result<double> get_float(const std::string& key) const;

  const std::vector<GgufTensorInfo>& tensors() const;
  // The bytes of tensor `index` (in place in the mapping, valid while this lives).
  Span<const uint8_t> tensor_data(size_t index) const;

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

 private:
  explicit GgufFile(std::unique_ptr<internal::GgufData> data);
  static Status parse(internal::GgufData& data);
  std::unique_ptr<internal::GgufData> d_;
};

}  // namespace kiln::llm
