// The ServingBackend of `msa serve`: the OpenAI handlers over the real engine (msa::Engine), the model's tokenizer
// and its chat template.
//
//   msa::Tokenizer tokenizer = ...; msa::ChatTemplate chat_template = ...;
//   msa::server::MarkerTextSource text(tokenizer_text, tokenizer, msa::server::parser_marker_tokens());
//   msa::Engine engine(engine_config, model, &text);
//   msa::server::EngineBackend backend(engine, tokenizer, chat_template, text, options);
//
// One backend sequence is one engine request with n = 1 (the handlers submit n of them; sequences with the same
// prompt share its KV pages through the prefix cache). The engine detokenizes incrementally and applies stop
// strings; its events arrive on the engine thread and are converted and handed to the handler's callback there.
#pragma once

#include "chat/chat_template.h"
#include "engine/engine.h"
#include "server/serving_backend.h"
#include "tokenizer/tokenizer.h"

#include <atomic>
#include <string>
#include <unordered_set>
#include <vector>

namespace msa::server {

// A TokenTextSource that passes another through, except that the reasoning and tool-call marker tokens count
// as text even when the tokenizer marks them special: skip_special_tokens must never hide them from the server's
// parsers (vLLM has the same need and turns skip_special_tokens off for such models).
class MarkerTextSource final : public TokenTextSource {
public:
    // `markers`: token texts (parser_marker_tokens()); those the tokenizer does not have as one token are ignored.
    MarkerTextSource(const TokenTextSource& base, const Tokenizer& tokenizer, const std::vector<std::string>& markers);
    std::string_view token_bytes(std::int32_t id) const override { return base_.token_bytes(id); }
    bool is_special(std::int32_t id) const override { return base_.is_special(id) && !marker_ids_.contains(id); }

private:
    const TokenTextSource& base_;
    std::unordered_set<std::int32_t> marker_ids_;
};

// The markers of the reasoning parsers (M3 and M2) and of the tool-call parsers.
std::vector<std::string> parser_marker_tokens();

struct EngineBackendOptions {
    std::string served_name;   // the id clients send as `model`
    std::string root;          // model directory, shown in /v1/models
    std::int64_t created = 0;  // unix time the server started
    // The model's sampling defaults (generation_config.json); the request's fields override them.
    SamplingParams defaults;
};

class EngineBackend final : public ServingBackend {
public:
    // Everything passed in must outlive the backend; `text` must be the TokenTextSource the engine was built with.
    EngineBackend(Engine& engine, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                  const TokenTextSource& text, EngineBackendOptions options);

    ModelInfo model_info() const override;
    bool ready() const override { return true; }  // `msa serve` listens only once the model is loaded

    std::vector<std::int32_t> tokenize(std::string_view text, bool add_special_tokens) const override;
    std::string detokenize(std::span<const std::int32_t> tokens) const override;
    std::string token_text(std::int32_t token) const override;
    std::int64_t vocab_size() const override;

    std::string render_chat(const ChatCompletionRequest& request) const override;

    std::uint64_t submit(GenerationRequest request, GenerationCallback on_event) override;
    void cancel(std::uint64_t handle) override;

    BackendStats stats() const override;

    // The engine parameters a request becomes (exposed for tests).
    SamplingParams sampling_params(const SamplingOptions& options) const;
    // The chat template's view of a request (exposed for tests).
    ChatRequest chat_request(const ChatCompletionRequest& request) const;

private:
    GenerationEvent convert(RequestEvent&& event, std::int64_t prompt_tokens, const std::string& request_id) const;

    Engine& engine_;
    const Tokenizer& tokenizer_;
    const ChatTemplate& chat_template_;
    const TokenTextSource& text_;
    EngineBackendOptions options_;
};

}  // namespace msa::server
