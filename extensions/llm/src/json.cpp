// The JSON reader and writer of kiln::llm (json.h).
#include "json.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "unicode.h"

namespace kiln::llm::internal {

namespace {
constexpr int kMaxDepth = 64;
}  // namespace

// Parses twice: the first pass (nodes == nullptr) only counts the nodes and
// string bytes, so that the second writes into arrays allocated once at their
// exact size: memory follows what the text holds, never a growth factor.
struct JsonParser {
  std::string_view s;
  const char* what;
  Json* nodes = nullptr;
  char* chars = nullptr;
  size_t pos = 0;
  size_t n_nodes = 0;
  size_t n_chars = 0;

  Status fail(const char* msg) const {
    return Status(Error::InvalidArgument, format("%s: %s at byte %zu", what, msg, pos));
  }
  void skip_ws() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\n' || s[pos] == '\r' || s[pos] == '\t')) ++pos;
  }
  bool literal(const char* word) {
    size_t n = std::strlen(word);
    if (s.substr(pos, n) != word) return false;
    pos += n;
    return true;
  }
  void emit(char c) {
    if (chars != nullptr) chars[n_chars] = c;
    ++n_chars;
  }
  Json* node() {
    Json* n = nodes != nullptr ? &nodes[n_nodes] : nullptr;
    ++n_nodes;
    return n;
  }

  bool hex4(uint32_t* out) {
    if (pos + 4 > s.size()) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s[pos + i];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<uint32_t>(c - 'A' + 10);
      else
        return false;
    }
    pos += 4;
    *out = v;
    return true;
  }

  // Unescaping never lengthens a string, so the string bytes never exceed the text.
  Status string(Json* out) {
    ++pos;  // the opening quote
    const size_t start = n_chars;
    while (true) {
      if (pos >= s.size()) return fail("unterminated string");
      char c = s[pos];
      if (c == '"') {
        ++pos;
        break;
      }
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        emit(c);
        ++pos;
        continue;
      }
      if (++pos >= s.size()) return fail("unterminated escape");
      char e = s[pos++];
      switch (e) {
        case '"': emit('"'); break;
        case '\\': emit('\\'); break;
        case '/': emit('/'); break;
        case 'b': emit('\b'); break;
        case 'f': emit('\f'); break;
        case 'n': emit('\n'); break;
        case 'r': emit('\r'); break;
        case 't': emit('\t'); break;
        case 'u': {
          uint32_t cp;
          if (!hex4(&cp)) return fail("bad \\u escape");
          if (cp >= 0xD800 && cp < 0xDC00) {  // a high surrogate needs its low half
            uint32_t lo;
            if (s.substr(pos, 2) != "\\u" || (pos += 2, !hex4(&lo)) || lo < 0xDC00 || lo >= 0xE000) {
              return fail("unpaired surrogate in a \\u escape");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC80 && cp < 0xDD00) {
            emit(static_cast<char>(cp - 0xDC00));  // a byte of invalid UTF-8, as json_quote writes it
            break;
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            return fail("unpaired surrogate in a \\u escape");
          }
          std::string utf8;
          append_utf8(utf8, cp);
          for (char b : utf8) emit(b);
          break;
        }
        default: return fail("unknown escape");
      }
    }
    if (out != nullptr) {
      out->kind_ = Json::Kind::String;
      out->span_ = static_cast<uint32_t>(n_chars - start);
      out->u_.chars = chars + start;
    }
    return Status::ok();
  }

  Status number(Json* out) {
    size_t start = pos;
    if (pos < s.size() && s[pos] == '-') ++pos;
    while (pos < s.size() && ((s[pos] >= '0' && s[pos] <= '9') || s[pos] == '.' || s[pos] == 'e' || s[pos] == 'E' ||
                              s[pos] == '+' || s[pos] == '-')) {
      ++pos;
    }
    if (pos == start || pos - start > 64) return fail("bad number");
    char text[72];
    std::memcpy(text, s.data() + start, pos - start);
    text[pos - start] = '\0';
    char* end = nullptr;
    double v = std::strtod(text, &end);
    if (end != text + (pos - start) || !std::isfinite(v)) return fail("bad number");
    if (out != nullptr) {
      out->kind_ = Json::Kind::Number;
      out->u_.num = v;
    }
    return Status::ok();
  }

  // Children of an array or object; `object` reads "key": value pairs.
  Status container(Json* out, bool object, int depth) {
    const size_t first = n_nodes;
    const char close = object ? '}' : ']';
    uint64_t count = 0;
    ++pos;
    skip_ws();
    if (pos < s.size() && s[pos] == close) {
      ++pos;
    } else {
      while (true) {
        if (object) {
          skip_ws();
          if (pos >= s.size() || s[pos] != '"') return fail("expected a key");
          KILN_RETURN_IF_ERROR(string(node()));
          skip_ws();
          if (pos >= s.size() || s[pos] != ':') return fail("expected ':'");
          ++pos;
        }
        KILN_RETURN_IF_ERROR(value(depth + 1));
        ++count;
        skip_ws();
        if (pos < s.size() && s[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < s.size() && s[pos] == close) {
          ++pos;
          break;
        }
        return fail(object ? "expected ',' or '}'" : "expected ',' or ']'");
      }
    }
    if (out != nullptr) {
      out->kind_ = object ? Json::Kind::Object : Json::Kind::Array;
      out->span_ = static_cast<uint32_t>(n_nodes - first);
      out->u_.count = count;
    }
    return Status::ok();
  }

  Status value(int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    skip_ws();
    if (pos >= s.size()) return fail("unexpected end");
    Json* out = node();
    char c = s[pos];
    if (c == '{' || c == '[') return container(out, c == '{', depth);
    if (c == '"') return string(out);
    const bool is_true = literal("true");
    if (is_true || literal("false")) {
      if (out != nullptr) {
        out->kind_ = Json::Kind::Bool;
        out->b_ = is_true;
      }
      return Status::ok();
    }
    if (literal("null")) return Status::ok();
    return number(out);
  }

  Status document() {
    KILN_RETURN_IF_ERROR(value(0));
    skip_ws();
    if (pos != s.size()) return fail("trailing characters");
    return Status::ok();
  }
};

const Json* Json::get(std::string_view key) const {
  const Json* found = nullptr;
  for (const auto& [k, v] : members()) {
    if (k == key) found = &v;
  }
  return found;
}

bool Json::as_int(int64_t* out) const {
  const double v = num();
  if (kind_ != Kind::Number || !(v >= -9.2e18 && v <= 9.2e18) || std::floor(v) != v) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

Result<JsonDocument> parse_json(std::string_view text, const char* what) {
  // Node spans and string lengths are 32-bit.
  KILN_CHECK_OR_RETURN(text.size() < UINT32_MAX, InvalidArgument, "%s: %zu bytes is more than a JSON document may have",
                       what, text.size());
  JsonParser count{text, what};
  KILN_RETURN_IF_ERROR(count.document());
  JsonDocument doc;
  doc.nodes_.reset(new (std::nothrow) Json[count.n_nodes]);
  doc.chars_.reset(new (std::nothrow) char[count.n_chars > 0 ? count.n_chars : 1]);
  KILN_CHECK_OR_RETURN(doc.nodes_ != nullptr && doc.chars_ != nullptr, OutOfMemory,
                       "%s: cannot allocate %zu values and %zu bytes of strings", what, count.n_nodes, count.n_chars);
  JsonParser build{text, what, doc.nodes_.get(), doc.chars_.get()};
  Status st = build.document();
  KILN_CHECK_OR_RETURN(st.is_ok() && build.n_nodes == count.n_nodes && build.n_chars == count.n_chars, Internal,
                       "%s: the second JSON pass disagrees with the first", what);
  return doc;
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::vector<uint32_t> cps;
  std::vector<size_t> offsets;
  decode_utf8(s, &cps, &offsets);
  for (size_t k = 0; k < cps.size(); ++k) {
    const size_t at = offsets[k], len = offsets[k + 1] - at;
    const unsigned char c = p[at];
    if (cps[k] == 0xFFFD && len == 1 && c >= 0x80) {  // a byte decode_utf8 could not place in a character
      out += format("\\udc%02x", c);
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += format("\\u%04x", c);
        } else {
          out.append(s.data() + at, len);
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace kiln::llm::internal
