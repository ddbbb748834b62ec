#include "server/tool_call_parser.h"

#include "core/error.h"
#include "server/reasoning_parser.h"
#include "server/tool_argument_converter.h"

#include <optional>

namespace msa::server {

using nlohmann::json;

namespace {

constexpr std::string_view kNs = "]<]minimax[>[";
constexpr std::string_view kWhitespace = " \t\r\n";
constexpr std::size_t kMaxTagLength = 512;  // a tag longer than this without '>' is not a tag

struct Syntax {
    std::string block_open;
    std::string block_close;
    std::string invoke_open;   // followed by attributes and '>'
    std::string invoke_close;
    std::string param_open;    // m3: kNs + "<" (the name follows); m2: "<parameter" (attributes follow)
};

const Syntax& syntax(ToolCallFormat format) {
    static const Syntax m3{std::string(kNs) + "<tool_call>", std::string(kNs) + "</tool_call>",
                           std::string(kNs) + "<invoke", std::string(kNs) + "</invoke>", std::string(kNs) + "<"};
    static const Syntax m2{"<minimax:tool_call>", "</minimax:tool_call>", "<invoke", "</invoke>", "<parameter"};
    return format == ToolCallFormat::minimax_m3 ? m3 : m2;
}

enum class Match { no, partial, yes };

// Does `text` start with `literal`? partial: text is a proper prefix of it (more input could make it yes).
Match starts(std::string_view text, std::string_view literal) {
    if (text.size() >= literal.size()) return text.substr(0, literal.size()) == literal ? Match::yes : Match::no;
    return literal.substr(0, text.size()) == text ? Match::partial : Match::no;
}

// The value of attribute `name` in a tag's attribute text (` name="x"` or ` name='x'`).
std::optional<std::string> attribute(std::string_view attrs, std::string_view name) {
    std::size_t pos = 0;
    while ((pos = attrs.find(name, pos)) != std::string_view::npos) {
        const bool word_start = pos == 0 || kWhitespace.find(attrs[pos - 1]) != std::string_view::npos;
        std::size_t i = pos + name.size();
        while (i < attrs.size() && kWhitespace.find(attrs[i]) != std::string_view::npos) ++i;
        if (word_start && i < attrs.size() && attrs[i] == '=') {
            ++i;
            while (i < attrs.size() && kWhitespace.find(attrs[i]) != std::string_view::npos) ++i;
            if (i < attrs.size() && (attrs[i] == '"' || attrs[i] == '\'')) {
                const char quote = attrs[i];
                const auto end = attrs.find(quote, i + 1);
                if (end != std::string_view::npos) return std::string(attrs.substr(i + 1, end - i - 1));
            } else {
                const auto end = attrs.find_first_of(" \t\r\n/", i);
                return std::string(attrs.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i));
            }
        }
        pos += name.size();
    }
    return std::nullopt;
}

std::size_t skip_ws(std::string_view s, std::size_t pos = 0) {
    const auto p = s.find_first_not_of(kWhitespace, pos);
    return p == std::string_view::npos ? s.size() : p;
}

// ---- Nested M3 values: a small tree of elements, converted by the schema once complete ----------------------

struct Node {
    std::string name;        // the element's tag
    std::string text;        // leaf text
    std::vector<Node> kids;  // element children
    bool leaf = true;
};

constexpr int kMaxNesting = 64;

// Whether the text between `NS<` and the next '>' can be a tag (an optional '/', a name, attributes): not when it
// holds a '<', i.e. when the '>' is that of a later marker (`NS</` + `NS</invoke>` is text followed by a closing
// tag, not a tag named "]<]minimax[" followed by "[</invoke>"). Decided from the text up to that '>' alone, so a
// streamed scan and a whole one agree wherever the chunks end.
bool names_a_tag(std::string_view inside) {
    return inside.find('<') == std::string_view::npos;
}

// Parses `NS<name>body NS</name>` elements from s[pos..] until a closing tag that is not theirs or the end.
std::vector<Node> parse_elements(std::string_view s, std::size_t& pos, int depth);

// The body of element `name` starting at s[pos]: nested elements or leaf text up to its closing tag.
Node parse_body(std::string_view s, std::size_t& pos, const std::string& name, int depth) {
    Node node;
    const std::string close = std::string(kNs) + "</" + name + ">";
    const std::size_t w = skip_ws(s, pos);
    const bool nested = depth < kMaxNesting && s.substr(w).starts_with(std::string(kNs) + "<") &&
                        s.substr(w + kNs.size() + 1).size() > 0 && s[w + kNs.size() + 1] != '/';
    if (nested) {
        node.leaf = false;
        pos = w;
        node.kids = parse_elements(s, pos, depth + 1);
        const std::size_t c = skip_ws(s, pos);
        if (s.substr(c).starts_with(close)) pos = c + close.size();
        return node;
    }
    // Leaf: up to this element's closing tag when it is followed by structure (or the end).
    std::size_t search = pos;
    while (true) {
        const auto at = s.find(close, search);
        if (at == std::string_view::npos) {
            node.text = std::string(s.substr(pos));
            pos = s.size();
            return node;
        }
        const std::size_t after = skip_ws(s, at + close.size());
        if (after == s.size() || s.substr(after).starts_with(kNs)) {
            node.text = std::string(s.substr(pos, at - pos));
            pos = at + close.size();
            return node;
        }
        search = at + close.size();
    }
}

std::vector<Node> parse_elements(std::string_view s, std::size_t& pos, int depth) {
    std::vector<Node> kids;
    const std::string open = std::string(kNs) + "<";
    while (pos < s.size()) {
        const std::size_t at = s.find(kNs, pos);
        if (at == std::string_view::npos) {
            pos = s.size();
            break;
        }
        if (s.substr(at).starts_with(std::string(kNs) + "</")) {
            pos = at;  // a closing tag: the caller's
            break;
        }
        if (!s.substr(at).starts_with(open)) {
            pos = at + kNs.size();
            continue;
        }
        const auto gt = s.find('>', at + open.size());
        if (gt == std::string_view::npos) {
            pos = s.size();
            break;
        }
        if (!names_a_tag(s.substr(at + open.size(), gt - at - open.size()))) {
            pos = at + kNs.size();  // text, as step_nested reads it
            continue;
        }
        std::string name(s.substr(at + open.size(), gt - at - open.size()));
        if (const auto space = name.find_first_of(kWhitespace); space != std::string::npos) name.resize(space);
        pos = gt + 1;
        Node child = parse_body(s, pos, name, depth);
        child.name = std::move(name);
        kids.push_back(std::move(child));
    }
    return kids;
}

json node_to_json(const Node& node, const json* schema) {
    if (node.leaf) return convert_argument(node.text, schema);
    const bool as_array = schema != nullptr && schema_types(*schema).has(SchemaTypes::array) && !node.kids.empty() &&
                          node.kids.front().name == "item";
    if (as_array) {
        json array = json::array();
        const json* item_schema = items_schema(*schema);
        for (const auto& kid : node.kids) array.push_back(node_to_json(kid, item_schema));
        return array;
    }
    json object = json::object();
    for (const auto& kid : node.kids) {
        object[kid.name] = node_to_json(kid, schema != nullptr ? property_schema(*schema, kid.name) : nullptr);
    }
    return object;
}

}  // namespace

bool is_tool_call_parser_name(std::string_view name) { return name == "minimax_m3" || name == "minimax_m2"; }

ToolCallFormat tool_call_format(std::string_view name) {
    if (name == "minimax_m3") return ToolCallFormat::minimax_m3;
    if (name == "minimax_m2") return ToolCallFormat::minimax_m2;
    fail("Unknown tool-call parser '{}': use minimax_m3 or minimax_m2.", name);
}

std::string ToolCallParser::forced_prefix(ToolCallFormat format, const ToolChoice& choice) {
    const Syntax& s = syntax(format);
    if (choice.mode == ToolChoice::Mode::required) return s.block_open + "\n";
    if (choice.mode == ToolChoice::Mode::named) return s.block_open + "\n" + s.invoke_open + " name=\"" + choice.name + "\">";
    return {};
}

ToolCallParser::ToolCallParser(ToolCallFormat format, const std::vector<ToolDefinition>& tools, IdGenerator ids,
                               std::size_t max_calls)
    : format_(format), assembler_(tools, std::move(ids), max_calls) {}

ToolParseDelta ToolCallParser::feed(std::string_view text) {
    buf_.append(text);
    ToolParseDelta out;
    while (step(out)) {
    }
    return out;
}

ToolParseDelta ToolCallParser::finish() {
    finishing_ = true;
    ToolParseDelta out;
    while (step(out)) {
    }
    if (state_ == State::nested) finish_nested(buf_.size(), out);
    if (state_ == State::text && !buf_.empty()) out.content += buf_;
    assembler_.end_call(out);
    buf_.clear();
    state_ = State::text;
    return out;
}

bool ToolCallParser::step(ToolParseDelta& out) {
    switch (state_) {
        case State::text: return step_text(out);
        case State::block: return step_block(out);
        case State::invoke: return step_invoke(out);
        case State::param_start: return step_param_start();
        case State::leaf: return step_leaf(out);
        case State::nested: return step_nested(out);
    }
    return false;
}

bool ToolCallParser::step_text(ToolParseDelta& out) {
    const Syntax& s = syntax(format_);
    auto at = buf_.find(s.block_open);
    std::size_t hold = partial_marker_suffix(buf_, s.block_open);
    bool implicit = false;
    if (format_ == ToolCallFormat::minimax_m3) {
        // A namespaced invoke without the wrapper still starts a call.
        const auto invoke = buf_.find(s.invoke_open);
        if (invoke < at) {
            at = invoke;
            implicit = true;
        }
        hold = std::max(hold, partial_marker_suffix(buf_, s.invoke_open));
    }
    if (at != std::string::npos) {
        out.content.append(buf_, 0, at);
        buf_.erase(0, implicit ? at : at + s.block_open.size());
        state_ = State::block;
        saw_tool_call_ = true;
        return true;
    }
    if (finishing_) hold = 0;
    out.content.append(buf_, 0, buf_.size() - hold);
    buf_.erase(0, buf_.size() - hold);
    return false;
}

bool ToolCallParser::step_block(ToolParseDelta& out) {
    const Syntax& s = syntax(format_);
    // Whitespace between calls belongs to the structure; before anything else it is content.
    const std::size_t w = skip_ws(buf_);
    if (w == buf_.size()) {
        if (finishing_) buf_.clear();
        return false;
    }
    const std::string_view rest = std::string_view(buf_).substr(w);
    const Match invoke = starts(rest, s.invoke_open);
    if (invoke == Match::yes) {
        const auto gt = rest.find('>', s.invoke_open.size());
        if (gt == std::string::npos && rest.size() < kMaxTagLength && !finishing_) return false;
        if (gt != std::string::npos) {
            const std::string_view attrs = rest.substr(s.invoke_open.size(), gt - s.invoke_open.size());
            assembler_.begin_call(attribute(attrs, "name").value_or(""), out);
            buf_.erase(0, w + gt + 1);
            state_ = State::invoke;
            return true;
        }
        // Unterminated invoke tag: not a call.
    }
    const Match close = starts(rest, s.block_close);
    if (close == Match::yes) {
        buf_.erase(0, w + s.block_close.size());
        state_ = State::text;
        return true;
    }
    if ((invoke == Match::partial || close == Match::partial) && !finishing_) return false;
    // Not structure: release it as content up to the next possible tag.
    const char tag_start = s.block_close.front();
    auto next = buf_.find(tag_start, w + 1);
    if (next == std::string::npos) next = buf_.size();
    // Whitespace before the next tag (or the end) waits: before a call it is structure, at the end it is dropped.
    if (!(finishing_ && next == buf_.size())) next = buf_.find_last_not_of(kWhitespace, next - 1) + 1;
    out.content.append(buf_, 0, next);
    buf_.erase(0, next);
    return true;
}

bool ToolCallParser::step_invoke(ToolParseDelta& out) {
    const Syntax& s = syntax(format_);
    buf_.erase(0, skip_ws(buf_));
    if (buf_.empty()) return false;
    const Match invoke_close = starts(buf_, s.invoke_close);
    if (invoke_close == Match::yes) {
        assembler_.end_call(out);
        buf_.erase(0, s.invoke_close.size());
        state_ = State::block;
        return true;
    }
    const Match block_close = starts(buf_, s.block_close);
    if (block_close == Match::yes) {
        assembler_.end_call(out);
        buf_.erase(0, s.block_close.size());
        state_ = State::text;
        return true;
    }
    if ((invoke_close == Match::partial || block_close == Match::partial) && !finishing_) return false;
    const Match open = starts(buf_, s.param_open);
    if (open == Match::yes) {
        const bool is_close_tag = buf_.size() > s.param_open.size() && buf_[s.param_open.size()] == '/';
        const auto gt = buf_.find('>', s.param_open.size());
        if (!is_close_tag && gt == std::string::npos && buf_.size() < kMaxTagLength && !finishing_) return false;
        if (!is_close_tag && gt != std::string::npos) {
            const std::string_view inside = std::string_view(buf_).substr(s.param_open.size(), gt - s.param_open.size());
            std::string name;
            if (format_ == ToolCallFormat::minimax_m3) {
                name = std::string(inside.substr(0, inside.find_first_of(kWhitespace)));
            } else {
                name = attribute(inside, "name").value_or("");
            }
            assembler_.begin_param(name, out);
            param_ = std::move(name);
            buf_.erase(0, gt + 1);
            if (format_ == ToolCallFormat::minimax_m3) {
                state_ = State::param_start;
            } else {
                state_ = State::leaf;
                trim_leading_newline_ = true;
            }
            return true;
        }
    } else if (open == Match::partial && !finishing_) {
        return false;
    }
    // Anything else between parameters is dropped, up to the next possible tag.
    const char tag_start = s.invoke_close.front();
    auto next = buf_.find(tag_start, 1);
    if (next == std::string::npos) next = buf_.size();
    buf_.erase(0, next);
    return true;
}

bool ToolCallParser::step_param_start() {
    // m3: a body that starts with a namespaced open tag is nested XML; anything else is leaf text.
    const std::size_t w = skip_ws(buf_);
    const std::string open = std::string(kNs) + "<";
    const Match m = starts(std::string_view(buf_).substr(w), open);
    if (w == buf_.size() || m == Match::partial || (m == Match::yes && buf_.size() == w + open.size())) {
        if (!finishing_) return false;
        state_ = State::leaf;
        return true;
    }
    if (m == Match::yes && buf_[w + open.size()] != '/') {
        buf_.erase(0, w);
        state_ = State::nested;
        nested_scan_ = 0;
        nested_depth_ = 0;
        return true;
    }
    state_ = State::leaf;
    return true;
}

int ToolCallParser::continuation(std::string_view after) const {
    const std::size_t w = skip_ws(after);
    const std::string_view rest = after.substr(w);
    if (rest.empty()) return finishing_ ? 1 : -1;
    if (format_ == ToolCallFormat::minimax_m3) {
        const Match m = starts(rest, kNs);
        return m == Match::yes ? 1 : m == Match::partial ? (finishing_ ? 0 : -1) : 0;
    }
    bool partial = false;
    for (const std::string_view next : {"<parameter", "</invoke>", "</minimax:tool_call>"}) {
        const Match m = starts(rest, next);
        if (m == Match::yes) return 1;
        partial = partial || m == Match::partial;
    }
    return partial && !finishing_ ? -1 : 0;
}

bool ToolCallParser::step_leaf(ToolParseDelta& out) {
    const bool m2 = format_ == ToolCallFormat::minimax_m2;
    if (trim_leading_newline_) {
        if (buf_.empty() && !finishing_) return false;
        if (!buf_.empty() && buf_.front() == '\n') buf_.erase(0, 1);
        trim_leading_newline_ = false;
    }
    const std::string close = m2 ? std::string("</parameter>") : std::string(kNs) + "</" + param_ + ">";
    // m2 trims one trailing line break: a '\n' just before what is released waits until the value is known.
    const auto release = [&](std::size_t n, bool final) {
        std::size_t keep = n;
        if (m2 && keep > 0 && buf_[keep - 1] == '\n') --keep;
        assembler_.value_text(std::string_view(buf_).substr(0, keep), out);
        buf_.erase(0, final ? n : keep);
    };
    const auto at = buf_.find(close);
    if (at == std::string::npos) {
        const std::size_t hold = finishing_ ? 0 : partial_marker_suffix(buf_, close);
        if (finishing_) {
            release(buf_.size(), true);
            assembler_.end_leaf(out);
            state_ = State::invoke;
            return true;
        }
        release(buf_.size() - hold, false);
        return false;
    }
    const int more = continuation(std::string_view(buf_).substr(at + close.size()));
    if (more < 0) {
        release(at, false);
        return false;
    }
    if (more > 0) {
        release(at, true);
        buf_.erase(0, close.size());
        assembler_.end_leaf(out);
        state_ = State::invoke;
        return true;
    }
    // A closing tag inside the value: it is text.
    assembler_.value_text(std::string_view(buf_).substr(0, at + close.size()), out);
    buf_.erase(0, at + close.size());
    return true;
}

void ToolCallParser::finish_nested(std::size_t raw_end, ToolParseDelta& out) {
    const std::string_view raw = std::string_view(buf_).substr(0, raw_end);
    std::size_t pos = 0;
    Node node;
    node.leaf = false;
    node.kids = parse_elements(raw, pos, 1);
    assembler_.end_value(node_to_json(node, assembler_.param_schema()), out);
    buf_.erase(0, raw_end);
    state_ = State::invoke;
}

bool ToolCallParser::step_nested(ToolParseDelta& out) {
    // The whole nested value is buffered; scan its tags to find the parameter's own closing tag.
    while (true) {
        const auto at = buf_.find(kNs, nested_scan_);
        if (at == std::string::npos) {
            nested_scan_ = buf_.size() - partial_marker_suffix(buf_, kNs);
            return false;
        }
        const std::size_t tag = at + kNs.size();
        if (buf_.size() <= tag) {
            nested_scan_ = at;
            return false;
        }
        if (buf_[tag] != '<') {
            nested_scan_ = tag;
            continue;
        }
        const auto gt = buf_.find('>', tag);
        if (gt == std::string::npos) {
            nested_scan_ = at;
            if (buf_.size() - at > kMaxTagLength) nested_scan_ = tag;
            return false;
        }
        if (!names_a_tag(std::string_view(buf_).substr(tag + 1, gt - tag - 1))) {
            nested_scan_ = tag;  // text; a marker inside it may start the next tag
            continue;
        }
        const bool closing = buf_.size() > tag + 1 && buf_[tag + 1] == '/';
        if (!closing) {
            ++nested_depth_;
            nested_scan_ = gt + 1;
            continue;
        }
        const std::string_view name = std::string_view(buf_).substr(tag + 2, gt - tag - 2);
        if (nested_depth_ > 0) {
            --nested_depth_;
            nested_scan_ = gt + 1;
            continue;
        }
        if (name == param_) {
            const int more = continuation(std::string_view(buf_).substr(gt + 1));
            if (more < 0) {
                nested_scan_ = at;
                return false;
            }
            if (more > 0) {
                finish_nested(at, out);
                buf_.erase(0, gt + 1 - at);
                return true;
            }
            nested_scan_ = gt + 1;
            continue;
        }
        if (name == "invoke" || name == "tool_call") {
            // The parameter was never closed: end it here and let the invoke state see the tag.
            finish_nested(at, out);
            return true;
        }
        nested_scan_ = gt + 1;
    }
}

}  // namespace msa::server
