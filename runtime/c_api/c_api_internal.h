// What the project's extension libraries share with the C API to offer C tables of their own
// (libkiln_llm.so.0's kiln/llm/c_api.h): statuses the core's status_free frees, and the options a
// kiln_load_options handle holds. Exported under KILN_INTERNAL_0 (runtime/kiln.map), not API.
#pragma once

#include <string>

#include "kiln/c_api.h"
#include "kiln/error.h"
#include "kiln/program.h"

namespace kiln::c_internal {

// A status of `status`'s code and message; nullptr for success. Never throws: without memory,
// the preallocated out-of-memory status.
KILN_API kiln_status* make_status(const Status& status) noexcept;
// `options`'s LoadOptions into *out (the defaults for NULL); a status for a bad or freed handle.
KILN_API kiln_status* read_load_options(const kiln_load_options* options, const char* function,
                                        LoadOptions* out) noexcept;

}  // namespace kiln::c_internal
