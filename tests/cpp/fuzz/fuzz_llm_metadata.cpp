// fuzz_llm_metadata: libFuzzer target for what Runner::load reads from an LLM program before
// trusting it (runner_metadata.h): the config and tokenizer metadata, checked against the
// signature of method 'forward' (tokens, input_pos, slots, cache_positions). The input is a 16-byte description of that
// signature, then the config JSON, a NUL byte, and the tokenizer.json; every outcome but an error value or a config
// within what the signature holds is a bug, and so is holding more than 64x the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "fuzz_memory_bound.h"
#include "runner_metadata.h"

namespace {

uint16_t u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

// Bytes 0-15: [0] the row bound B - 1 (the KV cache slots), [1] bit 0 tokens dynamic, bit 1
// cache_positions dynamic, bits 2-3 state tensors, bit 4 rows dynamic; [2,3] the token bound,
// [4,5] its minimum, [6,7] the cache_positions bound, [8..11] the logits per token, [12,13] the
// state's row dimension, [14] output rank - 1 (logits [B, 1.., vocab]).
kiln::MethodSpec spec_of(const uint8_t* h) {
  using kiln::ScalarType;
  kiln::MethodSpec spec;
  spec.name = "forward";
  const int64_t b = int64_t{h[0]} + 1, t = u16(h + 2), t_min = u16(h + 4), l = u16(h + 6);
  uint32_t vocab;
  std::memcpy(&vocab, h + 8, 4);
  const int64_t b_min = (h[1] & 16) ? 1 : b;
  kiln::TensorSpec tokens{"tokens", ScalarType::Int64, {b, t}, {}, {b_min, t_min}};
  kiln::TensorSpec pos{"input_pos", ScalarType::Int64, {b, t}, {}, {b_min, t_min}};
  kiln::TensorSpec slots{"slots", ScalarType::Int64, {b}, {}, {b_min}};
  std::vector<int> dims;
  if (h[1] & 16) dims.push_back(0);
  if (h[1] & 1) dims.push_back(1);
  tokens.dynamic_dims = pos.dynamic_dims = dims;
  if (h[1] & 16) slots.dynamic_dims = {0};
  kiln::TensorSpec cp{"cache_positions", ScalarType::Int64, {l}, {}, {1}};
  if (h[1] & 2) cp.dynamic_dims = {0};
  spec.inputs = {tokens, pos, slots, cp};
  for (int k = 0; k < ((h[1] >> 2) & 3); ++k) {
    spec.state.push_back({"k_cache", ScalarType::Float32, {u16(h + 12), 4}, {}, {u16(h + 12), 4}});
  }
  kiln::TensorSpec logits{"logits", ScalarType::Float32, {}, {}, {}};
  const int rank = (h[14] & 3) + 1;
  if (rank >= 2) logits.sizes.push_back(b);
  for (int k = 2; k < rank; ++k) logits.sizes.push_back(1);
  logits.sizes.push_back(static_cast<int64_t>(vocab));
  logits.min_sizes = logits.sizes;
  spec.outputs = {logits};
  return spec;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 16) return 0;
  kiln_fuzz::MemoryBound bound(size);
  const kiln::MethodSpec spec = spec_of(data);
  std::string_view rest(reinterpret_cast<const char*>(data) + 16, size - 16);
  const size_t nul = rest.find('\0');
  std::string_view config = rest.substr(0, nul);
  std::string_view tokenizer = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  kiln::LoadOptions options;
  options.max_memory_bytes = uint64_t{64} << 20;
  auto meta = kiln::llm::internal::read_llm_metadata("fuzz.kiln", config, tokenizer, spec, options);
  if (!meta.ok()) return 0;
  const kiln::llm::ModelConfig& c = meta->config;
  // What Runner::load then sizes by the config must be within the signature and the limit.
  if (c.vocab_size < 1 || c.vocab_size != spec.outputs[0].sizes.back() || c.context_length < 2 ||
      static_cast<uint64_t>(c.context_length) * 8 > options.max_memory_bytes || c.max_tokens_per_call < 1 ||
      c.max_tokens_per_call > spec.inputs[0].sizes[1] || meta->tokenizer.vocab_size() > c.vocab_size ||
      meta->slots < 1 || meta->slots > kiln::llm::kMaxSlots || meta->slots != spec.inputs[0].sizes[0]) {
    std::abort();
  }
  for (int32_t id : c.stop_ids) {
    if (id < 0 || id >= c.vocab_size) std::abort();
  }
  return 0;
}
