// The value type of the Jinja engine: a JSON-like dynamic value with Python semantics (what jinja2 templates see).
// Scalars are stored inline; strings, lists and dicts are immutable and shared (copying a Value is cheap), as the
// sandbox HF uses forbids mutating them. Objects (namespace, loop, macro, generator, ...) are the only mutable or
// callable values and derive from Object.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace msa::jinja {

class Value;
class Object;
class Interpreter;
struct CallArgs;

using List = std::vector<Value>;
class Dict;

class Value {
public:
    enum class Type : std::uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kObject };

    Value() = default;  // undefined
    Value(bool b) : type_(Type::kBool), b_(b) {}  // NOLINT(google-explicit-constructor)
    Value(int i) : type_(Type::kInt), i_(i) {}    // NOLINT(google-explicit-constructor)
    Value(std::int64_t i) : type_(Type::kInt), i_(i) {}  // NOLINT(google-explicit-constructor)
    Value(double f) : type_(Type::kFloat), f_(f) {}      // NOLINT(google-explicit-constructor)
    Value(std::string s);                                // NOLINT(google-explicit-constructor)
    Value(std::string_view s) : Value(std::string(s)) {}  // NOLINT(google-explicit-constructor)
    Value(const char* s) : Value(std::string(s)) {}      // NOLINT(google-explicit-constructor)

    // An undefined value; `hint` is the message of the error raised when it is used where a value is required
    // (e.g. "'x' is undefined", "'dict object' has no attribute 'y'").
    static Value undefined(std::string hint);
    static Value none();
    static Value markup(std::string s);  // a string marked safe (jinja2 Markup)
    static Value list(List items);
    static Value tuple(List items);
    static Value dict(Dict d);
    static Value object(std::shared_ptr<Object> obj);

    Type type() const { return type_; }
    bool is_undefined() const { return type_ == Type::kUndefined; }
    bool is_none() const { return type_ == Type::kNone; }
    bool is_bool() const { return type_ == Type::kBool; }
    bool is_int() const { return type_ == Type::kInt; }
    bool is_float() const { return type_ == Type::kFloat; }
    bool is_string() const { return type_ == Type::kString; }
    bool is_list() const { return type_ == Type::kList; }
    bool is_tuple() const { return type_ == Type::kTuple; }
    bool is_sequence() const { return type_ == Type::kList || type_ == Type::kTuple; }
    bool is_dict() const { return type_ == Type::kDict; }
    bool is_object() const { return type_ == Type::kObject; }
    // bool, int or float (Python numbers.Number; bool is an int in Python).
    bool is_number() const { return type_ == Type::kBool || type_ == Type::kInt || type_ == Type::kFloat; }
    // bool or int (Python int).
    bool is_integral() const { return type_ == Type::kBool || type_ == Type::kInt; }
    bool is_markup() const { return type_ == Type::kString && markup_; }

    bool as_bool() const { return b_; }
    // Integer value of a bool or int.
    std::int64_t as_int() const { return type_ == Type::kBool ? static_cast<std::int64_t>(b_) : i_; }
    // Numeric value of a bool, int or float.
    double as_double() const;
    const std::string& as_string() const;
    const List& as_list() const;  // list or tuple
    const Dict& as_dict() const;
    Object& as_object() const;
    std::shared_ptr<Object> object_ptr() const;
    const std::string& undefined_hint() const;
    // Identity of shared storage (for `is sameas` and recursion guards).
    const void* identity() const { return ptr_.get(); }

    // Python truthiness.
    bool truthy() const;

private:
    Type type_ = Type::kUndefined;
    bool markup_ = false;
    union {
        bool b_;
        std::int64_t i_ = 0;
        double f_;
    };
    // String (std::string), List, Dict, Object, or the undefined hint (std::string).
    std::shared_ptr<void> ptr_;
};

// Insertion-ordered mapping with Python key semantics: keys are hashable values (None, bool, int, float, str,
// tuples of those), and 1, 1.0 and true are the same key.
class Dict {
public:
    const Value* find(const Value& key) const;
    const Value* find(std::string_view key) const;
    // Replaces the value of an existing key in place (keeping its position) or appends a new entry.
    void set(const Value& key, Value value);
    std::size_t size() const { return entries_.size(); }
    bool empty() const { return entries_.empty(); }
    const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
    void clear();

private:
    std::size_t find_index(const Value& key) const;
    std::vector<std::pair<Value, Value>> entries_;
    // Built once the dict grows past a few entries: canonical key text -> position.
    mutable std::unordered_map<std::string, std::size_t> index_;
};

// Runtime objects: everything that is neither a scalar nor a plain container.
class Object : public std::enable_shared_from_this<Object> {
public:
    virtual ~Object() = default;
    // Python type name used in messages ("Namespace", "generator", "macro", ...).
    virtual std::string type_name() const = 0;
    // Python str()/repr().
    virtual std::string repr() const;
    // Attribute lookup (`obj.name`); an undefined value when absent.
    virtual Value get_attr(std::string_view name);
    virtual bool is_callable() const { return false; }
    virtual Value call(Interpreter& interp, CallArgs& args);
    // Python truthiness (bool()) and len(); nullopt when the object has no length.
    virtual bool truthy() const { return true; }
    virtual std::optional<std::int64_t> length() const { return std::nullopt; }
    // Iteration (generators, loop objects, dict views); false when the object is not iterable.
    virtual bool is_iterable() const { return false; }
    // True when reversed() works on it (dict views).
    virtual bool is_reversible() const { return false; }
    // Drains the remaining items (one-shot iterators are consumed).
    virtual List iterate();
    // True when a mapping (`is mapping`).
    virtual bool is_mapping() const { return false; }
    // Drops references to other values (used to break reference cycles at the end of a render).
    virtual void clear() {}
};

// Keyword and positional arguments of a call.
struct CallArgs {
    List positional;
    std::vector<std::pair<std::string, Value>> keyword;

    // Looks up an argument by keyword or position; an undefined value when absent. Marks it consumed.
    const Value* get(std::size_t position, std::string_view name);
    // Throws when arguments were given that no get() consumed ("unexpected keyword argument 'x'").
    void check_consumed(std::string_view callee) const;

    std::vector<bool> used_positional;
    std::vector<bool> used_keyword;
};

// Python semantics of the basic operations. All throw msa::Error with Python's message on a TypeError.
bool values_equal(const Value& a, const Value& b);
// Python `<` (TypeError for unorderable types).
bool value_less(const Value& a, const Value& b);
// Canonical hash key; throws for unhashable values (list, dict, objects).
std::string hash_key(const Value& v);
// Python type name as in messages: "str", "int", "list", "dict", "NoneType", ...
std::string python_type_name(const Value& v);
// jinja2's object_type_repr: "None", "str object", "dict object", "jinja2.utils.Namespace object", ...
std::string object_type_repr(const Value& v);
// Python str() (undefined -> ""), and repr().
std::string to_str(const Value& v);
std::string to_repr(const Value& v);
// Python json.dumps(v, ensure_ascii, indent, separators, sort_keys), as HF's tojson filter calls it.
struct JsonDumpOptions {
    bool ensure_ascii = false;
    bool has_indent = false;
    std::string indent;  // the indent unit when has_indent
    bool has_separators = false;
    std::string item_separator = ", ";
    std::string key_separator = ": ";
    bool sort_keys = false;
    std::size_t max_bytes = 64u << 20;
};
std::string json_dumps(const Value& v, const JsonDumpOptions& options);

// Conversion from JSON (numbers keep their int/float kind; uint64 beyond int64 become floats). Use ordered_json
// to keep the key order of the client's JSON, as Python dicts do (tojson output depends on it); nlohmann::json
// sorts keys. Nesting deeper than kMaxValueDepth is rejected.
Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);

// Nesting limit for recursive operations on values (repr, equality, JSON), like Python's recursion limit.
constexpr int kMaxValueDepth = 512;

}  // namespace msa::jinja
