#include "chat/chat_template.h"

#include "chat/jinja_error.h"
#include "chat/py_text.h"
#include "core/error.h"

#include <fstream>
#include <iterator>
#include <set>

namespace msa {

namespace {

constexpr std::uintmax_t kMaxConfigBytes = 64u << 20;
constexpr const char* kSpecialTokenKeys[] = {"bos_token", "eos_token",  "unk_token", "sep_token",
                                             "pad_token", "cls_token", "mask_token"};
constexpr const char* kReservedVariables[] = {"messages", "tools", "documents", "add_generation_prompt"};

std::string read_file(const std::filesystem::path& path) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    MSA_CHECK(!ec, "cannot read '{}': {}", path.string(), ec.message());
    MSA_CHECK(size <= kMaxConfigBytes, "'{}' is {} bytes, more than the {} bytes a chat template file may have",
              path.string(), size, kMaxConfigBytes);
    std::ifstream in(path, std::ios::binary);
    MSA_CHECK(in.good(), "cannot open '{}'", path.string());
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

nlohmann::ordered_json read_json(const std::filesystem::path& path) {
    const std::string text = read_file(path);
    try {
        return nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        fail("'{}' is not valid JSON: {}", path.string(), e.what());
    }
}

// A special token in tokenizer_config.json: a string, or an AddedToken object with "content".
std::optional<std::string> token_text(const nlohmann::ordered_json& v) {
    if (v.is_string()) {
        return v.get<std::string>();
    }
    if (v.is_object() && v.contains("content") && v["content"].is_string()) {
        return v["content"].get<std::string>();
    }
    return std::nullopt;
}

// vLLM-style detection: a template "takes parts" when it loops over a message's content.
bool expr_is_content(const jinja::Expr* e, const std::set<std::string>& content_names) {
    while (e != nullptr && e->kind == jinja::ExprKind::kFilter) {
        e = e->a.get();
    }
    if (e == nullptr) {
        return false;
    }
    if (e->kind == jinja::ExprKind::kGetAttr && e->name == "content") {
        return true;
    }
    if (e->kind == jinja::ExprKind::kGetItem && e->b && e->b->kind == jinja::ExprKind::kLiteral &&
        e->b->literal.is_string() && e->b->literal.as_string() == "content") {
        return true;
    }
    return e->kind == jinja::ExprKind::kName && content_names.count(e->name) > 0;
}

void collect_content_names(const jinja::Body& body, std::set<std::string>& names) {
    for (const auto& s : body) {
        if (s->kind == jinja::StmtKind::kSet && s->target.kind == jinja::Target::Kind::kName &&
            expr_is_content(s->expr.get(), names)) {
            names.insert(s->target.name);
        }
        for (const auto& p : s->signature.params) {
            if (p == "content") {
                names.insert(p);
            }
        }
        collect_content_names(s->body, names);
        collect_content_names(s->else_body, names);
        for (const auto& [test, branch] : s->branches) {
            collect_content_names(branch, names);
        }
    }
}

bool loops_over_content(const jinja::Body& body, const std::set<std::string>& names) {
    for (const auto& s : body) {
        if (s->kind == jinja::StmtKind::kFor && expr_is_content(s->expr.get(), names)) {
            return true;
        }
        if (loops_over_content(s->body, names) || loops_over_content(s->else_body, names)) {
            return true;
        }
        for (const auto& [test, branch] : s->branches) {
            if (loops_over_content(branch, names)) {
                return true;
            }
        }
    }
    return false;
}

ChatTemplate::ContentFormat detect_content_format(const jinja::TemplateAst& ast) {
    std::set<std::string> names;
    collect_content_names(ast.body, names);
    collect_content_names(ast.body, names);  // a second pass catches names assigned from names
    return loops_over_content(ast.body, names) ? ChatTemplate::ContentFormat::kParts
                                               : ChatTemplate::ContentFormat::kString;
}

// Renders a tool call whose arguments are an object; the template "renders object arguments" when the argument
// value shows up in the prompt.
bool probe_object_arguments(const jinja::Template& tmpl) {
    constexpr const char* kProbeValue = "msa_probe_value_4f1c";
    for (const bool null_content : {false, true}) {
        jinja::Dict args;
        args.set(jinja::Value("msa_probe_argument"), jinja::Value(kProbeValue));
        jinja::Dict function;
        function.set(jinja::Value("name"), jinja::Value("msa_probe_tool"));
        function.set(jinja::Value("arguments"), jinja::Value::dict(std::move(args)));
        jinja::Dict call;
        call.set(jinja::Value("id"), jinja::Value("call_msa_probe"));
        call.set(jinja::Value("type"), jinja::Value("function"));
        call.set(jinja::Value("function"), jinja::Value::dict(std::move(function)));
        jinja::Dict user;
        user.set(jinja::Value("role"), jinja::Value("user"));
        user.set(jinja::Value("content"), jinja::Value("Hello"));
        jinja::Dict assistant;
        assistant.set(jinja::Value("role"), jinja::Value("assistant"));
        assistant.set(jinja::Value("content"), null_content ? jinja::Value::none() : jinja::Value(std::string()));
        assistant.set(jinja::Value("tool_calls"), jinja::Value::list({jinja::Value::dict(std::move(call))}));
        jinja::Dict context;
        context.set(jinja::Value("messages"),
                    jinja::Value::list({jinja::Value::dict(std::move(user)), jinja::Value::dict(std::move(assistant))}));
        context.set(jinja::Value("tools"), jinja::Value::none());
        context.set(jinja::Value("documents"), jinja::Value::none());
        context.set(jinja::Value("add_generation_prompt"), jinja::Value(false));
        jinja::RenderOptions options;
        options.max_steps = 2'000'000;
        options.now_unix_seconds = 0;
        try {
            if (tmpl.render(context, options).find(kProbeValue) != std::string::npos) {
                return true;
            }
        } catch (const Error&) {
            // this variant of the probe does not fit the template; try the other
        }
    }
    return false;
}

// The text of a message's content (a string, or the last text part of a list) for continue_final_message.
std::string final_message_text(const nlohmann::ordered_json& message) {
    const auto it = message.find("content");
    MSA_CHECK(it != message.end(), "continue_final_message needs content in the final message");
    if (it->is_string()) {
        return it->get<std::string>();
    }
    if (it->is_array()) {
        for (auto part = it->rbegin(); part != it->rend(); ++part) {
            if (part->is_object() && part->contains("text") && (*part)["text"].is_string()) {
                return (*part)["text"].get<std::string>();
            }
        }
    }
    fail("continue_final_message is set but we could not find any text to continue in the final message");
}

}  // namespace

ChatTemplate ChatTemplate::from_model_dir(const std::filesystem::path& dir) {
    const auto config_path = dir / "tokenizer_config.json";
    nlohmann::ordered_json config = nlohmann::ordered_json::object();
    if (std::filesystem::exists(config_path)) {
        config = read_json(config_path);
        MSA_CHECK(config.is_object(), "'{}' must hold a JSON object", config_path.string());
    }
    const auto jinja_path = dir / "chat_template.jinja";
    const auto json_path = dir / "chat_template.json";
    if (std::filesystem::exists(jinja_path)) {
        config["chat_template"] = read_file(jinja_path);
        return from_tokenizer_config(config, jinja_path.string());
    }
    if (std::filesystem::exists(json_path)) {
        const auto j = read_json(json_path);
        MSA_CHECK(j.is_object() && j.contains("chat_template"), "'{}' has no \"chat_template\" entry",
                  json_path.string());
        config["chat_template"] = j["chat_template"];
        return from_tokenizer_config(config, json_path.string());
    }
    MSA_CHECK(config.contains("chat_template"),
              "model directory '{}' has no chat template (chat_template.jinja, chat_template.json, or "
              "\"chat_template\" in tokenizer_config.json)",
              dir.string());
    return from_tokenizer_config(config, config_path.string());
}

ChatTemplate ChatTemplate::from_tokenizer_config(const nlohmann::ordered_json& config, const std::string& origin) {
    MSA_CHECK(config.is_object(), "{}: the tokenizer config must be a JSON object", origin);
    ChatTemplate t;
    for (const char* key : kSpecialTokenKeys) {
        if (config.contains(key)) {
            if (auto text = token_text(config[key])) {
                t.special_tokens_[key] = *text;
            }
        }
    }
    if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
        for (const auto& v : config["additional_special_tokens"]) {
            if (auto text = token_text(v)) {
                t.additional_special_tokens_.push_back(*text);
            }
        }
    }
    MSA_CHECK(config.contains("chat_template"), "{} has no \"chat_template\"", origin);
    const auto& ct = config["chat_template"];
    if (ct.is_string()) {
        t.add_variant("default", ct.get<std::string>(), origin);
    } else if (ct.is_array()) {
        for (const auto& entry : ct) {
            MSA_CHECK(entry.is_object() && entry.contains("name") && entry["name"].is_string() &&
                          entry.contains("template") && entry["template"].is_string(),
                      "{}: every entry of the \"chat_template\" list needs string \"name\" and \"template\"", origin);
            t.add_variant(entry["name"].get<std::string>(), entry["template"].get<std::string>(), origin);
        }
        MSA_CHECK(!t.variants_.empty(), "{}: the \"chat_template\" list is empty", origin);
    } else {
        fail("{}: \"chat_template\" must be a string or a list of named templates", origin);
    }
    return t;
}

ChatTemplate::ChatTemplate(const std::string& source, std::map<std::string, std::string> special_tokens,
                           const std::string& origin)
    : special_tokens_(std::move(special_tokens)) {
    add_variant("default", source, origin);
}

void ChatTemplate::add_variant(const std::string& name, const std::string& source, const std::string& origin) {
    Variant v;
    v.source = source;
    v.compiled = std::make_shared<const jinja::Template>(source, name == "default" ? origin : origin + ":" + name);
    v.content_format = detect_content_format(v.compiled->ast());
    v.object_arguments = probe_object_arguments(*v.compiled);
    variants_[name] = std::move(v);
}

const ChatTemplate::Variant& ChatTemplate::select(const ChatRequest& request) const {
    if (!request.template_name.empty()) {
        const auto it = variants_.find(request.template_name);
        MSA_CHECK(it != variants_.end(), "the model has no chat template named '{}'", request.template_name);
        return it->second;
    }
    const bool has_tools = !request.tools.is_null();
    if (has_tools && variants_.count("tool_use")) {
        return variants_.at("tool_use");
    }
    if (variants_.count("default")) {
        return variants_.at("default");
    }
    MSA_CHECK(variants_.size() == 1,
              "the model has several chat templates and none is named 'default': name one with template_name");
    return variants_.begin()->second;
}

std::string ChatTemplate::render(const ChatRequest& request) const {
    return render_variant(select(request), request);
}

std::string ChatTemplate::render_variant(const Variant& v, const ChatRequest& request) const {
    MSA_CHECK(request.messages.is_array(), "messages must be an array");
    MSA_CHECK(!(request.continue_final_message && request.add_generation_prompt),
              "continue_final_message and add_generation_prompt cannot both be set");
    MSA_CHECK(request.tools.is_null() || request.tools.is_array(), "tools must be an array");
    MSA_CHECK(request.template_kwargs.is_object(), "chat_template_kwargs must be an object");

    jinja::List messages;
    for (std::size_t i = 0; i < request.messages.size(); ++i) {
        nlohmann::ordered_json m = request.messages[i];
        MSA_CHECK(m.is_object(), "messages[{}] must be an object", i);
        MSA_CHECK(m.contains("role") && m["role"].is_string(), "messages[{}].role must be a string", i);
        if (m.contains("reasoning") && !m.contains("reasoning_content")) {
            m["reasoning_content"] = m["reasoning"];
        }
        if (m.contains("content") && m["content"].is_array() && v.content_format == ContentFormat::kString) {
            std::string text;
            bool first = true;
            for (const auto& part : m["content"]) {
                MSA_CHECK(part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
                              part["text"].is_string(),
                          "messages[{}].content: only text parts are supported by this model's chat template", i);
                if (!first) {
                    text += "\n";
                }
                first = false;
                text += part["text"].get<std::string>();
            }
            m["content"] = text;
        }
        if (v.object_arguments && m.contains("tool_calls") && m["tool_calls"].is_array()) {
            for (auto& call : m["tool_calls"]) {
                if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
                    continue;
                }
                auto& fn = call["function"];
                if (fn.contains("arguments") && fn["arguments"].is_string()) {
                    auto parsed = nlohmann::ordered_json::parse(fn["arguments"].get<std::string>(), nullptr, false);
                    if (!parsed.is_discarded() && parsed.is_object()) {
                        fn["arguments"] = std::move(parsed);
                    }
                }
            }
        }
        messages.push_back(jinja::from_json(m));
    }

    jinja::Dict context;
    for (const auto& [name, token] : special_tokens_) {
        context.set(jinja::Value(name), jinja::Value(token));
    }
    if (!additional_special_tokens_.empty()) {
        jinja::List extra;
        for (const auto& token : additional_special_tokens_) {
            extra.emplace_back(token);
        }
        context.set(jinja::Value("additional_special_tokens"), jinja::Value::list(std::move(extra)));
    }
    for (auto it = request.template_kwargs.begin(); it != request.template_kwargs.end(); ++it) {
        for (const char* reserved : kReservedVariables) {
            MSA_CHECK(it.key() != reserved, "chat_template_kwargs may not set '{}'", it.key());
        }
        context.set(jinja::Value(it.key()), jinja::from_json(it.value()));
    }
    context.set(jinja::Value("messages"), jinja::Value::list(std::move(messages)));
    context.set(jinja::Value("tools"), jinja::from_json(request.tools));
    context.set(jinja::Value("documents"), jinja::from_json(request.documents));
    context.set(jinja::Value("add_generation_prompt"), jinja::Value(request.add_generation_prompt));

    jinja::RenderOptions options;
    options.now_unix_seconds = request.now_unix_seconds;
    std::string rendered = v.compiled->render(context, options);

    if (request.continue_final_message) {
        MSA_CHECK(!request.messages.empty(), "continue_final_message needs at least one message");
        const std::string final_text = final_message_text(request.messages.back());
        const std::string stripped = pytext::strip(final_text, std::nullopt, pytext::StripSide::kBoth);
        const std::string lstripped = pytext::strip(final_text, std::nullopt, pytext::StripSide::kLeft);
        const std::size_t loc = rendered.rfind(stripped);
        MSA_CHECK(loc != std::string::npos,
                  "continue_final_message is set but the final message does not appear in the chat after applying "
                  "the chat template");
        // As transformers does: keep the message's trailing whitespace only when the template kept it.
        if (rendered.substr(loc, lstripped.size()) == final_text) {
            rendered.resize(loc + lstripped.size());
        } else {
            rendered.resize(loc + stripped.size());
        }
    }
    return rendered;
}

const ChatTemplate::Variant& ChatTemplate::primary() const {
    const auto it = variants_.find("default");
    return it != variants_.end() ? it->second : variants_.begin()->second;
}

const std::string& ChatTemplate::source() const {
    return primary().source;
}

ChatTemplate::ContentFormat ChatTemplate::content_format() const {
    return primary().content_format;
}

bool ChatTemplate::renders_object_arguments() const {
    return primary().object_arguments;
}

std::string ChatTemplate::special_token(const std::string& name) const {
    const auto it = special_tokens_.find(name);
    return it == special_tokens_.end() ? std::string() : it->second;
}

std::vector<std::string> ChatTemplate::template_names() const {
    std::vector<std::string> names;
    for (const auto& [name, v] : variants_) {
        names.push_back(name);
    }
    return names;
}

}  // namespace msa
