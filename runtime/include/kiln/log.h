// Log hook: where the runtime's warnings and errors go (stderr unless replaced).
#pragma once

#include "kiln/api.h"

namespace kiln {

enum class LogLevel { Debug = 0, Info = 1, Warning = 2, Error = 3 };

using LogHandler = void (*)(LogLevel level, const char* message, void* user_data);

// Replaces the process-wide handler; nullptr restores the default (stderr,
// Warning and above, or the level in KILN_LOG_LEVEL).
KILN_API void set_log_handler(LogHandler handler, void* user_data) noexcept;
KILN_API void log(LogLevel level, const char* fmt, ...) noexcept __attribute__((format(printf, 2, 3)));

}  // namespace kiln
