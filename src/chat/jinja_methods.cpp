// Python methods of str, list, tuple and dict values as the sandbox exposes them to templates. Mutating methods
// (list.append, dict.update, ...) exist but are unsafe in HF's ImmutableSandboxedEnvironment: looking them up gives
// an undefined value whose use raises the sandbox's SecurityError.
#include "chat/jinja_args.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_objects.h"
#include "chat/py_text.h"

#include <algorithm>
#include <array>

namespace msa::jinja {

namespace {

constexpr std::array<std::string_view, 47> kStrMethods = {
    "capitalize", "casefold",     "center",     "count",     "encode",     "endswith",   "expandtabs", "find",
    "format",     "format_map",   "index",      "isalnum",   "isalpha",    "isascii",    "isdecimal",  "isdigit",
    "isidentifier", "islower",    "isnumeric",  "isprintable", "isspace",  "istitle",    "isupper",    "join",
    "ljust",      "lower",        "lstrip",     "maketrans", "partition",  "removeprefix", "removesuffix", "replace",
    "rfind",      "rindex",       "rjust",      "rpartition", "rsplit",    "rstrip",     "split",      "splitlines",
    "startswith", "strip",        "swapcase",   "title",     "translate",  "upper",      "zfill"};
constexpr std::array<std::string_view, 3> kListSafe = {"copy", "count", "index"};
constexpr std::array<std::string_view, 8> kListUnsafe = {"append", "clear",  "extend", "insert",
                                                          "pop",    "remove", "reverse", "sort"};
constexpr std::array<std::string_view, 2> kTupleMethods = {"count", "index"};
constexpr std::array<std::string_view, 6> kDictSafe = {"copy", "fromkeys", "get", "items", "keys", "values"};
constexpr std::array<std::string_view, 5> kDictUnsafe = {"clear", "pop", "popitem", "setdefault", "update"};

template <std::size_t N>
bool in(const std::array<std::string_view, N>& names, std::string_view name) {
    return std::find(names.begin(), names.end(), name) != names.end();
}

Value unsafe(const Value& receiver, const std::string& name) {
    return Value::undefined(
        fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, python_type_name(receiver)));
}

// Python str slicing by optional start/end arguments (code points), for find/count/startswith/...
std::string sub_range(const std::string& s, const Value* start, const Value* end) {
    if ((start == nullptr || start->is_none()) && (end == nullptr || end->is_none())) {
        return s;
    }
    std::optional<std::int64_t> a;
    std::optional<std::int64_t> b;
    if (start != nullptr && !start->is_none()) {
        a = to_index(*start);
    }
    if (end != nullptr && !end->is_none()) {
        b = to_index(*end);
    }
    return slice_value(Value(s), a, b, std::nullopt).as_string();
}

// Code-point offset that start= adds to find() results.
std::int64_t start_offset(const std::string& s, const Value* start) {
    if (start == nullptr || start->is_none()) {
        return 0;
    }
    const auto len = static_cast<std::int64_t>(pytext::length(s));
    std::int64_t a = to_index(*start);
    if (a < 0) {
        a = std::max<std::int64_t>(a + len, 0);
    }
    return std::min(a, len);
}

Value str_method(Interpreter& interp, const Value& receiver, const std::string& name, CallArgs& args) {
    const std::string& s = receiver.as_string();
    ArgReader a(args, "str." + name);
    auto done = [&](Value v) {
        a.done();
        return v;
    };
    auto prefix_test = [&](bool ends) {
        const Value& what = a.required(0, ends ? "suffix" : "prefix");
        const std::string sub = sub_range(s, a.opt(1, "start"), a.opt(2, "end"));
        a.done();
        auto test = [&](const Value& p) {
            const std::string& t = req_str(p, ends ? "endswith first arg" : "startswith first arg");
            return ends ? (sub.size() >= t.size() && sub.compare(sub.size() - t.size(), t.size(), t) == 0)
                        : sub.compare(0, t.size(), t) == 0;
        };
        if (what.is_tuple()) {
            for (const Value& p : what.as_list()) {
                if (test(p)) {
                    return Value(true);
                }
            }
            return Value(false);
        }
        return Value(test(what));
    };
    auto strip_like = [&](pytext::StripSide side) {
        const std::optional<std::string> chars = opt_str(a.opt(0, "chars"), "strip arg");
        return done(Value(pytext::strip(s, chars, side)));
    };
    auto split_like = [&](bool right) {
        const std::optional<std::string> sep = opt_str(a.opt(0, "sep"), "sep");
        const std::int64_t maxsplit = to_index(a.get(1, "maxsplit", Value(-1)));
        a.done();
        const auto parts = right ? pytext::rsplit(s, sep, maxsplit) : pytext::split(s, sep, maxsplit);
        interp.charge(parts.size());
        List out;
        out.reserve(parts.size());
        for (const auto& p : parts) {
            out.emplace_back(p);
        }
        return Value::list(std::move(out));
    };
    auto find_like = [&](bool right, bool raise_missing) {
        const std::string& sub = req_str(a.required(0, "sub"), "must be str");
        const Value* start = a.opt(1, "start");
        const std::string hay = sub_range(s, start, a.opt(2, "end"));
        a.done();
        const std::int64_t pos = right ? pytext::rfind(hay, sub) : pytext::find(hay, sub);
        if (pos < 0) {
            if (raise_missing) {
                raise("substring not found");
            }
            return Value(static_cast<std::int64_t>(-1));
        }
        return Value(pos + start_offset(s, start));
    };
    auto justify = [&](char align) {
        const std::int64_t width = to_index(a.required(0, "width"));
        const Value fill = a.get(1, "fillchar", Value(" "));
        a.done();
        const std::string& f = req_str(fill, "fill character");
        if (pytext::length(f) != 1) {
            raise("The fill character must be exactly one character long");
        }
        interp.check_size(static_cast<std::size_t>(std::max<std::int64_t>(width, 0)) * f.size());
        return Value(pytext::pad(s, width, pytext::decode(f)[0], align));
    };
    auto predicate = [&](bool (*pred)(char32_t)) { return done(Value(pytext::all_chars(s, pred))); };

    if (name == "startswith") {
        return prefix_test(false);
    }
    if (name == "endswith") {
        return prefix_test(true);
    }
    if (name == "strip") {
        return strip_like(pytext::StripSide::kBoth);
    }
    if (name == "lstrip") {
        return strip_like(pytext::StripSide::kLeft);
    }
    if (name == "rstrip") {
        return strip_like(pytext::StripSide::kRight);
    }
    if (name == "split") {
        return split_like(false);
    }
    if (name == "rsplit") {
        return split_like(true);
    }
    if (name == "splitlines") {
        const bool keepends = a.get(0, "keepends", Value(false)).truthy();
        a.done();
        List out;
        for (const auto& line : pytext::splitlines(s, keepends)) {
            out.emplace_back(line);
        }
        return Value::list(std::move(out));
    }
    if (name == "replace") {
        const std::string& old_s = req_str(a.required(0, "old"), "replace() argument 1");
        const std::string& new_s = req_str(a.required(1, "new"), "replace() argument 2");
        const std::int64_t count = to_index(a.get(2, "count", Value(-1)));
        a.done();
        return Value(pytext::replace(s, old_s, new_s, count, interp.options().max_output_bytes));
    }
    if (name == "lower" || name == "casefold") {
        return done(Value(pytext::lower(s)));
    }
    if (name == "upper") {
        return done(Value(pytext::upper(s)));
    }
    if (name == "title") {
        return done(Value(pytext::title(s)));
    }
    if (name == "capitalize") {
        return done(Value(pytext::capitalize(s)));
    }
    if (name == "swapcase") {
        return done(Value(pytext::swapcase(s)));
    }
    if (name == "find") {
        return find_like(false, false);
    }
    if (name == "rfind") {
        return find_like(true, false);
    }
    if (name == "index") {
        return find_like(false, true);
    }
    if (name == "rindex") {
        return find_like(true, true);
    }
    if (name == "count") {
        const std::string& sub = req_str(a.required(0, "sub"), "must be str");
        const std::string hay = sub_range(s, a.opt(1, "start"), a.opt(2, "end"));
        a.done();
        return Value(pytext::count(hay, sub));
    }
    if (name == "join") {
        const List items = interp.iterate(a.required(0, "iterable"));
        a.done();
        std::string out;
        for (std::size_t i = 0; i < items.size(); ++i) {
            if (!items[i].is_string()) {
                raise("sequence item {}: expected str instance, {} found", i, python_type_name(items[i]));
            }
            if (i > 0) {
                out += s;
            }
            out += items[i].as_string();
            interp.check_size(out.size());
        }
        return Value(std::move(out));
    }
    if (name == "center") {
        return justify('^');
    }
    if (name == "ljust") {
        return justify('<');
    }
    if (name == "rjust") {
        return justify('>');
    }
    if (name == "zfill") {
        const std::int64_t width = to_index(a.required(0, "width"));
        a.done();
        interp.check_size(static_cast<std::size_t>(std::max<std::int64_t>(width, 0)));
        return Value(pytext::zfill(s, width));
    }
    if (name == "partition" || name == "rpartition") {
        const std::string& sep = req_str(a.required(0, "sep"), "must be str");
        a.done();
        if (sep.empty()) {
            raise("empty separator");
        }
        const std::size_t pos = name == "partition" ? s.find(sep) : s.rfind(sep);
        if (pos == std::string::npos) {
            return name == "partition" ? Value::tuple({Value(s), Value(""), Value("")})
                                       : Value::tuple({Value(""), Value(""), Value(s)});
        }
        return Value::tuple({Value(s.substr(0, pos)), Value(sep), Value(s.substr(pos + sep.size()))});
    }
    if (name == "removeprefix" || name == "removesuffix") {
        const std::string& affix = req_str(a.required(0, "affix"), "must be str");
        a.done();
        if (name == "removeprefix") {
            return Value(s.compare(0, affix.size(), affix) == 0 ? s.substr(affix.size()) : s);
        }
        const bool ends = s.size() >= affix.size() && s.compare(s.size() - affix.size(), affix.size(), affix) == 0;
        return Value(ends ? s.substr(0, s.size() - affix.size()) : s);
    }
    if (name == "format") {
        return Value(brace_format(interp, s, args));
    }
    if (name == "isalnum") {
        return predicate(pytext::is_alnum);
    }
    if (name == "isalpha") {
        return predicate(pytext::is_alpha);
    }
    if (name == "isdecimal") {
        return predicate(pytext::is_decimal);
    }
    if (name == "isdigit") {
        return predicate(pytext::is_digit);
    }
    if (name == "isnumeric") {
        return predicate(pytext::is_numeric);
    }
    if (name == "isspace") {
        return predicate(pytext::is_space);
    }
    if (name == "isascii") {
        return done(Value(pytext::is_ascii(s)));
    }
    if (name == "isprintable") {
        return done(Value(s.empty() || pytext::all_chars(s, pytext::is_printable)));
    }
    if (name == "islower") {
        return done(Value(pytext::str_islower(s)));
    }
    if (name == "isupper") {
        return done(Value(pytext::str_isupper(s)));
    }
    if (name == "istitle") {
        return done(Value(pytext::str_istitle(s)));
    }
    raise("str.{}() is not supported by this engine", name);
}

Value sequence_method(Interpreter& interp, const Value& receiver, const std::string& name, CallArgs& args) {
    const List& items = receiver.as_list();
    ArgReader a(args, python_type_name(receiver) + "." + name);
    if (name == "count") {
        const Value x = a.required(0, "value");
        a.done();
        interp.charge(items.size());
        return Value(static_cast<std::int64_t>(
            std::count_if(items.begin(), items.end(), [&](const Value& v) { return values_equal(v, x); })));
    }
    if (name == "index") {
        const Value x = a.required(0, "value");
        const Value start = a.get(1, "start", Value(0));
        const Value stop = a.get(2, "stop", Value(static_cast<std::int64_t>(items.size())));
        a.done();
        const auto n = static_cast<std::int64_t>(items.size());
        auto clamp = [n](std::int64_t i) { return i < 0 ? std::max<std::int64_t>(i + n, 0) : std::min(i, n); };
        interp.charge(items.size());
        for (std::int64_t i = clamp(to_index(start)); i < clamp(to_index(stop)); ++i) {
            if (values_equal(items[static_cast<std::size_t>(i)], x)) {
                return Value(i);
            }
        }
        raise("{} is not in {}", to_repr(x), python_type_name(receiver));
    }
    if (name == "copy") {
        a.done();
        return receiver;
    }
    raise("{}.{}() is not supported by this engine", python_type_name(receiver), name);
}

Value dict_method(Interpreter& interp, const Value& receiver, const std::string& name, CallArgs& args) {
    const Dict& d = receiver.as_dict();
    ArgReader a(args, "dict." + name);
    (void)interp;
    if (name == "get") {
        const Value key = a.required(0, "key");
        const Value fallback = a.get(1, "default", Value::none());
        a.done();
        const Value* v = d.find(key);
        return v != nullptr ? *v : fallback;
    }
    if (name == "items" || name == "keys" || name == "values") {
        a.done();
        const auto kind = name == "items" ? DictViewObject::Kind::kItems
                                          : (name == "keys" ? DictViewObject::Kind::kKeys : DictViewObject::Kind::kValues);
        return Value::object(std::make_shared<DictViewObject>(kind, receiver));
    }
    if (name == "copy") {
        a.done();
        return receiver;
    }
    raise("dict.{}() is not supported by this engine", name);
}

}  // namespace

bool method_attr(const Value& receiver, const std::string& name, Value& out) {
    bool known = false;
    bool safe = true;
    if (receiver.is_string()) {
        known = in(kStrMethods, name);
    } else if (receiver.is_list()) {
        known = in(kListSafe, name) || in(kListUnsafe, name);
        safe = !in(kListUnsafe, name);
    } else if (receiver.is_tuple()) {
        known = in(kTupleMethods, name);
    } else if (receiver.is_dict()) {
        known = in(kDictSafe, name) || in(kDictUnsafe, name);
        safe = !in(kDictUnsafe, name);
    }
    if (!known) {
        return false;
    }
    out = safe ? Value::object(std::make_shared<BoundMethod>(receiver, name)) : unsafe(receiver, name);
    return true;
}

Value call_method(Interpreter& interp, const Value& receiver, const std::string& name, CallArgs& args) {
    interp.charge(1);
    if (receiver.is_string()) {
        return str_method(interp, receiver, name, args);
    }
    if (receiver.is_sequence()) {
        return sequence_method(interp, receiver, name, args);
    }
    if (receiver.is_dict()) {
        return dict_method(interp, receiver, name, args);
    }
    raise("'{}' object has no attribute '{}'", python_type_name(receiver), name);
}

}  // namespace msa::jinja
