// Byte-level BPE and SentencePiece: loading (tokenizer.json, GGUF), encoding, decoding and streaming decoding.
#include "kiln/llm/tokenizer.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "file.h"
#include "json.h"
#include "kiln/llm/gguf.h"
#include "unicode.h"

namespace kiln::llm {

namespace internal {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
};

// The Split patterns kiln knows (each has a hand-written splitter).
enum class SplitPattern : uint8_t { Llama3, Qwen2 };

// A pre-tokenizer step, applied in order to every piece.
struct PreStep {
  enum Kind { Digits, ByteLevel, Split } kind;
  bool individual_digits = false;               // Digits
  bool add_prefix_space = false;                // ByteLevel
  bool use_regex = true;                        // ByteLevel
  SplitPattern pattern = SplitPattern::Llama3;  // Split (behavior Isolated)
};

struct TokenizerData {
  std::vector<std::string> tokens;  // id -> vocabulary spelling
  std::unordered_map<std::string, int32_t> ids;
  std::vector<std::string> bytes;  // id -> bytes it decodes to
  std::vector<uint8_t> special;    // id -> special added token
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;
  std::vector<std::pair<int32_t, int32_t>> merge_list;    // rank -> (left, right), for to_json
  std::vector<AddedToken> added;                          // in id order
  std::vector<std::vector<int32_t>> added_by_first_byte;  // indices into `added`, longest first
  std::vector<PreStep> pre;
  bool ignore_merges = false;
  int32_t unk_id = -1;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  std::string byte_char[256];                       // byte -> UTF-8 of its byte-level character
  std::unordered_map<uint32_t, uint8_t> char_byte;  // byte-level code point -> byte
  // SentencePiece: spaces are U+2581, bytes without a token of their own are
  // <0xXX> tokens, no pre-tokenizer. From GGUF (tokenizer.ggml.model "llama"),
  // llama.cpp's SPM encoder merges by score; from tokenizer.json (Hugging Face's
  // form of it: BPE with byte_fallback), `tokenizers` merges by rank.
  bool spm = false;
  bool spm_by_rank = false;          // the tokenizer.json form
  bool add_space_prefix = false;     // SPM: U+2581 before the text
  bool strip_leading_space = false;  // SPM: decode drops the first text's leading space
  bool fuse_unk = false;             // tokenizer.json form: consecutive unknown characters give one unknown token
  std::vector<float> scores;         // SPM from GGUF: id -> score (the merge of highest score goes first)
  int32_t byte_ids[256];             // SPM: byte -> its <0xXX> token, or -1
};

}  // namespace internal

namespace {

using internal::AddedToken;
using internal::CharClass;
using internal::Json;
using internal::PreStep;
using internal::TokenizerData;

// The largest tokenizer.json from_json_file reads (the biggest real ones are
// tens of MB); parsing costs at most about 9 bytes per byte (json.h).
constexpr uint64_t kMaxJsonFileBytes = uint64_t{256} << 20;

// GPT-2's reversible map from bytes to printable characters.
void build_byte_alphabet(TokenizerData& d) {
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + extra++);
    d.byte_char[b].clear();
    internal::append_utf8(d.byte_char[b], cp);
    d.char_byte[cp] = static_cast<uint8_t>(b);
  }
}

// What a token decodes to: its byte-level characters as bytes, or (like the
// ByteLevel decoder of `tokenizers`) its own text when some character is not
// in the byte-level alphabet.
std::string token_to_bytes(const TokenizerData& d, const std::string& token) {
  std::vector<uint32_t> cps;
  std::vector<size_t> offsets;
  internal::decode_utf8(token, &cps, &offsets);
  std::string out;
  for (uint32_t cp : cps) {
    auto it = d.char_byte.find(cp);
    if (it == d.char_byte.end()) return token;
    out += static_cast<char>(it->second);
  }
  return out;
}

// Everything derived from tokens, merges and added tokens.
Status finish(TokenizerData& d, const std::vector<std::pair<std::string, std::string>>& merges) {
  build_byte_alphabet(d);
  d.ids.clear();
  d.ids.reserve(d.tokens.size());
  for (size_t i = 0; i < d.tokens.size(); ++i) d.ids.emplace(d.tokens[i], static_cast<int32_t>(i));
  d.special.assign(d.tokens.size(), 0);
  for (const auto& a : d.added) {
    if (a.special) d.special[static_cast<size_t>(a.id)] = 1;
  }
  d.bytes.resize(d.tokens.size());
  for (size_t i = 0; i < d.tokens.size(); ++i) d.bytes[i] = token_to_bytes(d, d.tokens[i]);
  d.merges.reserve(merges.size());
  d.merge_list.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    auto a = d.ids.find(merges[r].first), b = d.ids.find(merges[r].second);
    auto m = d.ids.find(merges[r].first + merges[r].second);
    KILN_CHECK_OR_RETURN(a != d.ids.end() && b != d.ids.end() && m != d.ids.end(), InvalidArgument,
                         "tokenizer: merge %zu ('%s' '%s') names a token missing from the vocabulary", r,
                         merges[r].first.c_str(), merges[r].second.c_str());
    uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(a->second)) << 32) | static_cast<uint32_t>(b->second);
    d.merges.emplace(key, std::make_pair(static_cast<int32_t>(r), m->second));  // the first (best) rank wins
    d.merge_list.emplace_back(a->second, b->second);
  }
  d.added_by_first_byte.assign(256, {});
  for (size_t i = 0; i < d.added.size(); ++i) {
    KILN_CHECK_OR_RETURN(!d.added[i].content.empty(), InvalidArgument, "tokenizer: added token %d is empty",
                         d.added[i].id);
    d.added_by_first_byte[static_cast<unsigned char>(d.added[i].content[0])].push_back(static_cast<int32_t>(i));
  }
  for (auto& bucket : d.added_by_first_byte) {
    std::stable_sort(bucket.begin(), bucket.end(),
                     [&](int32_t x, int32_t y) { return d.added[x].content.size() > d.added[y].content.size(); });
  }
  return Status::ok();
}

// The split regexes of Llama 3 (tokenizer.ggml.pre "llama-bpe") and Qwen2 ("qwen2"), as
// their tokenizer.json files spell them; they differ only in the digits taken at once.
constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char* pattern_text(internal::SplitPattern p) {
  return p == internal::SplitPattern::Llama3 ? kLlama3Pattern : kQwen2Pattern;
}

// A Split pre-tokenizer: one of the known patterns, behavior Isolated, not inverted.
Status parse_split(const Json& node, std::vector<PreStep>* steps) {
  const Json* pattern = node.get("pattern");
  const Json* regex = pattern && pattern->is_object() ? pattern->get("Regex") : nullptr;
  KILN_CHECK_OR_RETURN(regex && regex->is_string(), NotSupported,
                       "tokenizer.json: a Split pre_tokenizer without a Regex pattern is not supported");
  const Json* behavior = node.get("behavior");
  const Json* invert = node.get("invert");
  KILN_CHECK_OR_RETURN(behavior && behavior->is_string() && behavior->str() == "Isolated" &&
                           (invert == nullptr || (invert->is_bool() && !invert->b())),
                       NotSupported, "tokenizer.json: only Split with behavior Isolated (not inverted) is supported");
  PreStep step{PreStep::Split};
  if (regex->str() == kLlama3Pattern) {
    step.pattern = internal::SplitPattern::Llama3;
  } else if (regex->str() == kQwen2Pattern) {
    step.pattern = internal::SplitPattern::Qwen2;
  } else {
    return Status(Error::NotSupported, "tokenizer.json: Split pattern " + internal::json_quote(regex->str()) +
                                           " is not supported (kiln reads the patterns of GPT-2's ByteLevel, "
                                           "Llama 3 and Qwen2)");
  }
  steps->push_back(step);
  return Status::ok();
}

// tokenizer.json's pre_tokenizer: ByteLevel, Digits, Split, or a Sequence of them.
Status parse_pre(const Json* node, std::vector<PreStep>* steps) {
  if (node == nullptr || node->is_null()) return Status::ok();
  const Json* type = node->get("type");
  KILN_CHECK_OR_RETURN(type && type->is_string(), InvalidArgument, "tokenizer.json: a pre_tokenizer has no type");
  if (type->str() == "Sequence") {
    const Json* list = node->get("pretokenizers");
    KILN_CHECK_OR_RETURN(list && list->is_array(), InvalidArgument, "tokenizer.json: Sequence without pretokenizers");
    for (const Json& item : list->items()) KILN_RETURN_IF_ERROR(parse_pre(&item, steps));
    return Status::ok();
  }
  auto flag = [&](const char* key, bool fallback) {
    const Json* v = node->get(key);
    return v && v->is_bool() ? v->b() : fallback;
  };
  if (type->str() == "Digits") {
    steps->push_back({PreStep::Digits, flag("individual_digits", false)});
    return Status::ok();
  }
  if (type->str() == "ByteLevel") {
    steps->push_back({PreStep::ByteLevel, false, flag("add_prefix_space", true), flag("use_regex", true)});
    return Status::ok();
  }
  if (type->str() == "Split") return parse_split(*node, steps);
  return Status(Error::NotSupported, "tokenizer.json: pre_tokenizer '" + std::string(type->str()) +
                                         "' is not supported (kiln reads ByteLevel, Digits and Split)");
}

constexpr const char kSpace[] = "\xE2\x96\x81";  // U+2581, SentencePiece's space

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xXX>" -> XX, or -1.
int byte_token_value(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  int hi = hex_digit(token[3]), lo = hex_digit(token[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

bool has_type(const Json& node, std::string_view type) {
  const Json* t = node.get("type");
  return t && t->is_string() && t->str() == type;
}

bool is_string(const Json* node, std::string_view value) { return node && node->is_string() && node->str() == value; }

// {"type": "Replace", "pattern": {"String": from}, "content": to}
bool is_replace(const Json& node, std::string_view from, std::string_view to) {
  const Json* pattern = node.get("pattern");
  return has_type(node, "Replace") && pattern && pattern->is_object() && is_string(pattern->get("String"), from) &&
         is_string(node.get("content"), to);
}

// The items of a Sequence (under `key`), or the node alone.
std::vector<const Json*> sequence_items(const Json& node, const char* key) {
  std::vector<const Json*> items;
  const Json* list = has_type(node, "Sequence") ? node.get(key) : nullptr;
  if (list == nullptr) {
    items.push_back(&node);
  } else if (list->is_array()) {
    for (const Json& item : list->items()) items.push_back(&item);
  }
  return items;
}

// Hugging Face's tokenizer.json of a SentencePiece BPE (Llama 2, Mistral, as
// transformers' LlamaConverter writes it): normalizer Sequence[Prepend("▁"),
// Replace(" ", "▁")] (Prepend absent: no space prefix), no pre_tokenizer,
// decoder Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)]
// (Strip absent: the space stays).
Status parse_spm_json(const Json& root, TokenizerData& d) {
  constexpr const char* kForm =
      " (kiln reads BPE with byte_fallback in the form of Llama 2's tokenizer.json: normalizer "
      "Sequence[Prepend, Replace], no pre_tokenizer, decoder Sequence[Replace, ByteFallback, Fuse, Strip])";
  const Json* normalizer = root.get("normalizer");
  std::vector<const Json*> norms;
  if (normalizer && normalizer->is_object()) norms = sequence_items(*normalizer, "normalizers");
  d.add_space_prefix = !norms.empty() && has_type(*norms[0], "Prepend") && is_string(norms[0]->get("prepend"), kSpace);
  size_t at = d.add_space_prefix ? 1 : 0;
  KILN_CHECK_OR_RETURN(norms.size() == at + 1 && is_replace(*norms[at], " ", kSpace), NotSupported,
                       "tokenizer.json: this normalizer is not supported with byte_fallback%s", kForm);
  const Json* pre = root.get("pre_tokenizer");
  KILN_CHECK_OR_RETURN(pre == nullptr || pre->is_null(), NotSupported,
                       "tokenizer.json: a pre_tokenizer is not supported with byte_fallback%s", kForm);
  const Json* decoder = root.get("decoder");
  std::vector<const Json*> decs;
  if (decoder && decoder->is_object()) decs = sequence_items(*decoder, "decoders");
  bool ok = decs.size() >= 3 && is_replace(*decs[0], kSpace, " ") && has_type(*decs[1], "ByteFallback") &&
            has_type(*decs[2], "Fuse");
  if (ok && decs.size() == 4) {
    const Json* start = decs[3]->get("start");
    const Json* stop = decs[3]->get("stop");
    ok = has_type(*decs[3], "Strip") && is_string(decs[3]->get("content"), " ") && start && start->is_number() &&
         start->num() == 1 && stop && stop->is_number() && stop->num() == 0;
    d.strip_leading_space = true;
  }
  KILN_CHECK_OR_RETURN(ok && decs.size() <= 4, NotSupported,
                       "tokenizer.json: this decoder is not supported with byte_fallback%s", kForm);
  return Status::ok();
}

int32_t named_id(const TokenizerData& d, const Json* node) {
  if (node == nullptr || !node->is_string()) return -1;
  auto it = d.ids.find(std::string(node->str()));
  return it == d.ids.end() ? -1 : it->second;
}

// GPT-2's split: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(std::string_view text, std::vector<std::string_view>* out) {
  std::vector<uint32_t> cps;
  std::vector<size_t> off;
  internal::decode_utf8(text, &cps, &off);
  const size_t n = cps.size();
  auto cls = [&](size_t k) { return internal::char_class(cps[k]); };
  static const char* const kContractions[] = {"s", "t", "re", "ve", "m", "ll", "d"};
  size_t i = 0;
  while (i < n) {
    if (cps[i] == '\'') {
      bool matched = false;
      for (const char* c : kContractions) {
        size_t len = std::char_traits<char>::length(c);
        if (text.substr(off[i] + 1, len) == c) {
          out->push_back(text.substr(off[i], 1 + len));
          // contractions are ASCII: one code point per byte
          i += 1 + len;
          matched = true;
          break;
        }
      }
      if (matched) continue;
    }
    size_t j = (cps[i] == ' ' && i + 1 < n && cls(i + 1) != CharClass::Space) ? i + 1 : i;
    CharClass c = cls(j);
    if (c != CharClass::Space) {  // ` ?` then a run of letters, numbers or other characters
      size_t k = j + 1;
      while (k < n && cls(k) == c) ++k;
      out->push_back(text.substr(off[i], off[k] - off[i]));
      i = k;
      continue;
    }
    size_t k = i + 1;
    while (k < n && cls(k) == CharClass::Space) ++k;
    // \s+(?!\S): a run followed by a non-space leaves its last character to
    // that word's optional leading space; a single one is taken by the final \s+.
    if (k < n && k - i > 1) --k;
    out->push_back(text.substr(off[i], off[k] - off[i]));
    i = k;
  }
}

// The Llama 3 / Qwen2 split, with at most `max_digits` numbers in a piece:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
// Each branch below is one alternative, tried in the regex's order.
void split_llama3(std::string_view text, size_t max_digits, std::vector<std::string_view>* out) {
  std::vector<uint32_t> cps;
  std::vector<size_t> off;
  internal::decode_utf8(text, &cps, &off);
  const size_t n = cps.size();
  auto cls = [&](size_t k) { return internal::char_class(cps[k]); };
  auto newline = [&](size_t k) { return cps[k] == '\r' || cps[k] == '\n'; };
  // Case-insensitive ASCII; Oniguruma's (?i) also folds U+017F LATIN SMALL LETTER LONG S to 's'.
  auto is = [&](size_t k, char lower) {
    if (k >= n) return false;
    uint32_t c = cps[k];
    if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
    return c == static_cast<uint32_t>(lower) || (lower == 's' && c == 0x17F);
  };
  auto run = [&](size_t k, CharClass c) {
    while (k < n && cls(k) == c) ++k;
    return k;
  };
  auto emit = [&](size_t from, size_t to) { out->push_back(text.substr(off[from], off[to] - off[from])); };
  size_t i = 0;
  while (i < n) {
    const CharClass c = cls(i);
    if (cps[i] == '\'') {  // contractions
      size_t len = 0;
      if (is(i + 1, 's') || is(i + 1, 't') || is(i + 1, 'm') || is(i + 1, 'd')) {
        len = 1;
      } else if ((is(i + 1, 'r') && is(i + 2, 'e')) || (is(i + 1, 'v') && is(i + 2, 'e')) ||
                 (is(i + 1, 'l') && is(i + 2, 'l'))) {
        len = 2;
      }
      if (len > 0) {
        emit(i, i + 1 + len);
        i += 1 + len;
        continue;
      }
    }
    if (c == CharClass::Letter) {  // [^\r\n\p{L}\p{N}]?\p{L}+ without the optional character
      size_t k = run(i, CharClass::Letter);
      emit(i, k);
      i = k;
      continue;
    }
    if (c != CharClass::Number && !newline(i) && i + 1 < n && cls(i + 1) == CharClass::Letter) {  // with it
      size_t k = run(i + 1, CharClass::Letter);
      emit(i, k);
      i = k;
      continue;
    }
    if (c == CharClass::Number) {  // \p{N}{1,max}
      size_t k = i + 1;
      while (k < n && k - i < max_digits && cls(k) == CharClass::Number) ++k;
      emit(i, k);
      i = k;
      continue;
    }
    size_t j = cps[i] == ' ' ? i + 1 : i;
    if (j < n && cls(j) == CharClass::Other) {  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
      size_t k = run(j, CharClass::Other);
      while (k < n && newline(k)) ++k;
      emit(i, k);
      i = k;
      continue;
    }
    // Only whitespace is left (an Other character was taken above).
    size_t k = run(i, CharClass::Space);
    size_t last_newline = k;
    for (size_t m = k; m > i; --m) {
      if (newline(m - 1)) {
        last_newline = m - 1;
        break;
      }
    }
    if (last_newline < k) {  // \s*[\r\n]+: up to the run's last line break
      k = last_newline + 1;
    } else if (k < n && k - i > 1) {  // \s+(?!\S) leaves the last one to the next piece; a lone one is \s+
      --k;
    }
    emit(i, k);
    i = k;
  }
}

// Digits: every numeric character alone (individual) or runs of them.
void split_digits(std::string_view text, bool individual, std::vector<std::string_view>* out) {
  std::vector<uint32_t> cps;
  std::vector<size_t> off;
  internal::decode_utf8(text, &cps, &off);
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    bool digit = internal::is_numeric(cps[i]);
    bool prev_digit = i > 0 && internal::is_numeric(cps[i - 1]);
    if (i > start && (digit != prev_digit || (digit && individual))) {
      out->push_back(text.substr(off[start], off[i] - off[start]));
      start = i;
    }
  }
  if (start < cps.size()) out->push_back(text.substr(off[start], off[cps.size()] - off[start]));
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const internal::TokenizerData> data) : d_(std::move(data)) {}
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::from_json(std::string_view text) {
  auto parsed = internal::parse_json(text, "tokenizer.json");
  if (!parsed.ok()) return parsed.status();
  const Json& root = parsed->root();
  KILN_CHECK_OR_RETURN(root.is_object(), InvalidArgument, "tokenizer.json: not a JSON object");
  auto d = std::make_shared<TokenizerData>();

  const Json* model = root.get("model");
  KILN_CHECK_OR_RETURN(model && model->is_object(), InvalidArgument, "tokenizer.json: no model");
  const Json* model_type = model->get("type");
  KILN_CHECK_OR_RETURN(model_type == nullptr || (model_type->is_string() && model_type->str() == "BPE"), NotSupported,
                       "tokenizer.json: model type '%s' is not supported (kiln reads BPE)",
                       model_type && model_type->is_string() ? std::string(model_type->str()).c_str() : "?");
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
    const Json* v = model->get(key);
    KILN_CHECK_OR_RETURN(v == nullptr || v->is_null() || (v->is_string() && v->str().empty()), NotSupported,
                         "tokenizer.json: BPE with %s is not supported", key);
  }
  const Json* byte_fallback = model->get("byte_fallback");
  const bool spm = byte_fallback && byte_fallback->is_bool() && byte_fallback->b();
  const Json* normalizer = root.get("normalizer");
  KILN_CHECK_OR_RETURN(spm || normalizer == nullptr || normalizer->is_null(), NotSupported,
                       "tokenizer.json: a normalizer is not supported (kiln reads byte-level BPE without one, "
                       "and SentencePiece's BPE with byte_fallback)");
  if (spm) KILN_RETURN_IF_ERROR(parse_spm_json(root, *d));
  if (const Json* fuse = model->get("fuse_unk"); fuse && fuse->is_bool()) d->fuse_unk = fuse->b();
  if (const Json* im = model->get("ignore_merges"); im && im->is_bool()) d->ignore_merges = im->b();

  const Json* vocab = model->get("vocab");
  KILN_CHECK_OR_RETURN(vocab && vocab->is_object(), InvalidArgument, "tokenizer.json: model.vocab is not an object");
  // The table has one entry per id up to the largest: ids may leave holes, but
  // fewer than the tokens the document names (plus 256), so that a few bytes
  // cannot ask for a large table.
  const Json* added_tokens = root.get("added_tokens");
  const int64_t named = static_cast<int64_t>(vocab->size() + (added_tokens ? added_tokens->size() : 0));
  const int64_t max_id = 2 * named + 256;
  auto place = [&](const std::string& token, int64_t id) -> Status {
    KILN_CHECK_OR_RETURN(id >= 0 && id < max_id && id < INT32_MAX, InvalidArgument,
                         "tokenizer.json: token '%s' has id %lld, out of range (the document names %lld tokens)",
                         token.c_str(), static_cast<long long>(id), static_cast<long long>(named));
    if (static_cast<size_t>(id) >= d->tokens.size()) d->tokens.resize(static_cast<size_t>(id) + 1);
    d->tokens[static_cast<size_t>(id)] = token;
    return Status::ok();
  };
  d->tokens.reserve(vocab->size());
  for (const auto& [token, idv] : vocab->members()) {
    int64_t id;
    KILN_CHECK_OR_RETURN(idv.as_int(&id), InvalidArgument, "tokenizer.json: vocab entry '%s' has no integer id",
                         std::string(token).c_str());
    KILN_RETURN_IF_ERROR(place(std::string(token), id));
  }
  if (const Json* added = added_tokens; added && added->is_array()) {
    for (const Json& a : added->items()) {
      const Json* content = a.get("content");
      const Json* idv = a.get("id");
      int64_t id;
      KILN_CHECK_OR_RETURN(content && content->is_string() && idv && idv->as_int(&id), InvalidArgument,
                           "tokenizer.json: an added token lacks content or id");
      for (const char* key : {"single_word", "lstrip", "rstrip"}) {
        const Json* v = a.get(key);
        KILN_CHECK_OR_RETURN(v == nullptr || !v->is_bool() || !v->b(), NotSupported,
                             "tokenizer.json: added token '%s' has %s, which kiln does not support",
                             std::string(content->str()).c_str(), key);
      }
      const std::string text(content->str());
      KILN_RETURN_IF_ERROR(place(text, id));
      const Json* special = a.get("special");
      d->added.push_back({text, static_cast<int32_t>(id), special && special->is_bool() && special->b()});
    }
  }
  std::vector<std::pair<std::string, std::string>> merges;
  if (const Json* m = model->get("merges"); m && m->is_array()) {
    merges.reserve(m->size());
    for (const Json& item : m->items()) {
      if (item.is_string()) {  // "a b" (the older format)
        const std::string_view text = item.str();
        size_t space = text.find(' ', 1);
        KILN_CHECK_OR_RETURN(space != std::string::npos, InvalidArgument, "tokenizer.json: merge '%s' has no space",
                             std::string(text).c_str());
        merges.emplace_back(text.substr(0, space), text.substr(space + 1));
      } else {
        KILN_CHECK_OR_RETURN(item.is_array() && item.size() == 2, InvalidArgument,
                             "tokenizer.json: a merge is neither \"a b\" nor [a, b]");
        const Json& left = *item.items().begin();
        const Json& right = *++item.items().begin();
        KILN_CHECK_OR_RETURN(left.is_string() && right.is_string(), InvalidArgument,
                             "tokenizer.json: a merge is neither \"a b\" nor [a, b]");
        merges.emplace_back(left.str(), right.str());
      }
    }
  }
  if (!spm) KILN_RETURN_IF_ERROR(parse_pre(root.get("pre_tokenizer"), &d->pre));
  bool byte_level =
      std::any_of(d->pre.begin(), d->pre.end(), [](const PreStep& s) { return s.kind == PreStep::ByteLevel; });
  KILN_CHECK_OR_RETURN(byte_level || spm, NotSupported,
                       "tokenizer.json: no ByteLevel pre_tokenizer; kiln reads byte-level BPE tokenizers "
                       "(and SentencePiece's BPE with byte_fallback)");
  if (const Json* dec = root.get("decoder"); !spm && dec && !dec->is_null()) {
    const Json* type = dec->get("type");
    KILN_CHECK_OR_RETURN(type && type->is_string() && type->str() == "ByteLevel", NotSupported,
                         "tokenizer.json: decoder '%s' is not supported (kiln reads ByteLevel)",
                         type && type->is_string() ? std::string(type->str()).c_str() : "?");
  }
  KILN_RETURN_IF_ERROR(finish(*d, merges));
  d->unk_id = named_id(*d, model->get("unk_token"));
  if (spm) {
    d->spm = d->spm_by_rank = true;
    std::fill(std::begin(d->byte_ids), std::end(d->byte_ids), -1);
    for (int b = 0; b < 256; ++b) {
      auto it = d->ids.find(format("<0x%02X>", b));  // the spelling `tokenizers` looks up
      if (it != d->ids.end()) d->byte_ids[b] = it->second;
    }
    // ByteFallback turns any token spelled <0xXX> into its byte; added tokens are their text.
    for (size_t i = 0; i < d->tokens.size(); ++i) {
      int b = byte_token_value(d->tokens[i]);
      d->bytes[i] = b >= 0 ? std::string(1, static_cast<char>(b)) : replace_all(d->tokens[i], kSpace, " ");
    }
    for (const AddedToken& a : d->added) d->bytes[static_cast<size_t>(a.id)] = a.content;
  }
  // tokenizer.json does not say which tokens are BOS/EOS; callers (the LLM
  // config) do. A lone <|endoftext|>-style special token is a fair guess for EOS.
  for (const char* name : {"<|endoftext|>", "</s>", "<|end_of_text|>"}) {
    auto it = d->ids.find(name);
    if (it != d->ids.end()) {
      d->eos_id = it->second;
      break;
    }
  }
  return Tokenizer(std::move(d));
}

Result<Tokenizer> Tokenizer::from_json_file(const std::string& path) {
  auto file = internal::InputFile::open(path, "tokenizer.json", 0, kMaxJsonFileBytes);
  if (!file.ok()) return file.status();
  auto text = file->read_all();
  if (!text.ok()) return text.status();
  auto t = from_json(text.value());
  if (!t.ok()) return Status(t.status()).with_context("'" + path + "'");
  return t;
}

namespace {

// llama.cpp's token types (tokenizer.ggml.token_type).
enum TokenType : int64_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// What an SPM token decodes to, as llama.cpp's token_to_piece: normal tokens
// with U+2581 as a space, byte tokens their byte, the others (control,
// unknown, user-defined) their text. So that to_json's tokenizer.json decodes
// the same, unused tokens (which llama.cpp decodes to nothing) decode as
// normal ones, and any of them spelled <0xXX> as that byte (the ByteFallback
// decoder's rule).
std::string spm_token_bytes(const std::string& token, int64_t type) {
  switch (type) {
    case kUndefined:
    case kNormal:
    case kUnused:
    case kByte: {
      int b = byte_token_value(token);
      return b >= 0 ? std::string(1, static_cast<char>(b)) : replace_all(token, kSpace, " ");
    }
    default: return token;
  }
}

// The SentencePiece parts of a GGUF tokenizer: scores, byte tokens, the space prefix.
Status read_spm(const GgufFile& gguf, const std::vector<int64_t>& types, TokenizerData& d) {
  const std::string& path = gguf.path();
  const size_t n = d.tokens.size();
  d.spm = true;
  d.scores.assign(n, 0.0f);  // llama.cpp's default without the key
  if (const GgufValue* scores = gguf.find("tokenizer.ggml.scores")) {
    KILN_CHECK_OR_RETURN(scores->type == GgufType::Array &&
                             (scores->array_type == GgufType::Float32 || scores->array_type == GgufType::Float64) &&
                             scores->floats.size() == n,
                         InvalidProgram, "'%s': tokenizer.ggml.scores is not a list of %zu numbers, one per token",
                         path.c_str(), n);
    for (size_t i = 0; i < n; ++i) d.scores[i] = static_cast<float>(scores->floats[i]);
  }
  d.add_space_prefix = true;  // llama.cpp's default for SPM
  if (const GgufValue* prefix = gguf.find("tokenizer.ggml.add_space_prefix")) {
    KILN_CHECK_OR_RETURN(prefix->type == GgufType::Bool, InvalidProgram,
                         "'%s': tokenizer.ggml.add_space_prefix is not a bool", path.c_str());
    d.add_space_prefix = prefix->i != 0;
  }
  d.strip_leading_space = d.add_space_prefix;
  std::fill(std::begin(d.byte_ids), std::end(d.byte_ids), -1);
  for (size_t i = 0; i < n; ++i) {
    if (types[i] != kByte) continue;
    int b = byte_token_value(d.tokens[i]);
    KILN_CHECK_OR_RETURN(b >= 0, InvalidProgram, "'%s': token %zu is of type byte but is '%s', not <0xXX>",
                         path.c_str(), i, d.tokens[i].c_str());
    if (d.byte_ids[b] < 0) d.byte_ids[b] = static_cast<int32_t>(i);
  }
  for (size_t i = 0; i < n; ++i) d.bytes[i] = spm_token_bytes(d.tokens[i], types[i]);
  return Status::ok();
}

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const GgufFile& gguf) {
  const std::string& path = gguf.path();
  auto model = gguf.get_string("tokenizer.ggml.model");
  if (!model.ok()) return model.status();
  const bool spm = model.value() == "llama";
  KILN_CHECK_OR_RETURN(model.value() == "gpt2" || spm, NotSupported,
                       "'%s': tokenizer.ggml.model is '%s'; kiln reads byte-level BPE ('gpt2') and SentencePiece "
                       "('llama')",
                       path.c_str(), model.value().c_str());
  auto d = std::make_shared<TokenizerData>();
  std::string pre = "default";
  if (!spm && gguf.find("tokenizer.ggml.pre")) {  // llama.cpp reads it for BPE only
    auto p = gguf.get_string("tokenizer.ggml.pre");
    if (!p.ok()) return p.status();
    pre = p.value();
  }
  // llama.cpp's names (llama-vocab.cpp); Llama 3's tokenizer also takes a whole
  // word that is in the vocabulary before any merge (ignore_merges).
  if (spm) {
    // No pre-tokenizer: encode_spm takes the text between added tokens whole.
  } else if (pre == "smollm") {
    d->pre = {{PreStep::Digits, true}, {PreStep::ByteLevel, false, false, true}};
  } else if (pre == "gpt-2" || pre == "gpt2" || pre == "default") {
    d->pre = {{PreStep::ByteLevel, false, false, true}};
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    d->pre = {{PreStep::Split, false, false, false, internal::SplitPattern::Llama3},
              {PreStep::ByteLevel, false, false, false}};
    d->ignore_merges = true;
  } else if (pre == "qwen2") {
    d->pre = {{PreStep::Split, false, false, false, internal::SplitPattern::Qwen2},
              {PreStep::ByteLevel, false, false, false}};
  } else {
    return Status(Error::NotSupported, format("'%s': tokenizer.ggml.pre '%s' is not supported (kiln reads 'smollm', "
                                              "'gpt-2', 'default', 'llama-bpe' (also 'llama3', 'llama-v3') and "
                                              "'qwen2')",
                                              path.c_str(), pre.c_str()));
  }
  const GgufValue* tokens = gguf.find("tokenizer.ggml.tokens");
  KILN_CHECK_OR_RETURN(tokens && tokens->type == GgufType::Array && tokens->array_type == GgufType::String &&
                           !tokens->strings.empty() && tokens->strings.size() < INT32_MAX,
                       InvalidProgram, "'%s': tokenizer.ggml.tokens is missing or not a list of strings", path.c_str());
  d->tokens = tokens->strings;
  std::vector<int64_t> types(d->tokens.size(), kNormal);
  if (const GgufValue* t = gguf.find("tokenizer.ggml.token_type")) {
    KILN_CHECK_OR_RETURN(t->type == GgufType::Array && t->ints.size() == d->tokens.size(), InvalidProgram,
                         "'%s': tokenizer.ggml.token_type does not have one entry per token", path.c_str());
    for (size_t i = 0; i < types.size(); ++i) {
      KILN_CHECK_OR_RETURN(t->ints[i] >= kUndefined && t->ints[i] <= kByte, InvalidProgram,
                           "'%s': tokenizer.ggml.token_type of token %zu is %lld, not a type 0..6", path.c_str(), i,
                           static_cast<long long>(t->ints[i]));
      types[i] = t->ints[i];
    }
  }
  // Control tokens are special added tokens, user-defined ones added (not
  // special); llama.cpp also matches SPM's unknown token in the text.
  for (size_t i = 0; i < d->tokens.size(); ++i) {
    int64_t t = types[i];
    if (t == kControl || t == kUserDefined || (spm && t == kUnknown)) {
      d->added.push_back({d->tokens[i], static_cast<int32_t>(i), t != kUserDefined});
    }
  }
  std::vector<std::pair<std::string, std::string>> merges;
  if (const GgufValue* m = spm ? nullptr : gguf.find("tokenizer.ggml.merges")) {
    KILN_CHECK_OR_RETURN(m->type == GgufType::Array && m->array_type == GgufType::String, InvalidProgram,
                         "'%s': tokenizer.ggml.merges is not a list of strings", path.c_str());
    merges.reserve(m->strings.size());
    for (const std::string& s : m->strings) {
      size_t space = s.find(' ', 1);
      KILN_CHECK_OR_RETURN(space != std::string::npos, InvalidProgram, "'%s': merge '%s' has no space", path.c_str(),
                           s.c_str());
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    }
  }
  KILN_RETURN_IF_ERROR(finish(*d, merges));
  if (spm) KILN_RETURN_IF_ERROR(read_spm(gguf, types, *d));
  // Absent ids: llama.cpp's defaults for SPM (<unk> 0, <s> 1, </s> 2), none for BPE.
  auto id_of = [&](const char* key, int32_t spm_default) -> int32_t {
    int64_t id = spm ? spm_default : -1;
    if (gguf.find(key)) {
      auto v = gguf.get_int(key);
      id = v.ok() ? v.value() : -1;
    }
    return id >= 0 && id < static_cast<int64_t>(d->tokens.size()) ? static_cast<int32_t>(id) : -1;
  };
  d->bos_id = id_of("tokenizer.ggml.bos_token_id", 1);
  d->eos_id = id_of("tokenizer.ggml.eos_token_id", 2);
  d->unk_id = id_of("tokenizer.ggml.unknown_token_id", 0);
  return Tokenizer(std::move(d));
}

Result<Tokenizer> Tokenizer::from_gguf_file(const std::string& path) {
  auto gguf = GgufFile::open(path);
  if (!gguf.ok()) return gguf.status();
  return from_gguf(gguf.value());
}

namespace {

// BPE of one pre-tokenized word (its byte-level characters), merging the
// lowest-ranked adjacent pair first (leftmost on ties) like `tokenizers`.
void bpe(const TokenizerData& d, std::string_view word, std::vector<int32_t>* out) {
  if (d.ignore_merges) {
    auto it = d.ids.find(std::string(word));
    if (it != d.ids.end()) {
      out->push_back(it->second);
      return;
    }
  }
  struct Sym {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  std::vector<Sym> syms;
  std::vector<uint32_t> cps;
  std::vector<size_t> off;
  internal::decode_utf8(word, &cps, &off);
  auto add = [&](int32_t id) {
    syms.push_back({id, static_cast<int32_t>(syms.size()) - 1, static_cast<int32_t>(syms.size()) + 1, true});
  };
  // As `tokenizers` does: an unknown character's token waits until a known
  // character comes (byte fallback tokens pass it) or the word ends, and with
  // fuse_unk the next unknown characters join it. No unknown token: dropped.
  bool unk_pending = false;
  for (size_t i = 0; i < cps.size(); ++i) {
    std::string_view c = word.substr(off[i], off[i + 1] - off[i]);
    auto it = d.ids.find(std::string(c));
    if (it != d.ids.end()) {
      if (unk_pending) add(d.unk_id);
      unk_pending = false;
      add(it->second);
      continue;
    }
    if (d.spm_by_rank && std::all_of(c.begin(), c.end(), [&](char b) { return d.byte_ids[uint8_t(b)] >= 0; })) {
      for (char b : c) add(d.byte_ids[static_cast<uint8_t>(b)]);  // byte_fallback
      continue;
    }
    if (d.unk_id < 0) continue;
    if (unk_pending && !d.fuse_unk) add(d.unk_id);
    unk_pending = true;
  }
  if (unk_pending) add(d.unk_id);
  if (syms.empty()) return;
  syms.back().next = -1;
  struct Cand {
    int32_t rank, pos, left_id, right_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> queue;
  auto push = [&](int32_t pos) {
    if (pos < 0 || syms[pos].next < 0) return;
    const Sym& a = syms[pos];
    const Sym& b = syms[a.next];
    auto it = d.merges.find((static_cast<uint64_t>(static_cast<uint32_t>(a.id)) << 32) | static_cast<uint32_t>(b.id));
    if (it != d.merges.end()) queue.push({it->second.first, pos, a.id, b.id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) push(i);
  while (!queue.empty()) {
    Cand c = queue.top();
    queue.pop();
    Sym& a = syms[c.pos];
    if (!a.alive || a.id != c.left_id || a.next < 0 || syms[a.next].id != c.right_id) continue;  // stale
    Sym& b = syms[a.next];
    a.id =
        d.merges.at((static_cast<uint64_t>(static_cast<uint32_t>(c.left_id)) << 32) | static_cast<uint32_t>(c.right_id))
            .second;
    b.alive = false;
    a.next = b.next;
    if (b.next >= 0) syms[b.next].prev = c.pos;
    push(a.prev);
    push(c.pos);
  }
  for (const Sym& s : syms) {
    if (s.alive) out->push_back(s.id);
  }
}

// llama.cpp's SPM encoder (llm_tokenizer_spm): spaces become U+2581 (one more
// in front with add_space_prefix), the text is split into characters, and the
// adjacent pair whose concatenation is a token of the highest score is merged
// (the leftmost on ties) until none is; a piece that is not a token becomes
// its byte tokens (the unknown token for a byte without one).
void encode_spm(const TokenizerData& d, std::string_view text, std::vector<int32_t>* out) {
  std::string s;
  s.reserve(text.size() + 3);
  if (d.add_space_prefix) s += kSpace;
  for (char c : text) {
    if (c == ' ')
      s += kSpace;
    else
      s += c;
  }
  std::vector<uint32_t> cps;
  std::vector<size_t> off;
  internal::decode_utf8(s, &cps, &off);
  struct Sym {
    size_t start, len;  // len 0: merged into the symbol before it
    int32_t prev, next;
  };
  std::vector<Sym> syms(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    syms[i] = {off[i], off[i + 1] - off[i], static_cast<int32_t>(i) - 1,
               i + 1 < cps.size() ? static_cast<int32_t>(i) + 1 : -1};
  }
  struct Bigram {
    float score;
    int32_t left, right;
    size_t size;
    bool operator<(const Bigram& o) const { return score < o.score || (score == o.score && left > o.left); }
  };
  std::priority_queue<Bigram> queue;
  std::string pair;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    pair.assign(s, syms[left].start, syms[left].len + syms[right].len);
    auto it = d.ids.find(pair);
    if (it != d.ids.end()) queue.push({d.scores[static_cast<size_t>(it->second)], left, right, pair.size()});
  };
  for (size_t i = 1; i < syms.size(); ++i) try_add(static_cast<int32_t>(i) - 1, static_cast<int32_t>(i));
  while (!queue.empty()) {
    Bigram b = queue.top();
    queue.pop();
    Sym& left = syms[b.left];
    Sym& right = syms[b.right];
    // Stale: a symbol only grows, or empties when merged into its left neighbour.
    if (left.len == 0 || right.len == 0 || left.len + right.len != b.size) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) syms[right.next].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    pair.assign(s, syms[i].start, syms[i].len);
    auto it = d.ids.find(pair);
    if (it != d.ids.end()) {
      out->push_back(it->second);
      continue;
    }
    for (unsigned char b : pair) {
      int32_t id = d.byte_ids[b] >= 0 ? d.byte_ids[b] : d.unk_id;
      if (id >= 0) out->push_back(id);
    }
  }
}

void encode_plain(const TokenizerData& d, std::string_view text, std::vector<int32_t>* out) {
  if (text.empty()) return;
  if (d.spm_by_rank) {  // the normalizer (Prepend, Replace) of every piece between added tokens, then BPE
    std::string s = d.add_space_prefix ? kSpace : "";
    s += replace_all(std::string(text), " ", kSpace);
    bpe(d, s, out);
    return;
  }
  if (d.spm) {  // every piece between added tokens gets the space prefix, as llama.cpp gives it
    encode_spm(d, text, out);
    return;
  }
  std::vector<std::string> pieces{std::string(text)};
  std::vector<std::string_view> parts;
  for (const PreStep& step : d.pre) {
    std::vector<std::string> next;
    for (std::string& piece : pieces) {
      parts.clear();
      if (step.kind == PreStep::Digits) {
        split_digits(piece, step.individual_digits, &parts);
      } else if (step.kind == PreStep::Split) {
        split_llama3(piece, step.pattern == internal::SplitPattern::Llama3 ? 3 : 1, &parts);
      } else {
        if (step.add_prefix_space && (piece.empty() || piece[0] != ' ')) piece.insert(piece.begin(), ' ');
        if (step.use_regex)
          split_gpt2(piece, &parts);
        else
          parts.push_back(piece);
      }
      for (std::string_view p : parts) {
        if (!p.empty()) next.emplace_back(p);
      }
    }
    pieces = std::move(next);
  }
  std::string word;
  for (const std::string& piece : pieces) {
    word.clear();
    for (unsigned char b : piece) word += d.byte_char[b];
    bpe(d, word, out);
  }
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  const TokenizerData& d = *d_;
  std::vector<int32_t> out;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const AddedToken* match = nullptr;
    for (int32_t k : d.added_by_first_byte[static_cast<unsigned char>(text[i])]) {
      const AddedToken& a = d.added[k];
      if ((parse_special || !a.special) && text.compare(i, a.content.size(), a.content) == 0) {
        match = &a;  // longest first
        break;
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    encode_plain(d, text.substr(start, i - start), &out);
    out.push_back(match->id);
    i += match->content.size();
    start = i;
  }
  encode_plain(d, text.substr(start), &out);
  return out;
}

Result<std::string> Tokenizer::decode(Span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  bool first = true;
  for (int32_t id : ids) {
    KILN_CHECK_OR_RETURN(id >= 0 && id < vocab_size(), InvalidArgument, "token id %d is outside the vocabulary of %d",
                         id, vocab_size());
    if (skip_special && d_->special[static_cast<size_t>(id)]) continue;
    const std::string& piece = d_->bytes[static_cast<size_t>(id)];
    if (first && !piece.empty()) {
      first = false;
      if (drops_leading_space() && piece[0] == ' ') {
        bytes.append(piece, 1, std::string::npos);
        continue;
      }
    }
    bytes += piece;
  }
  return internal::utf8_lossy(bytes);
}

bool Tokenizer::drops_leading_space() const { return d_->strip_leading_space; }

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(d_->tokens.size()); }
std::string Tokenizer::id_to_token(int32_t id) const {
  return id >= 0 && id < vocab_size() ? d_->tokens[static_cast<size_t>(id)] : std::string();
}
int32_t Tokenizer::token_to_id(std::string_view token) const {
  auto it = d_->ids.find(std::string(token));
  return it == d_->ids.end() ? -1 : it->second;
}
std::string Tokenizer::token_bytes(int32_t id) const {
  return id >= 0 && id < vocab_size() ? d_->bytes[static_cast<size_t>(id)] : std::string();
}
bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && d_->special[static_cast<size_t>(id)];
}
std::vector<int32_t> Tokenizer::special_ids() const {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < vocab_size(); ++i) {
    if (d_->special[static_cast<size_t>(i)]) ids.push_back(i);
  }
  return ids;
}
int32_t Tokenizer::bos_id() const { return d_->bos_id; }
int32_t Tokenizer::eos_id() const { return d_->eos_id; }

namespace {

// The merges of an SPM vocabulary read from GGUF, as transformers' converter
// derives them for the tokenizer.json form: every split of a token into two
// tokens, the token of higher score first (then the longer left part, the
// longer right part, the lower ids). Byte-level BPE by rank with these
// merges gives what merging by score gives for a BPE-trained SentencePiece
// model, whose later tokens have lower scores.
std::vector<std::pair<int32_t, int32_t>> spm_merges(const TokenizerData& d) {
  struct Merge {
    float score;
    size_t left_chars, right_chars;
    int32_t left, right;
  };
  std::vector<Merge> merges;
  std::vector<uint8_t> added(d.tokens.size(), 0);
  for (const AddedToken& a : d.added) added[static_cast<size_t>(a.id)] = 1;
  std::vector<uint32_t> cps;
  std::vector<size_t> off;
  for (size_t id = 0; id < d.tokens.size(); ++id) {
    const std::string& token = d.tokens[id];
    int b = byte_token_value(token);
    if (added[id] || (b >= 0 && d.byte_ids[b] == static_cast<int32_t>(id))) continue;
    if (d.ids.at(token) != static_cast<int32_t>(id)) continue;  // a repeated spelling: merges make the first
    internal::decode_utf8(token, &cps, &off);
    size_t first = merges.size();
    for (size_t k = 1; k < cps.size(); ++k) {
      auto l = d.ids.find(token.substr(0, off[k]));
      auto r = d.ids.find(token.substr(off[k]));
      if (l != d.ids.end() && r != d.ids.end())
        merges.push_back({d.scores[id], k, cps.size() - k, l->second, r->second});
    }
    std::sort(merges.begin() + static_cast<std::ptrdiff_t>(first), merges.end(),
              [](const Merge& x, const Merge& y) { return x.left != y.left ? x.left < y.left : x.right < y.right; });
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& x, const Merge& y) {
    if (x.score != y.score) return x.score > y.score;
    if (x.left_chars != y.left_chars) return x.left_chars > y.left_chars;
    return x.right_chars > y.right_chars;
  });
  std::vector<std::pair<int32_t, int32_t>> out;
  out.reserve(merges.size());
  for (const Merge& m : merges) out.emplace_back(m.left, m.right);
  return out;
}

}  // namespace

std::string Tokenizer::to_json() const {
  using internal::json_quote;
  const TokenizerData& d = *d_;
  std::string s = "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[";
  for (size_t i = 0; i < d.added.size(); ++i) {
    const AddedToken& a = d.added[i];
    s += format("%s{\"id\":%d,\"content\":", i ? "," : "", a.id) + json_quote(a.content) +
         ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":" +
         (a.special ? "true" : "false") + "}";
  }
  if (d.spm) {
    const std::string space = json_quote(kSpace);
    const std::string replace = "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":" + space + "}";
    s += "],\"normalizer\":";
    s += d.add_space_prefix ? "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":" + space +
                                  "}," + replace + "]}"
                            : replace;
    s += ",\"pre_tokenizer\":null,\"post_processor\":null,\"decoder\":{\"type\":\"Sequence\",\"decoders\":["
         "{\"type\":\"Replace\",\"pattern\":{\"String\":" +
         space + "},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}";
    s += d.strip_leading_space ? ",{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]}" : "]}";
  } else {
    s += "],\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[";
    for (size_t i = 0; i < d.pre.size(); ++i) {
      const PreStep& p = d.pre[i];
      s += i ? "," : "";
      if (p.kind == PreStep::Digits) {
        s +=
            std::string("{\"type\":\"Digits\",\"individual_digits\":") + (p.individual_digits ? "true" : "false") + "}";
      } else if (p.kind == PreStep::Split) {
        s += "{\"type\":\"Split\",\"pattern\":{\"Regex\":" + json_quote(pattern_text(p.pattern)) +
             "},\"behavior\":\"Isolated\",\"invert\":false}";
      } else {
        s += std::string("{\"type\":\"ByteLevel\",\"add_prefix_space\":") + (p.add_prefix_space ? "true" : "false") +
             ",\"trim_offsets\":true,\"use_regex\":" + (p.use_regex ? "true" : "false") + "}";
      }
    }
    s += "]},\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
         "\"trim_offsets\":true,\"use_regex\":true}";
  }
  s += ",\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":";
  s += d.unk_id >= 0 ? json_quote(d.tokens[static_cast<size_t>(d.unk_id)]) : "null";
  // GGUF's SPM gives an unknown token per byte without a byte token; `tokenizers` needs fuse_unk or not.
  const bool fuse_unk = d.spm && (d.spm_by_rank ? d.fuse_unk : true);
  s += std::string(",\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":") +
       (fuse_unk ? "true" : "false") + ",\"byte_fallback\":" + (d.spm ? "true" : "false") + ",";
  s += std::string("\"ignore_merges\":") + (d.ignore_merges ? "true" : "false") + ",\"vocab\":{";
  // Every id, repeated spellings included (a GGUF vocabulary may repeat one):
  // from_json places each member at its id, so the table comes back as it was.
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    s += (i ? "," : "") + json_quote(d.tokens[i]) + ":" + std::to_string(i);
  }
  s += "},\"merges\":[";
  const std::vector<std::pair<int32_t, int32_t>> merges = d.spm && !d.spm_by_rank ? spm_merges(d) : d.merge_list;
  for (size_t r = 0; r < merges.size(); ++r) {
    s += (r ? "," : "") + std::string("[") + json_quote(d.tokens[static_cast<size_t>(merges[r].first)]) + "," +
         json_quote(d.tokens[static_cast<size_t>(merges[r].second)]) + "]";
  }
  s += "]}}";
  return s;
}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

Result<std::string> StreamDecoder::push(int32_t id) {
  KILN_CHECK_OR_RETURN(id >= 0 && id < tokenizer_.vocab_size(), InvalidArgument,
                       "token id %d is outside the vocabulary of %d", id, tokenizer_.vocab_size());
  if (skip_special_ && tokenizer_.is_special(id)) return std::string();
  std::string piece = tokenizer_.token_bytes(id);
  if (at_start_ && !piece.empty()) {  // as decode() drops it
    at_start_ = false;
    if (tokenizer_.drops_leading_space() && piece[0] == ' ') piece.erase(0, 1);
  }
  pending_ += piece;
  size_t complete = internal::utf8_complete_prefix(pending_);
  std::string out = internal::utf8_lossy(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = internal::utf8_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace kiln::llm
