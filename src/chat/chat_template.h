// A model's chat template: loads it from the model directory and renders OpenAI-style conversations into the prompt
// text, exactly as Hugging Face transformers' apply_chat_template(tokenize=False) would (same jinja2 semantics,
// same variables), with the request normalisation an OpenAI-compatible server needs.
//
//   auto tmpl = msa::ChatTemplate::from_model_dir("models/minimax-m3");
//   msa::ChatRequest req;
//   req.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "Hi"}])");
//   req.template_kwargs["thinking_mode"] = "enabled";
//   std::string prompt = tmpl.render(req);   // tokenize without adding BOS: the template already has it
//
// Variables the template sees (as in transformers): messages, tools (None when absent), documents (None),
// add_generation_prompt, the special tokens of tokenizer_config.json (bos_token, eos_token, unk_token, sep_token,
// pad_token, cls_token, mask_token, additional_special_tokens; only those that are set), and every
// chat_template_kwargs entry (thinking_mode, enable_thinking, ...), which may override the special tokens.
//
// Before rendering, messages are normalised the way vLLM does for OpenAI clients:
//  * assistant `reasoning` is also exposed as `reasoning_content` (the name templates read) when that is absent;
//  * tool-call `arguments` sent as a JSON string are parsed into an object when the template renders object
//    arguments (detected once per template by a probe render, like llama.cpp); otherwise they stay strings;
//  * content given as a list of text parts is joined with "\n" for templates that expect string content
//    (templates that iterate over message content receive the list unchanged).
//
// Objects keep the key order of the client's JSON: parse requests with nlohmann::ordered_json (tojson output, and
// so the prompt, depends on it).
#pragma once

#include "chat/jinja_template.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace msa {

struct ChatRequest {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // OpenAI chat messages
    nlohmann::ordered_json tools;      // null, or the OpenAI `tools` array
    nlohmann::ordered_json documents;  // null, or documents for RAG templates
    bool add_generation_prompt = true;
    // Prefill: the prompt ends inside the final (assistant) message instead of closing it (vLLM's and
    // transformers' continue_final_message). Incompatible with add_generation_prompt.
    bool continue_final_message = false;
    nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
    // Named template to use when tokenizer_config.json has several ("default", "tool_use", ...); empty: "tool_use"
    // when tools are given and it exists, else "default".
    std::string template_name;
    // Time strftime_now() formats (seconds since the epoch, local time); the current time when unset.
    std::optional<std::int64_t> now_unix_seconds;
};

class ChatTemplate {
public:
    // How list-of-parts message content reaches the template.
    enum class ContentFormat { kString, kParts };

    // chat_template.jinja, else chat_template.json, else tokenizer_config.json's "chat_template" (a string or a list
    // of {"name", "template"}); special tokens come from tokenizer_config.json when present. Throws msa::Error.
    static ChatTemplate from_model_dir(const std::filesystem::path& dir);
    // From a parsed tokenizer_config.json (its "chat_template" and special tokens). `origin` names it in errors.
    static ChatTemplate from_tokenizer_config(const nlohmann::ordered_json& config, const std::string& origin);
    // From template source and the special tokens (name -> token text, e.g. {"bos_token", "<s>"}).
    ChatTemplate(const std::string& source, std::map<std::string, std::string> special_tokens,
                 const std::string& origin);

    // Renders the prompt; throws msa::Error (a jinja::TemplateError for template errors, including the template's own
    // raise_exception() messages, e.g. "Conversation roles must alternate").
    std::string render(const ChatRequest& request) const;

    // The default template's source, format and capabilities.
    const std::string& source() const;
    ContentFormat content_format() const;
    bool renders_object_arguments() const;
    // Token text of a special token from tokenizer_config.json ("" when not set).
    std::string special_token(const std::string& name) const;
    std::vector<std::string> template_names() const;

private:
    struct Variant {
        std::string source;
        std::shared_ptr<const jinja::Template> compiled;
        ContentFormat content_format = ContentFormat::kString;
        bool object_arguments = false;
    };
    ChatTemplate() = default;
    void add_variant(const std::string& name, const std::string& source, const std::string& origin);
    const Variant& select(const ChatRequest& request) const;
    const Variant& primary() const;  // "default", else the first
    std::string render_variant(const Variant& v, const ChatRequest& request) const;

    std::map<std::string, Variant> variants_;  // "default" when the template is a single string
    std::map<std::string, std::string> special_tokens_;
    std::vector<std::string> additional_special_tokens_;
};

}  // namespace msa
