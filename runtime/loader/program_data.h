// ProgramData: a verified program shared by the Program handle and its Methods.
#pragma once

#include <memory>
#include <vector>

#include "executor/packed_constants.h"
#include "kiln/cpu.h"
#include "kiln/program.h"
#include "loader/program_file.h"
#include "program_generated.h"

namespace kiln::internal {

struct ProgramData {
  std::unique_ptr<ProgramBytes> bytes;
  FileHeader header;
  LoadOptions options;
  // Valid only after verify_program() succeeded: from then on every index and
  // byte range in the program is known to be in bounds.
  const schema::Program* program = nullptr;
  std::vector<MethodSpec> specs;  // one per method, in file order
  // LoadOptions::kernels and ::isa resolved (with the environment) at load.
  bool reference_kernels = false;
  Isa isa = Isa::Baseline;
  GemmPrecision gemm_precision = GemmPrecision::Float32;
  // Packed weights, shared by the program's methods.
  std::unique_ptr<PackedConstantCache> packed = std::make_unique<PackedConstantCache>();

  const uint8_t* segments_base() const { return bytes->data() + header.segments_offset; }
};

// The metadata key of a program's default GEMM precision (LoadOptions::gemm_precision).
constexpr const char* kGemmPrecisionKey = "kiln.gemm_precision";

// Limits on named metadata (verify_program refuses more): entries, key bytes.
constexpr size_t kMaxMetadataEntries = 1024;
constexpr size_t kMaxMetadataKeyBytes = 256;

// Runs the FlatBuffers verifier and then kiln's semantic checks (see
// verifier.cpp). On success sets `program` and `specs`.
Status verify_program(ProgramData& data);

// Bytes of a tensor at its declared (largest) sizes; verify_program has
// checked that this does not overflow.
uint64_t declared_nbytes(const schema::Tensor& t);

}  // namespace kiln::internal
