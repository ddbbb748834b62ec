#include "server/tool_call_assembler.h"

#include "server/sse_writer.h"
#include "server/tool_argument_converter.h"

namespace msa::server {

using nlohmann::json;

void ToolParseDelta::append(ToolParseDelta&& other) {
    content += other.content;
    for (auto& f : other.tool_calls) {
        // Merge argument pieces of the same call that follow each other.
        if (!tool_calls.empty() && !f.first && tool_calls.back().index == f.index) {
            tool_calls.back().arguments += f.arguments;
        } else {
            tool_calls.push_back(std::move(f));
        }
    }
}

void append_json_escaped(std::string_view text, std::string& out) {
    const std::string quoted = json_dump(json(std::string(text)));
    out.append(quoted, 1, quoted.size() - 2);
}

std::size_t incomplete_utf8_suffix(std::string_view text) {
    // Look back at most 3 bytes for a lead byte whose sequence is longer than what follows it. Holding back an
    // invalid sequence is harmless (it is escaped later, together with what follows, exactly as it would be in
    // one piece); releasing an incomplete valid one would not be.
    const std::size_t n = text.size();
    for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
        const auto c = static_cast<unsigned char>(text[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
        std::size_t need = 1;
        if ((c & 0xE0) == 0xC0) need = 2;
        else if ((c & 0xF0) == 0xE0) need = 3;
        else if ((c & 0xF8) == 0xF0) need = 4;
        return need > back ? back : 0;
    }
    return 0;
}

ToolCallAssembler::ToolCallAssembler(const std::vector<ToolDefinition>& tools, IdGenerator ids,
                                     std::size_t max_calls)
    : tools_(tools), ids_(std::move(ids)), max_calls_(max_calls) {
    if (!ids_) ids_ = tool_call_id;
}

void ToolCallAssembler::emit(std::string_view json_text, ToolParseDelta& out) {
    if (!reporting_ || json_text.empty()) return;
    calls_.back().arguments.append(json_text);
    if (first_fragment_) {
        first_fragment_ = false;
        out.tool_calls.push_back({static_cast<int>(calls_.size() - 1), true, calls_.back().id, calls_.back().name,
                                  std::string(json_text)});
        return;
    }
    ToolParseDelta piece;
    piece.tool_calls.push_back({static_cast<int>(calls_.size() - 1), false, {}, {}, std::string(json_text)});
    out.append(std::move(piece));
}

void ToolCallAssembler::begin_call(std::string name, ToolParseDelta& out) {
    if (in_call_) end_call(out);
    in_call_ = true;
    params_in_call_ = 0;
    reporting_ = seen_calls_++ < max_calls_;
    tool_schema_ = nullptr;
    for (const auto& t : tools_) {
        if (t.name == name) tool_schema_ = &t.parameters;
    }
    if (!reporting_) return;
    calls_.push_back({ids_(), std::move(name), {}});
    first_fragment_ = true;
    emit("{", out);
}

void ToolCallAssembler::end_call(ToolParseDelta& out) {
    if (!in_call_) return;
    if (in_param_) end_leaf(out);
    emit("}", out);
    in_call_ = false;
}

void ToolCallAssembler::begin_param(std::string_view name, ToolParseDelta& out) {
    if (in_param_) end_leaf(out);
    in_param_ = true;
    param_schema_ = tool_schema_ != nullptr ? property_schema(*tool_schema_, name) : nullptr;
    streams_as_string_ = param_schema_ != nullptr && schema_types(*param_schema_).only_string();
    string_opened_ = false;
    value_.clear();
    std::string head = params_in_call_++ == 0 ? "" : ",";
    head += json_dump(json(std::string(name)));
    head += ':';
    emit(head, out);
}

void ToolCallAssembler::flush_string(bool final, ToolParseDelta& out) {
    if (!string_opened_) {
        // Until the text can no longer be the literal null, nothing is written.
        if (!final && std::string_view("null").starts_with(value_)) return;
        if (final && value_ == "null") {
            emit("null", out);
            value_.clear();
            return;
        }
        string_opened_ = true;
        std::string piece = "\"";
        const std::size_t hold = final ? 0 : incomplete_utf8_suffix(value_);
        append_json_escaped(std::string_view(value_).substr(0, value_.size() - hold), piece);
        value_.erase(0, value_.size() - hold);
        if (final) piece += '"';
        emit(piece, out);
        return;
    }
    const std::size_t hold = final ? 0 : incomplete_utf8_suffix(value_);
    std::string piece;
    append_json_escaped(std::string_view(value_).substr(0, value_.size() - hold), piece);
    value_.erase(0, value_.size() - hold);
    if (final) piece += '"';
    emit(piece, out);
}

void ToolCallAssembler::value_text(std::string_view text, ToolParseDelta& out) {
    if (!in_param_) return;
    value_.append(text);
    if (streams_as_string_) flush_string(false, out);
}

void ToolCallAssembler::end_leaf(ToolParseDelta& out) {
    if (!in_param_) return;
    if (streams_as_string_) {
        flush_string(true, out);
    } else {
        emit(json_dump(convert_argument(value_, param_schema_)), out);
    }
    value_.clear();
    in_param_ = false;
}

void ToolCallAssembler::end_value(const json& value, ToolParseDelta& out) {
    if (!in_param_) return;
    emit(json_dump(value), out);
    value_.clear();
    in_param_ = false;
}

}  // namespace msa::server
