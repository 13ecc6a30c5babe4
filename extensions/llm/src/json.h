// A small JSON reader and writer for tokenizer.json and the LLM metadata. Input is untrusted:
// depth and sizes are bounded, every error names the byte offset, and a document costs
// at most about 9 bytes of memory per byte of its text (the parse counts first, then
// allocates exactly: one 16-byte node per value and one buffer for the strings).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kiln/error.h"

namespace kiln::llm::internal {

// One value of a JsonDocument. Nodes lie in document order in one array: a
// container's children follow it, and `span_` counts the nodes of its subtree,
// so a sibling is found by skipping it. Only JsonDocument makes them.
class Json {
 public:
  enum class Kind : uint8_t { Null, Bool, Number, String, Array, Object };

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Number; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_object() const { return kind_ == Kind::Object; }

  bool b() const { return b_; }
  double num() const { return kind_ == Kind::Number ? u_.num : 0.0; }
  std::string_view str() const {
    return kind_ == Kind::String ? std::string_view(u_.chars, span_) : std::string_view();
  }
  // An integral number that fits int64 (false otherwise).
  bool as_int(int64_t* out) const;
  // Items of an array, members of an object (0 otherwise).
  size_t size() const { return is_array() || is_object() ? static_cast<size_t>(u_.count) : 0; }

  // The member `key` of an object (the last one if repeated), or nullptr.
  const Json* get(std::string_view key) const;

  // Items of an array, in order: `for (const Json& item : array.items())`.
  struct ItemIterator {
    const Json* node;
    const Json& operator*() const { return *node; }
    ItemIterator& operator++() {
      node = node->next();
      return *this;
    }
    bool operator!=(const ItemIterator& o) const { return node != o.node; }
  };
  struct Items {
    const Json* first;
    const Json* last;
    ItemIterator begin() const { return {first}; }
    ItemIterator end() const { return {last}; }
  };
  Items items() const { return is_array() ? Items{this + 1, next()} : Items{this + 1, this + 1}; }

  // Members of an object, in file order: `for (const auto& [key, value] : object.members())`.
  struct Member {
    std::string_view key;
    const Json& value;
  };
  struct MemberIterator {
    const Json* key;
    Member operator*() const { return {key->str(), key[1]}; }
    MemberIterator& operator++() {
      key = key[1].next();
      return *this;
    }
    bool operator!=(const MemberIterator& o) const { return key != o.key; }
  };
  struct Members {
    const Json* first;
    const Json* last;
    MemberIterator begin() const { return {first}; }
    MemberIterator end() const { return {last}; }
  };
  Members members() const { return is_object() ? Members{this + 1, next()} : Members{this + 1, this + 1}; }

 private:
  friend struct JsonParser;
  // The node after this value's subtree.
  const Json* next() const { return this + 1 + (is_array() || is_object() ? span_ : 0); }

  Kind kind_ = Kind::Null;
  bool b_ = false;
  uint32_t span_ = 0;  // String: its length; Array/Object: the nodes of its subtree
  union {
    double num;
    const char* chars;  // String: in the document's string buffer
    uint64_t count;     // Array: items; Object: members
  } u_{0.0};
};
static_assert(sizeof(Json) == 16, "a JSON value is one 16-byte node");

// A parsed document: its nodes and the (unescaped) bytes of its strings.
class JsonDocument {
 public:
  const Json& root() const { return nodes_[0]; }

 private:
  friend struct JsonParser;
  friend Result<JsonDocument> parse_json(std::string_view text, const char* what);
  std::unique_ptr<Json[]> nodes_;
  std::unique_ptr<char[]> chars_;
};

// `what` names the document in error messages ("tokenizer.json").
Result<JsonDocument> parse_json(std::string_view text, const char* what);

// JSON string literal (with quotes) of `s`. Valid UTF-8 is kept; each byte of
// an invalid sequence becomes the escape \udcXX (U+DC00 + the byte, Python's
// "surrogateescape"), which parse_json turns back into that byte, so that any
// bytes survive a round trip and the output is always valid UTF-8.
std::string json_quote(std::string_view s);

}  // namespace kiln::llm::internal
