// A small JSON reader and writer for tokenizer.json and the LLM metadata. Input is untrusted:
// depth and sizes are bounded, every error names the byte offset.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/error.h"

namespace kiln::llm::internal {

struct Json {
  enum class Kind : uint8_t { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool b = false;
  double num = 0.0;
  std::string str;
  std::vector<Json> items;                          // Array
  std::vector<std::pair<std::string, Json>> members;  // Object, in file order

  bool is_null() const { return kind == Kind::Null; }
  bool is_string() const { return kind == Kind::String; }
  bool is_number() const { return kind == Kind::Number; }
  bool is_bool() const { return kind == Kind::Bool; }
  bool is_array() const { return kind == Kind::Array; }
  bool is_object() const { return kind == Kind::Object; }
  // The member `key` of an object (the last one if repeated), or nullptr.
  const Json* get(std::string_view key) const;
  // An integral number that fits int64 (false otherwise).
  bool as_int(int64_t* out) const;
};

// `what` names the document in error messages ("tokenizer.json").
Result<Json> parse_json(std::string_view text, const char* what);

// JSON string literal (with quotes) of UTF-8 `s`.
std::string json_quote(std::string_view s);

}  // namespace kiln::llm::internal
