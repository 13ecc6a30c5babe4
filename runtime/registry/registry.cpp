// The process-wide kernel and backend registries. They are defined here, in
// libkiln.so.0 only; every other library registers through register_kernel /
// register_backend and so shares them.
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "kiln/registry.h"
#include "registry/registry_internal.h"

namespace kiln {
namespace internal {
namespace {

struct Registry {
  std::shared_mutex mutex;
  // deques keep entry addresses stable as they grow.
  std::deque<KernelEntry> kernels;
  // "op|sig" -> one entry per tier, highest tier first.
  std::unordered_map<std::string, std::vector<const KernelEntry*>> kernel_index;
  std::deque<BackendEntry> backends;
  std::unordered_map<std::string, const BackendEntry*> backend_index;
  std::vector<RegistrationRecord> log;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: plugins may register during exit
  return *r;
}

std::string kernel_key(const std::string& op, const std::string& sig) { return op + "|" + sig; }

// Splits "a|b" into alternatives and canonicalizes each ("f32, f32" -> "f32,f32").
Status parse_signatures(const char* spec, std::vector<std::string>* out) {
  std::string all(spec);
  size_t start = 0;
  while (start <= all.size()) {
    size_t bar = all.find('|', start);
    std::string alt = all.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    alt.erase(std::remove(alt.begin(), alt.end(), ' '), alt.end());
    if (alt != "*" && !alt.empty()) {
      size_t p = 0;
      while (p <= alt.size()) {
        size_t comma = alt.find(',', p);
        std::string name = alt.substr(p, comma == std::string::npos ? std::string::npos : comma - p);
        ScalarType t;
        if (!parse_scalar_type(name.c_str(), &t)) {
          return Status(Error::InvalidArgument, format("unknown dtype '%s' in signature '%s'", name.c_str(), spec));
        }
        if (comma == std::string::npos) break;
        p = comma + 1;
      }
    }
    out->push_back(alt);
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return Status::ok();
}

Status abi_check(uint32_t abi, const std::string& what, const std::string& library) {
  KILN_CHECK_OR_RETURN(abi == KILN_ABI_VERSION, AbiMismatch,
                       "%s from %s was built for kiln ABI %u, this runtime is ABI %d", what.c_str(), library.c_str(),
                       abi, KILN_ABI_VERSION);
  return Status::ok();
}

}  // namespace

std::string library_of(const void* address) {
  Dl_info info;
  if (address != nullptr && dladdr(address, &info) != 0 && info.dli_fname != nullptr && info.dli_fname[0] != '\0') {
    return info.dli_fname;
  }
  return "<unknown>";
}

std::string signature_string(const std::vector<ScalarType>& dtypes) {
  std::string s;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    if (i) s += ",";
    s += scalar_type_name(dtypes[i]);
  }
  return s;
}

std::vector<const KernelEntry*> find_kernels(const std::string& op_name, const std::vector<ScalarType>& dtypes) {
  Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  std::vector<const KernelEntry*> out;
  for (const std::string& sig : {signature_string(dtypes), std::string("*")}) {
    auto it = r.kernel_index.find(kernel_key(op_name, sig));
    if (it != r.kernel_index.end()) out.insert(out.end(), it->second.begin(), it->second.end());
  }
  // Highest tier first; within a tier the exact signature (inserted first)
  // stays first: an insertion sort is stable, and the lists are tiny.
  for (size_t i = 1; i < out.size(); ++i) {
    for (size_t j = i; j > 0 && out[j - 1]->tier < out[j]->tier; --j) std::swap(out[j - 1], out[j]);
  }
  return out;
}

const BackendEntry* find_backend(const std::string& name) {
  Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  auto it = r.backend_index.find(name);
  return it != r.backend_index.end() ? it->second : nullptr;
}

size_t registration_count() {
  Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  return r.log.size();
}

std::vector<RegistrationRecord> registrations_since(size_t first) {
  Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  if (first >= r.log.size()) return {};
  return std::vector<RegistrationRecord>(r.log.begin() + static_cast<std::ptrdiff_t>(first), r.log.end());
}

}  // namespace internal

using internal::registry;

Status register_kernel(const KernelDef& def) noexcept {
  internal::Registry& r = registry();
  std::string library = internal::library_of(reinterpret_cast<const void*>(def.run));
  std::string op = def.op_name != nullptr ? def.op_name : "";
  std::string what = "kernel " + op + " [" + (def.dtypes != nullptr ? def.dtypes : "") + "]";
  if (def.tier != kTierPortable) what += format(" at tier %d", def.tier);

  Status status = internal::abi_check(def.abi_version, what, library);
  std::vector<std::string> sigs;
  if (status.is_ok() && (op.empty() || def.dtypes == nullptr || def.run == nullptr)) {
    status =
        Status(Error::InvalidArgument, what + " from " + library + " lacks an operator name, dtypes or run function");
  }
  if (status.is_ok() && def.tier < kTierPortable) {
    status = Status(Error::InvalidArgument, what + " from " + library + " has a negative tier");
  }
  if (status.is_ok()) status = internal::parse_signatures(def.dtypes, &sigs);

  std::unique_lock<std::shared_mutex> lock(r.mutex);
  if (status.is_ok()) {
    // All alternatives or none: a partial registration would be hard to reason about.
    for (const std::string& sig : sigs) {
      auto it = r.kernel_index.find(internal::kernel_key(op, sig));
      if (it == r.kernel_index.end()) continue;
      for (const internal::KernelEntry* other : it->second) {
        if (other->tier != def.tier) continue;
        status = Status(Error::RegistrationConflict,
                        format("kernel %s [%s] at tier %d from %s collides with the one registered by %s; "
                               "the first registration is kept",
                               op.c_str(), sig.c_str(), def.tier, library.c_str(), other->library.c_str()));
        break;
      }
      if (!status.is_ok()) break;
    }
  }
  if (!status.is_ok()) {
    internal::RegistrationRecord rec{
        true, {op, def.dtypes ? def.dtypes : "", library, def.tier}, {}, false, {what, library, status}};
    r.log.push_back(rec);
    return status;
  }
  for (const std::string& sig : sigs) {
    r.kernels.push_back({op, sig, def.run, def.prepare, def.release, library, def.tier});
    auto& tiers = r.kernel_index[internal::kernel_key(op, sig)];
    tiers.push_back(&r.kernels.back());
    std::sort(tiers.begin(), tiers.end(),
              [](const internal::KernelEntry* a, const internal::KernelEntry* b) { return a->tier > b->tier; });
    r.log.push_back({true, {op, sig, library, def.tier}, {}, true, {}});
  }
  return Status::ok();
}

Status register_backend(const BackendDef& def) noexcept {
  internal::Registry& r = registry();
  std::string library = internal::library_of(reinterpret_cast<const void*>(def.execute));
  std::string name = def.name != nullptr ? def.name : "";
  std::string what = "backend " + name;

  Status status = internal::abi_check(def.abi_version, what, library);
  if (status.is_ok() && (name.empty() || def.init == nullptr || def.execute == nullptr)) {
    status = Status(Error::InvalidArgument, what + " from " + library + " lacks a name, init or execute function");
  }
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  if (status.is_ok()) {
    auto it = r.backend_index.find(name);
    if (it != r.backend_index.end()) {
      status =
          Status(Error::RegistrationConflict, format("backend '%s' from %s collides with the one registered by %s; "
                                                     "the first registration is kept",
                                                     name.c_str(), library.c_str(), it->second->library.c_str()));
    }
  }
  if (!status.is_ok()) {
    r.log.push_back({false, {}, {name, library}, false, {what, library, status}});
    return status;
  }
  r.backends.push_back({def, name, library});
  r.backend_index.emplace(name, &r.backends.back());
  r.log.push_back({false, {}, {name, library}, true, {}});
  return Status::ok();
}

const char* kernel_tier_name(int32_t tier) noexcept {
#define KILN_KERNEL_TIER_NAME_(Enum, name, value) \
  if (tier == value) return name;
  KILN_KERNEL_TIER_LIST(KILN_KERNEL_TIER_NAME_)
#undef KILN_KERNEL_TIER_NAME_
  return nullptr;
}

std::vector<KernelInfo> registered_kernels() {
  internal::Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  std::vector<KernelInfo> out;
  out.reserve(r.kernels.size());
  for (const auto& k : r.kernels) out.push_back({k.op_name, k.dtypes, k.library, k.tier});
  return out;
}

std::vector<BackendInfo> registered_backends() {
  internal::Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  std::vector<BackendInfo> out;
  for (const auto& b : r.backends) out.push_back({b.name, b.library});
  return out;
}

std::vector<RegistrationFailure> registration_failures() {
  internal::Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  std::vector<RegistrationFailure> out;
  for (const auto& rec : r.log) {
    if (!rec.accepted) out.push_back(rec.failure);
  }
  return out;
}

}  // namespace kiln
