#include "chat/jinja_value.h"

#include "chat/jinja_error.h"
#include "chat/py_text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace msa::jinja {

// ---- Dict -----------------------------------------------------------------------------------------------------

namespace {
constexpr std::size_t kLinearSearchLimit = 8;

bool key_equal(const Value& a, const Value& b) {
    if (a.is_string() && b.is_string()) {
        return a.as_string() == b.as_string();
    }
    return hash_key(a) == hash_key(b);
}
}  // namespace

std::size_t Dict::find_index(const Value& key) const {
    if (entries_.size() <= kLinearSearchLimit) {
        if (!key.is_string()) {
            hash_key(key);  // raises for unhashable keys, like Python
        }
        for (std::size_t i = 0; i < entries_.size(); ++i) {
            if (key_equal(entries_[i].first, key)) {
                return i;
            }
        }
        return entries_.size();
    }
    if (index_.size() != entries_.size()) {
        index_.clear();
        for (std::size_t i = 0; i < entries_.size(); ++i) {
            index_.emplace(hash_key(entries_[i].first), i);
        }
    }
    const auto it = index_.find(hash_key(key));
    return it == index_.end() ? entries_.size() : it->second;
}

const Value* Dict::find(const Value& key) const {
    const std::size_t i = find_index(key);
    return i < entries_.size() ? &entries_[i].second : nullptr;
}

const Value* Dict::find(std::string_view key) const {
    if (entries_.size() <= kLinearSearchLimit) {
        for (const auto& [k, v] : entries_) {
            if (k.is_string() && k.as_string() == key) {
                return &v;
            }
        }
        return nullptr;
    }
    return find(Value(key));
}

void Dict::set(const Value& key, Value value) {
    const std::size_t i = find_index(key);
    if (i < entries_.size()) {
        entries_[i].second = std::move(value);
        return;
    }
    entries_.emplace_back(key, std::move(value));
    if (!index_.empty()) {
        index_.emplace(hash_key(key), entries_.size() - 1);
    }
}

void Dict::clear() {
    entries_.clear();
    index_.clear();
}

// ---- Value ----------------------------------------------------------------------------------------------------

Value::Value(std::string s) : type_(Type::kString), ptr_(std::make_shared<std::string>(std::move(s))) {}

Value Value::undefined(std::string hint) {
    Value v;
    v.ptr_ = std::make_shared<std::string>(std::move(hint));
    return v;
}

Value Value::none() {
    Value v;
    v.type_ = Type::kNone;
    return v;
}

Value Value::markup(std::string s) {
    Value v(std::move(s));
    v.markup_ = true;
    return v;
}

Value Value::list(List items) {
    Value v;
    v.type_ = Type::kList;
    v.ptr_ = std::make_shared<List>(std::move(items));
    return v;
}

Value Value::tuple(List items) {
    Value v = list(std::move(items));
    v.type_ = Type::kTuple;
    return v;
}

Value Value::dict(Dict d) {
    Value v;
    v.type_ = Type::kDict;
    v.ptr_ = std::make_shared<Dict>(std::move(d));
    return v;
}

Value Value::object(std::shared_ptr<Object> obj) {
    Value v;
    v.type_ = Type::kObject;
    v.ptr_ = std::move(obj);
    return v;
}

double Value::as_double() const {
    switch (type_) {
        case Type::kBool:
            return b_ ? 1.0 : 0.0;
        case Type::kInt:
            return static_cast<double>(i_);
        case Type::kFloat:
            return f_;
        default:
            return 0.0;
    }
}

const std::string& Value::as_string() const {
    return *static_cast<const std::string*>(ptr_.get());
}

const List& Value::as_list() const {
    return *static_cast<const List*>(ptr_.get());
}

const Dict& Value::as_dict() const {
    return *static_cast<const Dict*>(ptr_.get());
}

Object& Value::as_object() const {
    return *static_cast<Object*>(ptr_.get());
}

std::shared_ptr<Object> Value::object_ptr() const {
    return std::static_pointer_cast<Object>(ptr_);
}

const std::string& Value::undefined_hint() const {
    static const std::string kEmpty;
    return ptr_ ? *static_cast<const std::string*>(ptr_.get()) : kEmpty;
}

bool Value::truthy() const {
    switch (type_) {
        case Type::kUndefined:
        case Type::kNone:
            return false;
        case Type::kBool:
            return b_;
        case Type::kInt:
            return i_ != 0;
        case Type::kFloat:
            return f_ != 0.0;
        case Type::kString:
            return !as_string().empty();
        case Type::kList:
        case Type::kTuple:
            return !as_list().empty();
        case Type::kDict:
            return !as_dict().empty();
        case Type::kObject:
            return as_object().truthy();
    }
    return false;
}

// ---- Object -----------------------------------------------------------------------------------------------------

std::string Object::repr() const {
    return "<" + type_name() + " object>";
}

Value Object::get_attr(std::string_view name) {
    return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(), name));
}

Value Object::call(Interpreter&, CallArgs&) {
    raise("'{}' object is not callable", type_name());
}

List Object::iterate() {
    raise("'{}' object is not iterable", type_name());
}

// ---- CallArgs --------------------------------------------------------------------------------------------------

const Value* CallArgs::get(std::size_t position, std::string_view name) {
    used_positional.resize(positional.size(), false);
    used_keyword.resize(keyword.size(), false);
    if (position < positional.size()) {
        used_positional[position] = true;
        for (std::size_t i = 0; i < keyword.size(); ++i) {
            if (keyword[i].first == name) {
                raise("got multiple values for argument '{}'", name);
            }
        }
        return &positional[position];
    }
    for (std::size_t i = 0; i < keyword.size(); ++i) {
        if (keyword[i].first == name) {
            used_keyword[i] = true;
            return &keyword[i].second;
        }
    }
    return nullptr;
}

void CallArgs::check_consumed(std::string_view callee) const {
    for (std::size_t i = 0; i < positional.size(); ++i) {
        if (i >= used_positional.size() || !used_positional[i]) {
            raise("{}() takes {} positional argument(s) but {} were given", callee,
                  std::count(used_positional.begin(), used_positional.end(), true), positional.size());
        }
    }
    for (std::size_t i = 0; i < keyword.size(); ++i) {
        if (i >= used_keyword.size() || !used_keyword[i]) {
            raise("{}() got an unexpected keyword argument '{}'", callee, keyword[i].first);
        }
    }
}

// ---- Python semantics ----------------------------------------------------------------------------------------

namespace {

// Bounds the recursion of every recursive operation on values (also through objects such as a namespace that
// contains itself), like Python's recursion limit.
class DepthGuard {
public:
    DepthGuard() {
        if (++depth_ > kMaxValueDepth) {
            --depth_;
            raise("maximum recursion depth exceeded ({} levels of nested values)", kMaxValueDepth);
        }
    }
    ~DepthGuard() { --depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

private:
    static thread_local int depth_;
};
thread_local int DepthGuard::depth_ = 0;

// Exact comparison of an integer with a double, as Python does.
int compare_int_double(std::int64_t i, double d) {
    if (std::isnan(d)) {
        return 2;  // unordered
    }
    if (d >= 9223372036854775808.0) {
        return -1;
    }
    if (d < -9223372036854775808.0) {
        return 1;
    }
    const double fl = std::floor(d);
    const auto di = static_cast<std::int64_t>(fl);
    if (i < di) {
        return -1;
    }
    if (i > di) {
        return 1;
    }
    return fl == d ? 0 : -1;
}

// -1, 0, 1, or 2 when unordered (NaN).
int compare_numbers(const Value& a, const Value& b) {
    if (a.is_integral() && b.is_integral()) {
        const auto x = a.as_int();
        const auto y = b.as_int();
        return x < y ? -1 : (x > y ? 1 : 0);
    }
    if (a.is_integral()) {
        return compare_int_double(a.as_int(), b.as_double());
    }
    if (b.is_integral()) {
        const int c = compare_int_double(b.as_int(), a.as_double());
        return c == 2 ? 2 : -c;
    }
    const double x = a.as_double();
    const double y = b.as_double();
    if (std::isnan(x) || std::isnan(y)) {
        return 2;
    }
    return x < y ? -1 : (x > y ? 1 : 0);
}

bool equal_impl(const Value& a, const Value& b) {
    const DepthGuard guard;
    if (a.is_number() && b.is_number()) {
        return compare_numbers(a, b) == 0;
    }
    if (a.type() != b.type()) {
        return false;
    }
    switch (a.type()) {
        case Value::Type::kUndefined:
        case Value::Type::kNone:
            return true;
        case Value::Type::kString:
            return a.as_string() == b.as_string();
        case Value::Type::kList:
        case Value::Type::kTuple: {
            const List& x = a.as_list();
            const List& y = b.as_list();
            if (x.size() != y.size()) {
                return false;
            }
            for (std::size_t i = 0; i < x.size(); ++i) {
                if (!equal_impl(x[i], y[i])) {
                    return false;
                }
            }
            return true;
        }
        case Value::Type::kDict: {
            const Dict& x = a.as_dict();
            const Dict& y = b.as_dict();
            if (x.size() != y.size()) {
                return false;
            }
            for (const auto& [k, v] : x.entries()) {
                const Value* other = y.find(k);
                if (other == nullptr || !equal_impl(v, *other)) {
                    return false;
                }
            }
            return true;
        }
        case Value::Type::kObject:
            return a.identity() == b.identity();
        default:
            return false;
    }
}

bool less_impl(const Value& a, const Value& b) {
    const DepthGuard guard;
    if (a.is_number() && b.is_number()) {
        return compare_numbers(a, b) == -1;
    }
    if (a.is_string() && b.is_string()) {
        return a.as_string() < b.as_string();
    }
    if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
        const List& x = a.as_list();
        const List& y = b.as_list();
        for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (!equal_impl(x[i], y[i])) {
                return less_impl(x[i], y[i]);
            }
        }
        return x.size() < y.size();
    }
    if (a.is_undefined() || b.is_undefined()) {
        raise("{}", a.is_undefined() ? a.undefined_hint() : b.undefined_hint());
    }
    raise("'<' not supported between instances of '{}' and '{}'", python_type_name(a), python_type_name(b));
}

void hash_key_impl(const Value& v, std::string& out) {
    const DepthGuard guard;
    switch (v.type()) {
        case Value::Type::kNone:
            out += 'N';
            return;
        case Value::Type::kBool:
        case Value::Type::kInt:
            out += 'i';
            out += pytext::int_repr(v.as_int());
            out += ';';
            return;
        case Value::Type::kFloat: {
            const double d = v.as_double();
            if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) {
                out += 'i';
                out += pytext::int_repr(static_cast<std::int64_t>(d));
            } else {
                out += 'f';
                out += pytext::float_repr(d);
            }
            out += ';';
            return;
        }
        case Value::Type::kString:
            out += 's';
            out += std::to_string(v.as_string().size());
            out += ':';
            out += v.as_string();
            return;
        case Value::Type::kTuple:
            out += '(';
            for (const Value& item : v.as_list()) {
                hash_key_impl(item, out);
            }
            out += ')';
            return;
        case Value::Type::kUndefined:
            out += 'U';
            return;
        case Value::Type::kObject:
            if (!v.as_object().is_mapping()) {
                out += 'o';
                out += std::to_string(reinterpret_cast<std::uintptr_t>(v.identity()));
                out += ';';
                return;
            }
            [[fallthrough]];
        default:
            raise("unhashable type: '{}'", python_type_name(v));
    }
}

void repr_impl(const Value& v, std::string& out) {
    const DepthGuard guard;
    switch (v.type()) {
        case Value::Type::kUndefined:
            out += "Undefined";
            return;
        case Value::Type::kNone:
            out += "None";
            return;
        case Value::Type::kBool:
            out += v.as_bool() ? "True" : "False";
            return;
        case Value::Type::kInt:
            out += pytext::int_repr(v.as_int());
            return;
        case Value::Type::kFloat:
            out += pytext::float_repr(v.as_double());
            return;
        case Value::Type::kString:
            if (v.is_markup()) {
                out += "Markup(" + pytext::repr(v.as_string()) + ")";
            } else {
                out += pytext::repr(v.as_string());
            }
            return;
        case Value::Type::kList:
        case Value::Type::kTuple: {
            const bool tuple = v.is_tuple();
            out += tuple ? '(' : '[';
            const List& items = v.as_list();
            for (std::size_t i = 0; i < items.size(); ++i) {
                if (i > 0) {
                    out += ", ";
                }
                repr_impl(items[i], out);
            }
            if (tuple && items.size() == 1) {
                out += ',';
            }
            out += tuple ? ')' : ']';
            return;
        }
        case Value::Type::kDict: {
            out += '{';
            bool first = true;
            for (const auto& [k, val] : v.as_dict().entries()) {
                if (!first) {
                    out += ", ";
                }
                first = false;
                repr_impl(k, out);
                out += ": ";
                repr_impl(val, out);
            }
            out += '}';
            return;
        }
        case Value::Type::kObject:
            out += v.as_object().repr();
            return;
    }
}

}  // namespace

bool values_equal(const Value& a, const Value& b) {
    return equal_impl(a, b);
}

bool value_less(const Value& a, const Value& b) {
    return less_impl(a, b);
}

std::string hash_key(const Value& v) {
    std::string out;
    hash_key_impl(v, out);
    return out;
}

std::string python_type_name(const Value& v) {
    switch (v.type()) {
        case Value::Type::kUndefined:
            return "Undefined";
        case Value::Type::kNone:
            return "NoneType";
        case Value::Type::kBool:
            return "bool";
        case Value::Type::kInt:
            return "int";
        case Value::Type::kFloat:
            return "float";
        case Value::Type::kString:
            return v.is_markup() ? "Markup" : "str";
        case Value::Type::kList:
            return "list";
        case Value::Type::kTuple:
            return "tuple";
        case Value::Type::kDict:
            return "dict";
        case Value::Type::kObject:
            return v.as_object().type_name();
    }
    return "object";
}

std::string object_type_repr(const Value& v) {
    if (v.is_none()) {
        return "None";
    }
    return python_type_name(v) + " object";
}

std::string to_str(const Value& v) {
    switch (v.type()) {
        case Value::Type::kUndefined:
            return {};
        case Value::Type::kString:
            return v.as_string();
        default: {
            std::string out;
            repr_impl(v, out);
            return out;
        }
    }
}

std::string to_repr(const Value& v) {
    std::string out;
    repr_impl(v, out);
    return out;
}

// ---- json.dumps ----------------------------------------------------------------------------------------------

namespace {

class JsonWriter {
public:
    explicit JsonWriter(const JsonDumpOptions& options) : options_(options) {}

    void value(const Value& v, int level) {
        const DepthGuard guard;
        switch (v.type()) {
            case Value::Type::kNone:
                put("null");
                return;
            case Value::Type::kBool:
                put(v.as_bool() ? "true" : "false");
                return;
            case Value::Type::kInt:
                put(pytext::int_repr(v.as_int()));
                return;
            case Value::Type::kFloat:
                put(float_text(v.as_double()));
                return;
            case Value::Type::kString:
                string(v.as_string());
                return;
            case Value::Type::kList:
            case Value::Type::kTuple:
                array(v.as_list(), level);
                return;
            case Value::Type::kDict:
                object(v.as_dict(), level);
                return;
            default:
                raise("Object of type {} is not JSON serializable", python_type_name(v));
        }
    }

    std::string take() { return std::move(out_); }

private:
    void put(std::string_view s) {
        if (out_.size() + s.size() > options_.max_bytes) {
            raise("tojson output exceeds the limit of {} bytes", options_.max_bytes);
        }
        out_.append(s);
    }

    static std::string float_text(double d) {
        if (std::isnan(d)) {
            return "NaN";
        }
        if (std::isinf(d)) {
            return d > 0 ? "Infinity" : "-Infinity";
        }
        return pytext::float_repr(d);
    }

    void string(std::string_view s) {
        static const char* hex = "0123456789abcdef";
        std::string buf;
        buf.reserve(s.size() + 2);
        buf.push_back('"');
        auto u_escape = [&](unsigned unit) {
            buf += "\\u";
            for (int i = 3; i >= 0; --i) {
                buf.push_back(hex[(unit >> (4 * i)) & 15]);
            }
        };
        std::size_t pos = 0;
        while (pos < s.size()) {
            const auto c = static_cast<unsigned char>(s[pos]);
            if (c < 0x80) {
                ++pos;
                switch (c) {
                    case '"':
                        buf += "\\\"";
                        break;
                    case '\\':
                        buf += "\\\\";
                        break;
                    case '\n':
                        buf += "\\n";
                        break;
                    case '\r':
                        buf += "\\r";
                        break;
                    case '\t':
                        buf += "\\t";
                        break;
                    case '\b':
                        buf += "\\b";
                        break;
                    case '\f':
                        buf += "\\f";
                        break;
                    default:
                        if (c < 0x20 || (c == 0x7F && options_.ensure_ascii)) {
                            u_escape(c);
                        } else {
                            buf.push_back(static_cast<char>(c));
                        }
                }
                continue;
            }
            const std::size_t start = pos;
            const std::u32string cp = pytext::decode(s.substr(start, std::min<std::size_t>(4, s.size() - start)));
            const char32_t ch = cp.empty() ? 0xFFFD : cp[0];
            std::string enc;
            pytext::append_utf8(enc, ch);
            pos += enc.size();
            if (!options_.ensure_ascii) {
                buf += enc;
            } else if (ch < 0x10000) {
                u_escape(ch);
            } else {
                const char32_t v = ch - 0x10000;
                u_escape(0xD800 + (v >> 10));
                u_escape(0xDC00 + (v & 0x3FF));
            }
        }
        buf.push_back('"');
        put(buf);
    }

    void newline(int level) {
        if (!options_.has_indent) {
            return;
        }
        std::string nl = "\n";
        for (int i = 0; i < level; ++i) {
            nl += options_.indent;
        }
        put(nl);
    }

    void array(const List& items, int level) {
        if (items.empty()) {
            put("[]");
            return;
        }
        put("[");
        newline(level + 1);
        for (std::size_t i = 0; i < items.size(); ++i) {
            if (i > 0) {
                put(options_.item_separator);
                newline(level + 1);
            }
            value(items[i], level + 1);
        }
        newline(level);
        put("]");
    }

    std::string key_text(const Value& k) {
        switch (k.type()) {
            case Value::Type::kString:
                return k.as_string();
            case Value::Type::kBool:
                return k.as_bool() ? "true" : "false";
            case Value::Type::kInt:
                return pytext::int_repr(k.as_int());
            case Value::Type::kFloat:
                return float_text(k.as_double());
            case Value::Type::kNone:
                return "null";
            default:
                raise("keys must be str, int, float, bool or None, not {}", python_type_name(k));
        }
    }

    void object(const Dict& d, int level) {
        if (d.empty()) {
            put("{}");
            return;
        }
        std::vector<const std::pair<Value, Value>*> entries;
        entries.reserve(d.size());
        for (const auto& e : d.entries()) {
            entries.push_back(&e);
        }
        if (options_.sort_keys) {
            std::stable_sort(entries.begin(), entries.end(),
                             [](const auto* x, const auto* y) { return value_less(x->first, y->first); });
        }
        put("{");
        newline(level + 1);
        bool first = true;
        for (const auto* e : entries) {
            if (!first) {
                put(options_.item_separator);
                newline(level + 1);
            }
            first = false;
            string(key_text(e->first));
            put(options_.key_separator);
            value(e->second, level + 1);
        }
        newline(level);
        put("}");
    }

    const JsonDumpOptions& options_;
    std::string out_;
};

template <typename Json>
Value from_json_impl(const Json& j) {
    const DepthGuard guard;
    switch (j.type()) {
        case nlohmann::json::value_t::null:
            return Value::none();
        case nlohmann::json::value_t::boolean:
            return Value(j.template get<bool>());
        case nlohmann::json::value_t::number_integer:
            return Value(j.template get<std::int64_t>());
        case nlohmann::json::value_t::number_unsigned: {
            const auto u = j.template get<std::uint64_t>();
            if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
                return Value(static_cast<std::int64_t>(u));
            }
            return Value(static_cast<double>(u));
        }
        case nlohmann::json::value_t::number_float:
            return Value(j.template get<double>());
        case nlohmann::json::value_t::string:
            return Value(j.template get<std::string>());
        case nlohmann::json::value_t::array: {
            List items;
            items.reserve(j.size());
            for (const auto& item : j) {
                items.push_back(from_json_impl(item));
            }
            return Value::list(std::move(items));
        }
        case nlohmann::json::value_t::object: {
            Dict d;
            for (auto it = j.begin(); it != j.end(); ++it) {
                d.set(Value(it.key()), from_json_impl(it.value()));
            }
            return Value::dict(std::move(d));
        }
        default:
            raise("JSON value of type '{}' cannot be passed to a template", j.type_name());
    }
}

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpOptions& options) {
    JsonWriter writer(options);
    writer.value(v, 0);
    return writer.take();
}

Value from_json(const nlohmann::ordered_json& j) {
    return from_json_impl(j);
}

Value from_json(const nlohmann::json& j) {
    return from_json_impl(j);
}

}  // namespace msa::jinja
