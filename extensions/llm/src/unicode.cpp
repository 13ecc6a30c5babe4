// UTF-8 decoding and the Unicode classes byte-level pre-tokenizers split on.
#include "unicode.h"

#include <algorithm>

namespace kiln::llm::internal {
namespace {

struct CodeRange {
  uint32_t first, last;
};
#include "unicode_tables.inc"

template <size_t N>
bool in_ranges(const CodeRange (&ranges)[N], uint32_t cp) {
  const CodeRange* end = ranges + N;
  const CodeRange* it = std::upper_bound(ranges, end, cp, [](uint32_t c, const CodeRange& r) { return c < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

bool white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Length of the valid sequence starting at p[0] (1..4), or 0 when invalid; with
// *need the length the lead byte asks for and *valid_prefix how many bytes
// (lead included) are a valid prefix of it.
size_t sequence(const unsigned char* p, size_t n, size_t* need, size_t* valid_prefix) {
  unsigned char c = p[0];
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c < 0x80) {
    *need = *valid_prefix = 1;
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    *need = 1;
    *valid_prefix = 0;
    return 0;
  }
  *need = len;
  size_t k = 1;
  for (; k < len && k < n; ++k) {
    unsigned char b = p[k];
    bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
  }
  *valid_prefix = k;
  return k == len ? len : 0;
}

}  // namespace

CharClass char_class(uint32_t cp) {
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return CharClass::Letter;
    if (cp >= '0' && cp <= '9') return CharClass::Number;
    return white_space(cp) ? CharClass::Space : CharClass::Other;
  }
  if (white_space(cp)) return CharClass::Space;
  if (in_ranges(kLetterRanges, cp)) return CharClass::Letter;
  if (in_ranges(kNumberRanges, cp)) return CharClass::Number;
  return CharClass::Other;
}

bool is_numeric(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(kNumericRanges, cp);
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

void decode_utf8(std::string_view s, std::vector<uint32_t>* cps, std::vector<size_t>* offsets) {
  cps->clear();
  offsets->clear();
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0, n = s.size();
  while (i < n) {
    size_t need, prefix;
    size_t len = sequence(p + i, n - i, &need, &prefix);
    offsets->push_back(i);
    if (len == 0) {
      cps->push_back(0xFFFD);
      i += 1;
      continue;
    }
    uint32_t cp = len == 1 ? p[i] : len == 2 ? (p[i] & 0x1F) : len == 3 ? (p[i] & 0x0F) : (p[i] & 0x07);
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (p[i + k] & 0x3F);
    cps->push_back(cp);
    i += len;
  }
  offsets->push_back(n);
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t i = 0, n = bytes.size();
  while (i < n) {
    size_t need, prefix;
    size_t len = sequence(p + i, n - i, &need, &prefix);
    if (len > 0) {
      out.append(bytes.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";  // one U+FFFD per maximal invalid subpart
      i += std::max<size_t>(prefix, 1);
    }
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size();
  // An unfinished character starts at one of the last three bytes.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    size_t i = n - back;
    if ((p[i] & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t need, prefix;
    size_t len = sequence(p + i, back, &need, &prefix);
    if (len == 0 && need > back && prefix == back) return i;  // valid so far, needs more bytes
    return n;
  }
  return n;
}

}  // namespace kiln::llm::internal
