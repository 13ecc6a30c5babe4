// Sampler: penalties, temperature, top-k, min-p and top-p over one row of logits.
#include "kiln/llm/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace kiln::llm {

Status check_sampling_options(const SamplingOptions& o) {
  KILN_CHECK_OR_RETURN(std::isfinite(o.temperature) && o.temperature >= 0, InvalidArgument,
                       "temperature must be a finite number >= 0 (0 is greedy), got %g", o.temperature);
  KILN_CHECK_OR_RETURN(o.top_k >= 0, InvalidArgument, "top_k must be >= 0 (0: no limit), got %d", o.top_k);
  KILN_CHECK_OR_RETURN(o.top_p > 0 && o.top_p <= 1, InvalidArgument, "top_p must be in (0, 1], got %g", o.top_p);
  KILN_CHECK_OR_RETURN(o.min_p >= 0 && o.min_p <= 1, InvalidArgument, "min_p must be in [0, 1], got %g", o.min_p);
  KILN_CHECK_OR_RETURN(std::isfinite(o.repetition_penalty) && o.repetition_penalty > 0, InvalidArgument,
                       "repetition_penalty must be a finite number > 0 (1: none), got %g", o.repetition_penalty);
  return Status::ok();
}

Sampler::Sampler(const SamplingOptions& options) : options_(options) {
  if (options.seed >= 0) {
    rng_.seed(static_cast<uint64_t>(options.seed));
  } else {
    std::random_device device;
    rng_.seed((static_cast<uint64_t>(device()) << 32) ^ device());
  }
}

int32_t Sampler::sample(Span<float> logits, Span<const int32_t> history) {
  const int32_t n = static_cast<int32_t>(logits.size());
  if (options_.repetition_penalty != 1.0f && !history.empty()) {
    std::unordered_set<int32_t> seen(history.begin(), history.end());
    for (int32_t id : seen) {
      if (id < 0 || id >= n) continue;
      float& l = logits[static_cast<size_t>(id)];
      l = l > 0 ? l / options_.repetition_penalty : l * options_.repetition_penalty;
    }
  }
  if (options_.temperature == 0.0f) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i) {
      if (logits[static_cast<size_t>(i)] > logits[static_cast<size_t>(best)]) best = i;
    }
    return best;
  }
  // Candidates sorted by logit (top-k first, so the sort is partial). For any temperature > 0 this
  // is the order of logit / temperature, and it stays defined where that quotient overflows.
  candidates_.clear();
  for (int32_t i = 0; i < n; ++i) {
    const float l = logits[static_cast<size_t>(i)];
    if (!std::isnan(l)) candidates_.emplace_back(l, i);
  }
  if (candidates_.empty()) return 0;
  size_t keep = candidates_.size();
  if (options_.top_k > 0) keep = std::min(keep, static_cast<size_t>(options_.top_k));
  auto by_logit = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep), candidates_.end(),
                    by_logit);
  candidates_.resize(keep);
  // Softmax over the kept candidates (probabilities in .first from here on): the weight of logit l
  // is exp((l - top) / temperature), computed in float64, where neither the difference of two floats
  // nor its quotient by a temperature as small as the smallest float overflows. Logits equal to the
  // top one weigh 1 (two +inf logits too, where inf - inf would be NaN); a finite logit below a
  // +inf one, or any logit once the temperature makes the gap overwhelming, weighs 0.
  const double top = candidates_[0].first, temperature = options_.temperature;
  double total = 0;
  for (auto& c : candidates_) {
    const double l = c.first;
    c.first = l == top ? 1.0f : static_cast<float>(std::exp((l - top) / temperature));
    total += c.first;
  }
  for (auto& c : candidates_) c.first = static_cast<float>(c.first / total);
  // Sorted by logit, the probabilities do not increase: tokens that cannot be drawn leave from the
  // back (the top one has at least 1 / keep), so that the draw's last resort, when rounding leaves
  // something in r, is a token that may be drawn.
  while (candidates_.back().first == 0.0f) candidates_.pop_back();
  // min-p: relative to the most likely token.
  if (options_.min_p > 0) {
    const float floor = options_.min_p * candidates_[0].first;
    size_t k = 1;
    while (k < candidates_.size() && candidates_[k].first >= floor) ++k;
    candidates_.resize(k);
  }
  // top-p: the smallest prefix whose mass reaches top_p.
  if (options_.top_p < 1) {
    double mass = 0;
    size_t k = 0;
    while (k < candidates_.size()) {
      mass += candidates_[k++].first;
      if (mass >= options_.top_p) break;
    }
    candidates_.resize(k);
  }
  double sum = 0;
  for (const auto& c : candidates_) sum += c.first;
  double r = std::uniform_real_distribution<double>(0.0, sum)(rng_);
  for (const auto& c : candidates_) {
    r -= c.first;
    if (r < 0) return c.second;
  }
  return candidates_.back().second;
}

}  // namespace kiln::llm
