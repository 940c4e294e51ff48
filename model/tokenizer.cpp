#include "model/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernels/check.h"
#include "model/byte_level.h"
#include "model/pre_split.h"
#include "model/tokenizer_impl.h"
#include "model/utf8.h"

namespace troupe::model {
namespace {

// BPE on one pre-tokenized word (raw bytes), appending its ids.
void encode_word(const Tokenizer::Impl& t, std::string_view word, std::vector<int32_t>& ids) {
  if (word.size() == 1) {
    ids.push_back(t.byte_ids[static_cast<uint8_t>(word[0])]);
    return;
  }
  const bool cacheable = word.size() <= WordCache::kMaxWordBytes;
  if (cacheable) {
    if (auto hit = t.cache.get(word)) {
      ids.insert(ids.end(), hit->begin(), hit->end());
      return;
    }
  }
  std::vector<int32_t> out;
  if (t.ignore_merges) {
    std::string spelling;
    append_byte_level(spelling, word);
    if (auto it = t.vocab.find(spelling); it != t.vocab.end()) out.push_back(it->second);
  }
  if (out.empty()) {
    std::vector<int32_t> symbols;
    symbols.reserve(word.size());
    for (char ch : word) symbols.push_back(t.byte_ids[static_cast<uint8_t>(ch)]);
    out = t.merges.apply(symbols);
  }
  if (cacheable) t.cache.put(word, out);
  ids.insert(ids.end(), out.begin(), out.end());
}

// Text between added tokens: pre-tokenize, then BPE each word.
void encode_segment(const Tokenizer::Impl& t, std::string_view segment, std::vector<int32_t>& ids) {
  if (segment.empty()) return;
  for (std::string_view word : pre_split(t.split, segment)) encode_word(t, word, ids);
}

}  // namespace

std::optional<std::vector<int32_t>> WordCache::get(std::string_view word) const {
  std::lock_guard lock(mu_);
  auto it = map_.find(std::string(word));
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

void WordCache::put(std::string_view word, const std::vector<int32_t>& ids) const {
  std::lock_guard lock(mu_);
  if (map_.size() >= kMaxEntries) map_.clear();
  map_.emplace(std::string(word), ids);
}

const AddedToken* Tokenizer::Impl::match_added(std::string_view text, size_t pos) const {
  for (uint32_t i : added_by_first_byte[static_cast<uint8_t>(text[pos])]) {
    if (text.substr(pos).starts_with(added[i].content)) return &added[i];
  }
  return nullptr;
}

int32_t Tokenizer::Impl::find(std::string_view token) const {
  for (const AddedToken& a : added) {
    if (a.content == token) return a.id;
  }
  auto it = vocab.find(std::string(token));
  return it == vocab.end() ? -1 : it->second;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::from_json(std::string_view json_text, std::string_view config_text) {
  return Tokenizer(parse_tokenizer_json(json_text, config_text));
}

namespace {

// The file's bytes; "" for a missing optional file.
std::string file_text(const std::filesystem::path& path, bool required) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (required) TROUPE_FAIL("cannot open tokenizer file " << path.string());
    return {};
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& path) {
  const std::string text = file_text(path, true);
  const std::filesystem::path config = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  try {
    return from_json(text, file_text(config, false));
  } catch (const Error& e) {
    TROUPE_FAIL(path << ": " << e.what());
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos) const {
  add_bos = add_bos && impl_->add_bos;
  if (impl_->spm) return impl_->spm->encode(text, add_bos, /*parse_special=*/true);
  std::vector<int32_t> ids;
  if (add_bos) ids.push_back(impl_->specials.bos);
  size_t segment_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const AddedToken* added = impl_->match_added(text, pos);
    if (!added) {
      ++pos;
      continue;
    }
    encode_segment(*impl_, text.substr(segment_start, pos - segment_start), ids);
    ids.push_back(added->id);
    pos += added->content.size();
    segment_start = pos;
  }
  encode_segment(*impl_, text.substr(segment_start), ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  if (impl_->spm) {
    // The prefix space is the text's own only at its start (a prompt after bos); decoding
    // a continuation in pieces (the detokenizer) must keep each piece's leading space.
    const bool from_start = !ids.empty() && ids.front() == impl_->specials.bos;
    return utf8_lossy(impl_->spm->decode(ids, from_start, /*keep_special=*/!skip_special));
  }
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= impl_->kinds.size()) continue;  // as HF: skipped
    if (skip_special && impl_->kinds[id] == TokenKind::Special) continue;
    bytes += impl_->bytes[id];  // empty for ids the file does not define
  }
  return utf8_lossy(bytes);
}

std::optional<std::string> Tokenizer::render_chat(const std::vector<ChatMessage>& messages,
                                                  bool add_generation_prompt) const {
  if (impl_->chat == ChatFormat::None) return std::nullopt;
  return model::render_chat(impl_->chat, chat_specials(), messages, add_generation_prompt);
}

int64_t Tokenizer::vocab_size() const {
  return static_cast<int64_t>(impl_->kinds.size());
}

const SpecialTokenIds& Tokenizer::specials() const {
  return impl_->specials;
}

std::optional<std::string_view> Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->kinds.size() ||
      impl_->kinds[id] == TokenKind::None) {
    return std::nullopt;
  }
  return impl_->tokens[id];
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  const int32_t id = impl_->find(token);
  return id < 0 ? std::nullopt : std::optional<int32_t>(id);
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->kinds.size() &&
         impl_->kinds[id] == TokenKind::Special;
}

bool Tokenizer::adds_bos() const {
  return impl_->add_bos && impl_->specials.bos >= 0;
}

ChatFormat Tokenizer::chat_format() const {
  return impl_->chat;
}

ChatSpecials Tokenizer::chat_specials() const {
  auto text = [&](int32_t id) { return std::string(id_to_token(id).value_or("")); };
  return {text(impl_->specials.bos), text(impl_->specials.eos)};
}

}  // namespace troupe::model
