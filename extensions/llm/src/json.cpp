// The JSON reader and writer of kiln::llm (json.h).
#include "json.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "unicode.h"

namespace kiln::llm::internal {
namespace {

constexpr int kMaxDepth = 64;

struct Parser {
  std::string_view s;
  const char* what;
  size_t pos = 0;

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

  bool hex4(uint32_t* out) {
    if (pos + 4 > s.size()) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s[pos + i];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else return false;
    }
    pos += 4;
    *out = v;
    return true;
  }

  Status string(std::string* out) {
    ++pos;  // the opening quote
    while (true) {
      if (pos >= s.size()) return fail("unterminated string");
      char c = s[pos];
      if (c == '"') {
        ++pos;
        return Status::ok();
      }
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        out->push_back(c);
        ++pos;
        continue;
      }
      if (++pos >= s.size()) return fail("unterminated escape");
      char e = s[pos++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp;
          if (!hex4(&cp)) return fail("bad \\u escape");
          if (cp >= 0xD800 && cp < 0xDC00) {  // a high surrogate needs its low half
            uint32_t lo;
            if (s.substr(pos, 2) != "\\u" || (pos += 2, !hex4(&lo)) || lo < 0xDC00 || lo >= 0xE000) {
              return fail("unpaired surrogate in a \\u escape");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            return fail("unpaired surrogate in a \\u escape");
          }
          append_utf8(*out, cp);
          break;
        }
        default: return fail("unknown escape");
      }
    }
  }

  Status number(double* out) {
    size_t start = pos;
    if (pos < s.size() && s[pos] == '-') ++pos;
    while (pos < s.size() && ((s[pos] >= '0' && s[pos] <= '9') || s[pos] == '.' || s[pos] == 'e' ||
                              s[pos] == 'E' || s[pos] == '+' || s[pos] == '-')) {
      ++pos;
    }
    if (pos == start || pos - start > 64) return fail("bad number");
    std::string text(s.substr(start, pos - start));
    char* end = nullptr;
    *out = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !std::isfinite(*out)) return fail("bad number");
    return Status::ok();
  }

  Status value(Json* out, int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    skip_ws();
    if (pos >= s.size()) return fail("unexpected end");
    char c = s[pos];
    if (c == '{') {
      out->kind = Json::Kind::Object;
      ++pos;
      skip_ws();
      if (pos < s.size() && s[pos] == '}') {
        ++pos;
        return Status::ok();
      }
      while (true) {
        skip_ws();
        if (pos >= s.size() || s[pos] != '"') return fail("expected a key");
        std::string key;
        KILN_RETURN_IF_ERROR(string(&key));
        skip_ws();
        if (pos >= s.size() || s[pos] != ':') return fail("expected ':'");
        ++pos;
        out->members.emplace_back(std::move(key), Json());
        KILN_RETURN_IF_ERROR(value(&out->members.back().second, depth + 1));
        skip_ws();
        if (pos < s.size() && s[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < s.size() && s[pos] == '}') {
          ++pos;
          return Status::ok();
        }
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      out->kind = Json::Kind::Array;
      ++pos;
      skip_ws();
      if (pos < s.size() && s[pos] == ']') {
        ++pos;
        return Status::ok();
      }
      while (true) {
        out->items.emplace_back();
        KILN_RETURN_IF_ERROR(value(&out->items.back(), depth + 1));
        skip_ws();
        if (pos < s.size() && s[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < s.size() && s[pos] == ']') {
          ++pos;
          return Status::ok();
        }
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      out->kind = Json::Kind::String;
      return string(&out->str);
    }
    if (literal("true")) {
      out->kind = Json::Kind::Bool;
      out->b = true;
      return Status::ok();
    }
    if (literal("false")) {
      out->kind = Json::Kind::Bool;
      return Status::ok();
    }
    if (literal("null")) return Status::ok();
    out->kind = Json::Kind::Number;
    return number(&out->num);
  }
};

}  // namespace

const Json* Json::get(std::string_view key) const {
  const Json* found = nullptr;
  for (const auto& m : members) {
    if (m.first == key) found = &m.second;
  }
  return found;
}

bool Json::as_int(int64_t* out) const {
  if (kind != Kind::Number || !(num >= -9.2e18 && num <= 9.2e18) || std::floor(num) != num) return false;
  *out = static_cast<int64_t>(num);
  return true;
}

Result<Json> parse_json(std::string_view text, const char* what) {
  Parser p{text, what};
  Json root;
  KILN_RETURN_IF_ERROR(p.value(&root, 0));
  p.skip_ws();
  if (p.pos != text.size()) return p.fail("trailing characters");
  return root;
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
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
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace kiln::llm::internal
