// The process-wide log hook (one of the runtime's process-wide states).
#include "kiln/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace kiln {
namespace {

struct LogState {
  std::mutex mutex;
  LogHandler handler = nullptr;
  void* user_data = nullptr;
};

LogState& log_state() {
  static LogState state;  // in libkiln.so.0 only: one per process
  return state;
}

LogLevel threshold() {
  static const LogLevel level = [] {
    const char* env = std::getenv("KILN_LOG_LEVEL");
    if (env == nullptr) return LogLevel::Warning;
    switch (env[0]) {
      case 'd':
      case 'D':
      case '0': return LogLevel::Debug;
      case 'i':
      case 'I':
      case '1': return LogLevel::Info;
      case 'e':
      case 'E':
      case '3': return LogLevel::Error;
      default: return LogLevel::Warning;
    }
  }();
  return level;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warning: return "warning";
    case LogLevel::Error: return "error";
  }
  return "?";
}

}  // namespace

void set_log_handler(LogHandler handler, void* user_data) noexcept {
  LogState& s = log_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.handler = handler;
  s.user_data = user_data;
}

void log(LogLevel level, const char* fmt, ...) noexcept {
  char buffer[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buffer, sizeof(buffer), fmt, args);
  va_end(args);
  LogState& s = log_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.handler != nullptr) {
    s.handler(level, buffer, s.user_data);
  } else if (level >= threshold()) {
    std::fprintf(stderr, "kiln %s: %s\n", level_name(level), buffer);
  }
}

}  // namespace kiln
