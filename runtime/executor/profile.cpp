// Profile: the table of the costliest operators and the Chrome trace of profiled calls.
#include "kiln/profile.h"

#include <algorithm>
#include <map>
#include <string>

#include "kiln/kernel.h"
#include "kiln/registry.h"

namespace kiln {
namespace {

std::string shape_text(const ProfiledShape& s) {
  std::string out = std::string(scalar_type_name(s.dtype)) + "[";
  for (size_t d = 0; d < s.sizes.size(); ++d) out += (d ? ", " : "") + std::to_string(s.sizes[d]);
  return out + "]";
}

std::string shapes_text(const ProfiledInstruction& r) {
  std::string out;
  for (const ProfiledShape& s : r.inputs) out += (out.empty() ? "" : ", ") + shape_text(s);
  out += out.empty() ? "-> " : " -> ";
  for (size_t i = 0; i < r.outputs.size(); ++i) out += (i ? ", " : "") + shape_text(r.outputs[i]);
  return out;
}

std::string basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "optimized", "portable (libmy_ops.so)", "backend (libx.so)", "runtime" (moves, int ops).
std::string served_by(const InstructionInfo& info) {
  if (info.kind != "kernel" && info.kind != "backend") return "runtime";
  const char* tier = kernel_tier_name(info.tier);
  std::string what = info.kind == "backend" ? "backend" : tier != nullptr ? tier : "tier " + std::to_string(info.tier);
  if (basename(info.library) != basename(runtime_library_path())) what += " (" + basename(info.library) + ")";
  return what;
}

std::string ms(double ns) { return format("%.3f ms", ns / 1e6); }

// A JSON string literal. Bytes outside ASCII are escaped one by one, so that
// the document is valid UTF-8 whatever a file's operator names hold.
std::string json(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out += format("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

uint64_t Profile::call_ns() const {
  uint64_t total = 0;
  for (const ProfiledCall& c : calls) total += c.end_ns - c.start_ns;
  return total;
}

uint64_t Profile::instruction_ns() const {
  uint64_t total = 0;
  for (const ProfiledInstruction& r : records) total += r.end_ns - r.start_ns;
  return total;
}

void Profile::clear() {
  method.clear();
  instructions.clear();
  calls.clear();
  records.clear();
  chunks.clear();
}

std::string Profile::table(size_t top) const {
  if (calls.empty()) return "no profiled calls\n";
  struct Row {
    std::string op, kernel;
    uint64_t ns = 0;
    size_t count = 0;
    const ProfiledInstruction* costliest = nullptr;
  };
  std::map<std::pair<std::string, std::string>, Row> rows;
  for (const ProfiledInstruction& r : records) {
    const InstructionInfo& info = instructions.at(r.index);
    std::string kernel = served_by(info);
    Row& row = rows[{info.op, kernel}];
    row.op = info.op;
    row.kernel = kernel;
    row.ns += r.end_ns - r.start_ns;
    ++row.count;
    if (row.costliest == nullptr || r.end_ns - r.start_ns > row.costliest->end_ns - row.costliest->start_ns) {
      row.costliest = &r;
    }
  }
  std::vector<Row> sorted;
  for (auto& [key, row] : rows) sorted.push_back(row);
  std::sort(sorted.begin(), sorted.end(), [](const Row& a, const Row& b) { return a.ns > b.ns; });

  const double n = static_cast<double>(calls.size());
  const double total = static_cast<double>(instruction_ns()) / n;
  const double wall = static_cast<double>(call_ns()) / n;
  size_t op_width = 8, kernel_width = 6;
  for (size_t i = 0; i < sorted.size() && i < top; ++i) {
    op_width = std::max(op_width, sorted[i].op.size());
    kernel_width = std::max(kernel_width, sorted[i].kernel.size());
  }
  std::string out = format("method '%s': %zu call%s, %zu instructions per call; times are per call\n", method.c_str(),
                           calls.size(), calls.size() == 1 ? "" : "s", records.size() / calls.size());
  out += format("%12s %7s %6s  %-*s  %-*s  %s\n", "time", "share", "count", static_cast<int>(op_width), "operator",
                static_cast<int>(kernel_width), "kernel", "shapes of its costliest instruction");
  double rest_ns = 0;
  size_t rest_count = 0, rest_ops = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const Row& row = sorted[i];
    if (i >= top) {
      rest_ns += static_cast<double>(row.ns);
      rest_count += row.count;
      ++rest_ops;
      continue;
    }
    out += format("%12s %6.1f%% %6.0f  %-*s  %-*s  %s\n", ms(static_cast<double>(row.ns) / n).c_str(),
                  total > 0 ? 100.0 * static_cast<double>(row.ns) / n / total : 0.0, static_cast<double>(row.count) / n,
                  static_cast<int>(op_width), row.op.c_str(), static_cast<int>(kernel_width), row.kernel.c_str(),
                  shapes_text(*row.costliest).c_str());
  }
  if (rest_ops > 0) {
    out += format("%12s %6.1f%% %6.0f  (%zu more operator%s)\n", ms(rest_ns / n).c_str(),
                  total > 0 ? 100.0 * rest_ns / n / total : 0.0, static_cast<double>(rest_count) / n, rest_ops,
                  rest_ops == 1 ? "" : "s");
  }
  out += format("%12s %6.1f%% %6.0f  total of the instructions\n", ms(total).c_str(), 100.0,
                static_cast<double>(records.size()) / n);
  out += format("%12s %7s %6s  wall time of the call, first instruction to last (instructions: %.1f%% of it)\n",
                ms(wall).c_str(), "", "", wall > 0 ? 100.0 * total / wall : 0.0);
  return out;
}

std::string Profile::chrome_trace() const {
  uint64_t origin = UINT64_MAX;
  for (const ProfiledCall& c : calls) origin = std::min(origin, c.start_ns);
  auto us = [&](uint64_t ns) { return format("%.3f", static_cast<double>(ns - origin) / 1e3); };
  auto dur = [](uint64_t a, uint64_t b) { return format("%.3f", static_cast<double>(b - a) / 1e3); };
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  out +=
      "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": " + json("kiln method " + method) +
      "}}";
  int threads = 1;
  for (const ProfiledChunk& c : chunks) threads = std::max(threads, c.thread + 1);
  for (int t = 0; t < threads; ++t) {
    out += format(",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"args\": {\"name\": ", t) +
           json(t == 0 ? "calling thread" : format("pool worker %d", t)) + "}}";
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    out += ",\n{\"name\": " + json(method) +
           ", \"cat\": \"call\", \"ph\": \"X\", \"pid\": 1, \"tid\": 0, \"ts\": " + us(calls[i].start_ns) +
           ", \"dur\": " + dur(calls[i].start_ns, calls[i].end_ns) + format(", \"args\": {\"call\": %zu}}", i);
  }
  for (const ProfiledInstruction& r : records) {
    const InstructionInfo& info = instructions.at(r.index);
    out += ",\n{\"name\": " + json(info.op) + ", \"cat\": " + json(info.kind) +
           ", \"ph\": \"X\", \"pid\": 1, \"tid\": 0, \"ts\": " + us(r.start_ns) +
           ", \"dur\": " + dur(r.start_ns, r.end_ns) +
           format(", \"args\": {\"instruction\": %u, \"call\": %u, ", r.index, r.call) +
           "\"kernel\": " + json(served_by(info)) + ", \"library\": " + json(info.library) +
           format(", \"tier\": %d, ", info.tier) + "\"shapes\": " + json(shapes_text(r)) + "}}";
  }
  for (const ProfiledChunk& c : chunks) {
    out += ",\n{\"name\": " + json(instructions.at(c.index).op) + ", \"cat\": \"chunk\", \"ph\": \"X\", \"pid\": 1" +
           format(", \"tid\": %d, \"ts\": ", c.thread) + us(c.start_ns) + ", \"dur\": " + dur(c.start_ns, c.end_ns) +
           format(", \"args\": {\"instruction\": %u, \"call\": %u, \"parallel_for\": %u, ", c.index, c.call, c.job) +
           format("\"range\": \"[%lld, %lld) of %lld\"}}", static_cast<long long>(c.begin),
                  static_cast<long long>(c.end), static_cast<long long>(c.n));
  }
  return out + "\n]}\n";
}

}  // namespace kiln
