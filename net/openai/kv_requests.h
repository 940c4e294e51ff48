// KV save by name (troupe's extension; docs/openai-api.md "Saved KV prefixes",
// docs/kv-cache.md "Saved prefixes"): the bodies of
//
//   POST   /v1/kv/save    {"conversation": ID, "tokens": [...]}   (or "prompt": text | ids)
//   DELETE /v1/kv/ID
//   POST   /v1/kv/delete  {"conversation": ID}
//
// -> a GenerationRequest for the engine, or an ApiError. A save runs its tokens as a
// 1-token greedy completion whose prompt blocks (and window snapshot) are pinned under
// ID when it finishes; a delete runs nothing (the scheduler unpins ID and answers). A
// completion's "kv_restore": ID puts the saved tokens before its prompt
// (request_parse.h). Pure logic, as request_parse.h.
#pragma once

#include <string>
#include <string_view>

#include "net/openai/request_parse.h"

namespace troupe::net::openai {

// A saved prefix's name: 1..256 bytes, no control characters, no '/' (it is also a
// path segment); throws ApiException (400) naming `param` otherwise.
std::string checked_kv_name(const std::string& name, const std::string& param);

ParseResult parse_kv_save(std::string_view body, const ServingInfo& info,
                          const model::TextTokenizer& tok);
// path_id: the ID of DELETE /v1/kv/ID; empty: read "conversation" from the body.
ParseResult parse_kv_delete(std::string_view body, std::string_view path_id,
                            const ServingInfo& info);

// The answers: {"object": "kv.saved", "conversation": ID, "prompt_tokens": n,
// "cached_tokens": c} from the save's completion response, and {"object": "kv.deleted",
// "conversation": ID, "deleted": true}.
nlohmann::json kv_saved_response(const GenerationRequest& req, const nlohmann::json& completion);
nlohmann::json kv_deleted_response(const GenerationRequest& req);

}  // namespace troupe::net::openai
