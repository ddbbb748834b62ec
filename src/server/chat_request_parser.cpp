// parse_chat_completion_request: messages, tools, tool_choice, response_format, reasoning and template options.
#include "server/openai_request.h"
#include "server/request_common_parser.h"

#include <fmt/format.h>

#include <set>

namespace msa::server {

const char* role_name(ChatMessage::Role role) {
    switch (role) {
        case ChatMessage::Role::system: return "system";
        case ChatMessage::Role::developer: return "developer";
        case ChatMessage::Role::user: return "user";
        case ChatMessage::Role::assistant: return "assistant";
        case ChatMessage::Role::tool: return "tool";
    }
    return "user";
}

namespace {

ChatMessage::Role parse_role(const JsonFields& m) {
    const std::string role = m.required_string("role");
    if (role == "system") return ChatMessage::Role::system;
    if (role == "developer") return ChatMessage::Role::developer;
    if (role == "user") return ChatMessage::Role::user;
    if (role == "assistant") return ChatMessage::Role::assistant;
    if (role == "tool") return ChatMessage::Role::tool;
    if (role == "function") {
        throw unsupported_parameter(m.path("role"), "The deprecated 'function' role is not supported; use 'tool'.");
    }
    throw invalid_request(m.path("role"),
                          fmt::format("'{}' must be one of system, developer, user, assistant or tool; got '{}'.",
                                      m.path("role"), role));
}

// Content as a string or a list of parts; only text parts carry text we can use.
std::optional<std::string> parse_content(const JsonFields& m) {
    const auto* value = m.find("content");
    if (value == nullptr) return std::nullopt;
    if (value->is_string()) return value->get<std::string>();
    if (!value->is_array()) m.wrong_type("content", "a string or an array of content parts", *value);
    std::string text;
    for (std::size_t j = 0; j < value->size(); ++j) {
        const JsonFields part((*value)[j], fmt::format("{}[{}]", m.path("content"), j));
        const std::string type = part.required_string("type");
        if (type == "text" || type == "input_text" || type == "output_text" || type == "refusal") {
            const char* key = type == "refusal" ? "refusal" : "text";
            if (!text.empty()) text += '\n';
            text += part.required_string(key);
        } else if (type == "image_url" || type == "input_image" || type == "input_audio" || type == "file" ||
                   type == "video_url" || type == "audio_url") {
            throw unsupported_parameter(part.path("type"),
                                        fmt::format("Content parts of type '{}' are not supported; this server "
                                                    "accepts text only.",
                                                    type));
        } else {
            throw invalid_request(part.path("type"), fmt::format("Unknown content part type '{}'.", type));
        }
    }
    return text;
}

std::vector<ToolCallRef> parse_history_tool_calls(const JsonFields& m) {
    std::vector<ToolCallRef> calls;
    const auto* array = m.array("tool_calls");
    if (array == nullptr) return calls;
    for (std::size_t j = 0; j < array->size(); ++j) {
        const JsonFields call((*array)[j], fmt::format("{}[{}]", m.path("tool_calls"), j));
        ToolCallRef ref;
        ref.id = call.string("id").value_or(fmt::format("call_{}", j));
        if (const auto type = call.string("type"); type && *type != "function") {
            throw unsupported_parameter(call.path("type"), "Only tool calls of type 'function' are supported.");
        }
        const auto function = call.object("function");
        if (!function) {
            throw invalid_request(call.path("function"), fmt::format("Missing required parameter: '{}'.",
                                                                     call.path("function")));
        }
        ref.name = function->required_string("name");
        if (const auto* args = function->find("arguments")) {
            if (args->is_string()) {
                ref.arguments = args->get<std::string>();
                ref.arguments_json = nlohmann::json::parse(ref.arguments, nullptr, false);
                if (ref.arguments_json.is_discarded()) ref.arguments_json = nullptr;
            } else if (args->is_object()) {
                ref.arguments_json = *args;
                ref.arguments = args->dump();
            } else {
                function->wrong_type("arguments", "a JSON string", *args);
            }
        } else {
            ref.arguments = "{}";
            ref.arguments_json = nlohmann::json::object();
        }
        calls.push_back(std::move(ref));
    }
    return calls;
}

std::vector<ChatMessage> parse_messages(const JsonFields& f) {
    const auto* array = f.array("messages");
    if (array == nullptr) throw invalid_request("messages", "Missing required parameter: 'messages'.");
    if (array->empty()) throw invalid_request("messages", "'messages' must contain at least one message.");
    std::vector<ChatMessage> messages;
    messages.reserve(array->size());
    for (std::size_t i = 0; i < array->size(); ++i) {
        const JsonFields m((*array)[i], fmt::format("messages[{}]", i));
        ChatMessage msg;
        msg.role = parse_role(m);
        msg.content = parse_content(m);
        msg.name = m.string("name").value_or("");
        if (msg.role == ChatMessage::Role::assistant) {
            msg.tool_calls = parse_history_tool_calls(m);
            msg.reasoning = m.string("reasoning");
            if (!msg.reasoning) msg.reasoning = m.string("reasoning_content");
        } else if (m.has("tool_calls")) {
            throw invalid_request(m.path("tool_calls"), "Only assistant messages may carry 'tool_calls'.");
        }
        if (msg.role == ChatMessage::Role::tool) msg.tool_call_id = m.string("tool_call_id").value_or("");
        if (!msg.content && msg.role != ChatMessage::Role::assistant) {
            throw invalid_request(m.path("content"),
                                  fmt::format("Missing required parameter: '{}' (a {} message needs content).",
                                              m.path("content"), role_name(msg.role)));
        }
        messages.push_back(std::move(msg));
    }
    return messages;
}

bool valid_tool_name(const std::string& name) {
    if (name.empty() || name.size() > 128) return false;
    for (const char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                        c == '-' || c == '.' || c == ':';
        if (!ok) return false;
    }
    return true;
}

std::vector<ToolDefinition> parse_tools(const JsonFields& f) {
    std::vector<ToolDefinition> tools;
    const auto* array = f.array("tools");
    if (array == nullptr) return tools;
    std::set<std::string> names;
    for (std::size_t i = 0; i < array->size(); ++i) {
        const JsonFields t((*array)[i], fmt::format("tools[{}]", i));
        const std::string type = t.string("type").value_or("function");
        if (type != "function") {
            throw unsupported_parameter(t.path("type"),
                                        fmt::format("Tools of type '{}' are not supported; only 'function'.", type));
        }
        const auto function = t.object("function");
        if (!function) {
            throw invalid_request(t.path("function"), fmt::format("Missing required parameter: '{}'.",
                                                                  t.path("function")));
        }
        ToolDefinition tool;
        tool.name = function->required_string("name");
        if (!valid_tool_name(tool.name)) {
            throw invalid_request(function->path("name"),
                                  fmt::format("Invalid tool name '{}': use 1 to 128 letters, digits, '_', '-', '.' or "
                                              "':'.",
                                              tool.name));
        }
        if (!names.insert(tool.name).second) {
            throw invalid_request(function->path("name"), fmt::format("Duplicate tool name '{}'.", tool.name));
        }
        tool.description = function->string("description").value_or("");
        if (const auto params = function->object("parameters")) tool.parameters = params->json();
        tool.strict = function->boolean("strict").value_or(false);
        tools.push_back(std::move(tool));
    }
    return tools;
}

ToolChoice parse_tool_choice(const JsonFields& f, const std::vector<ToolDefinition>& tools) {
    ToolChoice choice;
    choice.mode = tools.empty() ? ToolChoice::Mode::none : ToolChoice::Mode::auto_;
    const auto* value = f.find("tool_choice");
    if (value == nullptr) return choice;
    if (value->is_string()) {
        const auto s = value->get<std::string>();
        if (s == "none") {
            choice.mode = ToolChoice::Mode::none;
        } else if (s == "auto") {
            choice.mode = ToolChoice::Mode::auto_;
        } else if (s == "required") {
            choice.mode = ToolChoice::Mode::required;
        } else {
            throw invalid_request("tool_choice",
                                  fmt::format("'tool_choice' must be none, auto, required or a named function; got "
                                              "'{}'.",
                                              s));
        }
    } else if (value->is_object()) {
        const JsonFields named(*value, "tool_choice");
        const std::string type = named.string("type").value_or("function");
        if (type != "function") {
            throw unsupported_parameter("tool_choice.type",
                                        fmt::format("tool_choice of type '{}' is not supported.", type));
        }
        const auto function = named.object("function");
        if (!function) throw invalid_request("tool_choice.function", "Missing required parameter: 'tool_choice.function'.");
        choice.mode = ToolChoice::Mode::named;
        choice.name = function->required_string("name");
    } else {
        f.wrong_type("tool_choice", "a string or an object", *value);
    }
    if (choice.mode == ToolChoice::Mode::none) return choice;
    if (tools.empty()) {
        throw invalid_request("tool_choice", "'tool_choice' other than 'none' requires 'tools' to be given.");
    }
    if (choice.mode == ToolChoice::Mode::named) {
        bool found = false;
        for (const auto& t : tools) found = found || t.name == choice.name;
        if (!found) {
            throw invalid_request("tool_choice.function.name",
                                  fmt::format("tool_choice names the function '{}', which is not in 'tools'.",
                                              choice.name));
        }
    }
    return choice;
}

ResponseFormat parse_response_format(const JsonFields& f, const RequestLimits& limits) {
    ResponseFormat format;
    const auto object = f.object("response_format");
    if (!object) return format;
    const std::string type = object->required_string("type");
    if (type == "text") return format;
    if (type == "json_object") {
        format.type = ResponseFormat::Type::json_object;
    } else if (type == "json_schema") {
        format.type = ResponseFormat::Type::json_schema;
        const auto js = object->object("json_schema");
        if (!js) throw invalid_request("response_format.json_schema", "Missing required parameter: "
                                                                      "'response_format.json_schema'.");
        format.schema_name = js->string("name").value_or("");
        const auto schema = js->object("schema");
        if (!schema) throw invalid_request("response_format.json_schema.schema",
                                           "Missing required parameter: 'response_format.json_schema.schema'.");
        format.schema = schema->json();
        format.strict = js->boolean("strict").value_or(false);
    } else {
        throw invalid_request("response_format.type",
                              fmt::format("'response_format.type' must be text, json_object or json_schema; got "
                                          "'{}'.",
                                          type));
    }
    if (!limits.structured_output) {
        throw unsupported_parameter("response_format",
                                    fmt::format("response_format '{}' needs constrained decoding, which this server "
                                                "does not provide.",
                                                type));
    }
    return format;
}

}  // namespace

ChatCompletionRequest parse_chat_completion_request(const nlohmann::json& body, const RequestLimits& limits) {
    const JsonFields f(body, "");
    reject_unimplemented_fields(f, Endpoint::chat);
    ChatCompletionRequest r;
    r.model = f.string("model").value_or("");
    r.messages = parse_messages(f);
    r.sampling = parse_sampling_options(f, limits, Endpoint::chat);
    r.logprobs = r.sampling.logprobs.has_value();
    r.n = parse_n(f, limits);
    r.stream = f.boolean("stream").value_or(false);
    r.stream_options = parse_stream_options(f, r.stream);
    r.tools = parse_tools(f);
    r.tool_choice = parse_tool_choice(f, r.tools);
    r.parallel_tool_calls = f.boolean("parallel_tool_calls").value_or(true);
    r.response_format = parse_response_format(f, limits);
    if (auto effort = f.string("reasoning_effort")) {
        static const std::set<std::string> kEfforts = {"none", "minimal", "low", "medium", "high", "xhigh"};
        if (!kEfforts.contains(*effort)) {
            throw invalid_request("reasoning_effort",
                                  fmt::format("'reasoning_effort' must be one of none, minimal, low, medium, high or "
                                              "xhigh; got '{}'.",
                                              *effort));
        }
        r.reasoning_effort = std::move(effort);
    }
    if (const auto kwargs = f.object("chat_template_kwargs")) {
        r.chat_template_kwargs = kwargs->json();
        if (const auto mode = kwargs->string("thinking_mode")) {
            if (*mode != "enabled" && *mode != "disabled" && *mode != "adaptive") {
                throw invalid_request("chat_template_kwargs.thinking_mode",
                                      fmt::format("'chat_template_kwargs.thinking_mode' must be enabled, disabled or "
                                                  "adaptive; got '{}'.",
                                                  *mode));
            }
        }
    }
    r.continue_final_message = f.boolean("continue_final_message").value_or(false);
    const auto add_generation_prompt = f.boolean("add_generation_prompt");
    r.add_generation_prompt = add_generation_prompt.value_or(!r.continue_final_message);
    if (r.continue_final_message) {
        if (r.add_generation_prompt) {
            throw invalid_request("continue_final_message",
                                  "'continue_final_message' and 'add_generation_prompt' cannot both be true.");
        }
        if (r.messages.back().role != ChatMessage::Role::assistant) {
            throw invalid_request("continue_final_message",
                                  "'continue_final_message' requires the last message to be from the assistant.");
        }
    }
    r.include_reasoning = f.boolean("include_reasoning").value_or(true);
    r.return_token_ids = f.boolean("return_token_ids").value_or(false);
    r.request_id = f.string("request_id").value_or("");
    return r;
}

nlohmann::json parse_json_body(const std::string& body) {
    // Deeply nested JSON is legal but useless here, and later recursive walks over it would risk the stack.
    static constexpr int kMaxDepth = 128;
    const auto depth_guard = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        if (depth > kMaxDepth) {
            throw invalid_request("", fmt::format("The request body nests JSON deeper than {} levels.", kMaxDepth),
                                  "invalid_json");
        }
        return true;
    };
    try {
        return nlohmann::json::parse(body, depth_guard);
    } catch (const nlohmann::json::exception& e) {
        // Syntax errors, invalid UTF-8, numbers out of range. e.what() starts with "[json.exception.kind.N] ".
        std::string detail = e.what();
        if (const auto pos = detail.find("] "); pos != std::string::npos) detail.erase(0, pos + 2);
        throw invalid_request("", fmt::format("The request body is not valid JSON: {}.", detail), "invalid_json");
    }
}

}  // namespace msa::server
