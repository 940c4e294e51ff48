// tokenizer.json -> Tokenizer::Impl, validating everything the encoder relies on so a
// bad or unsupported file fails here with a message naming the offending field.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "kernels/check.h"
#include "model/byte_level.h"
#include "model/tokenizer_impl.h"

namespace troupe::model {
namespace {

using json = nlohmann::json;

constexpr int64_t kMaxTokenId = (1 << 24) - 1;  // far above any real vocab; bounds memory

#define BAD_FILE(...) TROUPE_FAIL("bad tokenizer.json: " << __VA_ARGS__)

// obj[key], or nullptr when absent or null.
const json* member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

bool flag(const json& obj, const char* where, const char* key, bool absent) {
  const json* v = member(obj, key);
  if (!v) return absent;
  if (!v->is_boolean()) BAD_FILE(where << '.' << key << " is not a boolean");
  return v->get<bool>();
}

std::string text_of(const json& obj, const char* where, const char* key) {
  const json* v = member(obj, key);
  if (!v || !v->is_string()) BAD_FILE(where << '.' << key << " is missing or not a string");
  return v->get<std::string>();
}

// ByteLevel pre-tokenizer: returns use_regex (HF's default is true, as is its default
// add_prefix_space, which troupe does not support).
bool parse_byte_level(const json& p) {
  if (flag(p, "pre_tokenizer ByteLevel", "add_prefix_space", true)) {
    BAD_FILE("pre_tokenizer ByteLevel with add_prefix_space true is not supported");
  }
  return flag(p, "pre_tokenizer ByteLevel", "use_regex", true);
}

// The split a Split pre-tokenizer's regex names.
PreSplit split_of(const json& p) {
  const json* pattern = member(p, "pattern");
  const json* regex = pattern && pattern->is_object() ? member(*pattern, "Regex") : nullptr;
  const std::string text = regex && regex->is_string() ? regex->get<std::string>() : "";
  PreSplit kind = PreSplit::None;
  if (text == kGpt2SplitRegex) kind = PreSplit::Gpt2;
  if (text == kLlama3SplitRegex) kind = PreSplit::Llama3;
  if (text == kQwen2SplitRegex) kind = PreSplit::Qwen2;
  if (kind == PreSplit::None) {
    BAD_FILE("pre_tokenizer Split must use the GPT-2, LLaMA-3 or Qwen2 regex, got "
             << (pattern ? pattern->dump() : "none"));
  }
  if (text_of(p, "pre_tokenizer Split", "behavior") != "Isolated" ||
      flag(p, "pre_tokenizer Split", "invert", false)) {
    BAD_FILE("pre_tokenizer Split must have behavior Isolated and invert false");
  }
  return kind;
}

// Returns the split that applies before BPE.
PreSplit parse_pre_tokenizer(const json* p) {
  if (!p || !p->is_object()) BAD_FILE("pre_tokenizer is missing; byte-level BPE needs ByteLevel");
  const std::string type = text_of(*p, "pre_tokenizer", "type");
  if (type == "ByteLevel") return parse_byte_level(*p) ? PreSplit::Gpt2 : PreSplit::None;
  const json* seq = type == "Sequence" ? member(*p, "pretokenizers") : nullptr;
  if (seq && seq->is_array() && seq->size() == 2 && (*seq)[0].is_object() &&
      (*seq)[1].is_object() && (*seq)[0].value("type", "") == "Split" &&
      (*seq)[1].value("type", "") == "ByteLevel") {
    const PreSplit kind = split_of((*seq)[0]);
    if (parse_byte_level((*seq)[1]))
      BAD_FILE("pre_tokenizer ByteLevel after a Split must have use_regex false");
    return kind;
  }
  BAD_FILE("unsupported pre_tokenizer "
           << p->dump().substr(0, 200)
           << " (supported: ByteLevel, or Sequence of Split on the GPT-2 "
              "or LLaMA-3 or Qwen2 regex then ByteLevel)");
}

void check_model_options(const json& model) {
  if (const json* type = member(model, "type"); type && *type != "BPE") {
    BAD_FILE("unsupported model.type " << type->dump() << " (only BPE)");
  }
  if (flag(model, "model", "byte_fallback", false))
    BAD_FILE("model.byte_fallback is not supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = member(model, key);
    if (v && !(v->is_string() && v->get<std::string>().empty()))
      BAD_FILE("model." << key << " is not supported");
  }
  const json* dropout = member(model, "dropout");
  if (dropout && !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    BAD_FILE("model.dropout is not supported");
  }
}

void add_token(Tokenizer::Impl& t, int64_t id, const std::string& text, TokenKind kind,
               const char* where) {
  if (id < 0 || id > kMaxTokenId)
    BAD_FILE(where << " token '" << text << "' has id " << id << " out of range");
  if (static_cast<size_t>(id) >= t.tokens.size()) {
    t.tokens.resize(id + 1);
    t.kinds.resize(id + 1, TokenKind::None);
  }
  // An added token may restate a vocab entry; two vocab tokens may not share an id.
  if (kind == TokenKind::Vocab && t.kinds[id] != TokenKind::None) {
    BAD_FILE("model.vocab gives id " << id << " to both '" << t.tokens[id] << "' and '" << text
                                     << "'");
  }
  t.tokens[id] = text;
  t.kinds[id] = kind;
}

void parse_vocab(const json& model, Tokenizer::Impl& t) {
  const json* vocab = member(model, "vocab");
  if (!vocab || !vocab->is_object()) BAD_FILE("model.vocab is missing or not an object");
  for (const auto& [text, id] : vocab->items()) {
    if (!id.is_number_integer()) BAD_FILE("model.vocab['" << text << "'] is not an integer id");
    add_token(t, id.get<int64_t>(), text, TokenKind::Vocab, "model.vocab");
    t.vocab.emplace(text, id.get<int32_t>());
  }
}

// One merge, "a b" (exactly one space) or ["a", "b"].
std::pair<std::string, std::string> merge_parts(const json& m, size_t index) {
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t space = s.find(' ');
    if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos) {
      return {s.substr(0, space), s.substr(space + 1)};
    }
  } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  BAD_FILE("model.merges[" << index << "] = " << m.dump() << " is not two tokens");
}

void parse_merges(const json& model, Tokenizer::Impl& t) {
  const json* merges = member(model, "merges");
  if (!merges || !merges->is_array()) BAD_FILE("model.merges is missing or not an array");
  auto id_of = [&](const std::string& token, size_t i) {
    auto it = t.vocab.find(token);
    if (it == t.vocab.end())
      BAD_FILE("model.merges[" << i << "] refers to unknown token '" << token << "'");
    return it->second;
  };
  for (size_t i = 0; i < merges->size(); ++i) {
    const auto [left, right] = merge_parts((*merges)[i], i);
    // One at a time, so the error names the first unknown token.
    const int32_t left_id = id_of(left, i);
    const int32_t right_id = id_of(right, i);
    t.merges.add(left_id, right_id, id_of(left + right, i));
  }
}

void parse_added_tokens(const json* added, Tokenizer::Impl& t) {
  if (!added) return;
  if (!added->is_array()) BAD_FILE("added_tokens is not an array");
  for (const json& a : *added) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer()) {
      BAD_FILE("added_tokens entry " << a.dump() << " has no integer id");
    }
    AddedToken token{text_of(a, "added_tokens", "content"), a["id"].get<int32_t>(),
                     flag(a, "added_tokens", "special", false)};
    if (token.content.empty()) BAD_FILE("added_tokens entry " << a.dump() << " has empty content");
    for (const char* key : {"lstrip", "rstrip", "single_word"}) {
      if (flag(a, "added_tokens", key, false))
        BAD_FILE("added_tokens option " << key << " is not supported");
    }
    add_token(t, a["id"].get<int64_t>(), token.content,
              token.special ? TokenKind::Special : TokenKind::Added, "added_tokens");
    t.added.push_back(std::move(token));
  }
}

void find_specials(Tokenizer::Impl& t) {
  SpecialTokenIds& s = t.specials;
  s = {t.find(kBosToken),  t.find(kEosToken),       t.find(kPadToken),
       t.find(kUserToken), t.find(kAssistantToken), t.find(kNoiseToken)};
  if (s.bos < 0) BAD_FILE("no bos token " << kBosToken);
  if (s.eos < 0) BAD_FILE("no eos token " << kEosToken);
}

// A tokenizer_config.json special token: a string, or an object with its content.
std::string special_text(const json& config, const char* key) {
  const json* v = member(config, key);
  if (!v) return {};
  if (v->is_string()) return v->get<std::string>();
  if (v->is_object() && member(*v, "content") && (*v)["content"].is_string())
    return (*v)["content"].get<std::string>();
  TROUPE_FAIL("bad tokenizer_config.json: " << key << " is not a string or {\"content\": string}");
}

// Whether the post-processor puts bos first (LLaMA-3's TemplateProcessing "single"
// template starts with it), for files whose tokenizer_config.json does not say.
bool post_processor_adds(const json& root, const std::string& bos) {
  const json* p = member(root, "post_processor");
  if (!p || !p->is_object() || bos.empty()) return false;
  std::vector<const json*> processors{p};
  if (const json* seq = member(*p, "processors"); seq && seq->is_array())
    for (const json& q : *seq) processors.push_back(&q);
  for (const json* q : processors) {
    const json* single = q->is_object() ? member(*q, "single") : nullptr;
    if (single && single->is_array() && !single->empty() && (*single)[0].is_object()) {
      const json* special = member((*single)[0], "SpecialToken");
      if (special && special->is_object() && special->value("id", "") == bos) return true;
    }
  }
  return false;
}

// Specials, bos and chat template from the tokenizer_config.json HF writes beside a
// tokenizer.json (LLaMA-3, Qwen2 and other HF checkpoints; V4.1's MODEL.md tokens need none).
void apply_tokenizer_config(const json& root, const json& config, Tokenizer::Impl& t) {
  if (!config.is_object()) TROUPE_FAIL("bad tokenizer_config.json: the top level is not an object");
  const std::string bos = special_text(config, "bos_token"), eos = special_text(config, "eos_token");
  auto id_of = [&](const std::string& text, const char* key) {
    if (text.empty()) return -1;
    const int32_t id = t.find(text);
    if (id < 0) TROUPE_FAIL("bad tokenizer_config.json: " << key << " '" << text << "' is not a token");
    return id;
  };
  t.specials = {};
  t.specials.bos = id_of(bos, "bos_token");
  t.specials.eos = id_of(eos, "eos_token");
  t.specials.pad = id_of(special_text(config, "pad_token"), "pad_token");
  t.add_bos = flag(config, "tokenizer_config", "add_bos_token", post_processor_adds(root, bos)) &&
              t.specials.bos >= 0;
  const json* chat = member(config, "chat_template");
  t.chat = chat && chat->is_string() ? detect_chat_format(chat->get<std::string>()) : ChatFormat::None;
  // A V4.1 folder whose config names no template still has MODEL.md §11's format.
  if (t.chat == ChatFormat::None && t.find(kUserToken) >= 0 && t.find(kAssistantToken) >= 0)
    t.chat = ChatFormat::DeepSeekV3;
}

std::unique_ptr<Tokenizer::Impl> parse_root(const json& root, const json* config) {
  if (!root.is_object()) BAD_FILE("the top level is not an object");
  const json* model = member(root, "model");
  if (!model || !model->is_object()) BAD_FILE("model is missing or not an object");
  if (const json* n = member(root, "normalizer"))
    BAD_FILE("normalizer " << n->dump() << " is not supported");

  auto t = std::make_unique<Tokenizer::Impl>();
  check_model_options(*model);
  t->ignore_merges = flag(*model, "model", "ignore_merges", false);
  t->split = parse_pre_tokenizer(member(root, "pre_tokenizer"));
  parse_vocab(*model, *t);
  parse_merges(*model, *t);
  parse_added_tokens(member(root, "added_tokens"), *t);
  index_byte_level_tokens(*t, "bad tokenizer.json: model.vocab");
  if (config) apply_tokenizer_config(root, *config, *t);
  else find_specials(*t);
  return t;
}

}  // namespace

void index_byte_level_tokens(Tokenizer::Impl& t, const char* vocabulary) {
  for (int b = 0; b < 256; ++b) {
    auto it = t.vocab.find(byte_to_unicode(static_cast<uint8_t>(b)));
    if (it == t.vocab.end())
      TROUPE_FAIL(vocabulary << " lacks the byte-level token of byte " << b);
    t.byte_ids[b] = it->second;
  }
  // Longest first, so the first match at a position is the longest (HF: leftmost-longest).
  std::stable_sort(t.added.begin(), t.added.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  for (uint32_t i = 0; i < t.added.size(); ++i) {
    t.added_by_first_byte[static_cast<uint8_t>(t.added[i].content[0])].push_back(i);
  }
  // What each id decodes to: a vocab token's bytes through the byte-level map (HF's
  // ByteLevel decoder keeps a token's own UTF-8 when it is not byte-level), an added
  // token's content.
  t.bytes.resize(t.tokens.size());
  for (size_t id = 0; id < t.tokens.size(); ++id) {
    if (t.kinds[id] != TokenKind::Vocab || !append_byte_level_decoded(t.bytes[id], t.tokens[id])) {
      t.bytes[id] = t.tokens[id];
    }
  }
}

std::unique_ptr<Tokenizer::Impl> parse_tokenizer_json(std::string_view json_text,
                                                      std::string_view config_text) {
  json root, config;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    BAD_FILE("not valid JSON: " << e.what());
  }
  if (!config_text.empty()) {
    try {
      config = json::parse(config_text);
    } catch (const json::exception& e) {
      TROUPE_FAIL("bad tokenizer_config.json: not valid JSON: " << e.what());
    }
  }
  try {
    return parse_root(root, config_text.empty() ? nullptr : &config);
  } catch (const json::exception& e) {  // a field of an unexpected JSON type
    BAD_FILE(e.what());
  }
}

}  // namespace troupe::model
