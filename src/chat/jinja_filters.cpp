// jinja2's builtin filters and tests, with Hugging Face's tojson (json.dumps with ensure_ascii=False, indent,
// separators, sort_keys). Each follows jinja2 3.1's semantics, including its quirks (map/select/... return
// one-shot generators, `first` of an empty sequence is undefined, string filters turn undefined into "").
#include "chat/jinja_args.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_objects.h"
#include "chat/py_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <functional>
#include <unordered_map>

namespace msa::jinja {

namespace {

using FilterFn = Value (*)(Interpreter&, const Value&, ArgReader&);
using TestFn = bool (*)(Interpreter&, const Value&, ArgReader&);

Value make_generator(std::string type, List items) {
    return Value::object(std::make_shared<GeneratorObject>(std::move(type), std::move(items)));
}

// soft_str: Markup stays Markup, everything else goes through str().
Value soft_str(const Value& v) {
    if (v.is_string()) {
        return v;
    }
    return Value(to_str(v));
}

Value ignore_case(const Value& v) {
    return v.is_string() ? Value(pytext::lower(v.as_string())) : v;
}

// jinja2's make_attrgetter: "a.b.0" looks up each part with environment.getitem (digits as integers).
class AttrGetter {
public:
    AttrGetter(const Value& attribute, bool lower, Value fallback) : lower_(lower), default_(std::move(fallback)) {
        if (attribute.is_none() || attribute.is_undefined()) {
            return;
        }
        if (attribute.is_string()) {
            for (const std::string& part : pytext::split(attribute.as_string(), std::string("."), -1)) {
                const bool digits = !part.empty() && pytext::all_chars(part, pytext::is_digit) && pytext::is_ascii(part);
                if (digits) {
                    const auto n = pytext::parse_int(part, 10);
                    parts_.push_back(n ? Value(*n) : Value(part));
                } else {
                    parts_.emplace_back(part);
                }
            }
        } else {
            parts_.push_back(attribute);
        }
    }

    Value operator()(Interpreter& interp, Value item) const {
        for (const Value& part : parts_) {
            item = interp.get_item(item, part);
            if (!default_.is_none() && item.is_undefined()) {
                item = default_;
            }
        }
        return lower_ ? ignore_case(item) : item;
    }

private:
    std::vector<Value> parts_;
    bool lower_;
    Value default_;
};

std::int64_t length_of(const Value& v) {
    switch (v.type()) {
        case Value::Type::kUndefined:
            return 0;
        case Value::Type::kString:
            return static_cast<std::int64_t>(pytext::length(v.as_string()));
        case Value::Type::kList:
        case Value::Type::kTuple:
            return static_cast<std::int64_t>(v.as_list().size());
        case Value::Type::kDict:
            return static_cast<std::int64_t>(v.as_dict().size());
        case Value::Type::kObject:
            if (const auto n = v.as_object().length()) {
                return *n;
            }
            [[fallthrough]];
        default:
            raise("object of type '{}' has no len()", python_type_name(v));
    }
}

// Stable merge sort that stays in bounds whatever the comparator does (Python's sort is stable).
void stable_sort_values(List& items, const std::function<bool(const Value&, const Value&)>& less) {
    List buffer(items.size());
    for (std::size_t width = 1; width < items.size(); width *= 2) {
        for (std::size_t lo = 0; lo < items.size(); lo += 2 * width) {
            const std::size_t mid = std::min(lo + width, items.size());
            const std::size_t hi = std::min(lo + 2 * width, items.size());
            std::size_t i = lo;
            std::size_t j = mid;
            std::size_t k = lo;
            while (i < mid && j < hi) {
                buffer[k++] = less(items[j], items[i]) ? items[j++] : items[i++];
            }
            while (i < mid) {
                buffer[k++] = items[i++];
            }
            while (j < hi) {
                buffer[k++] = items[j++];
            }
        }
        items.swap(buffer);
    }
}

// ---- filters ---------------------------------------------------------------------------------------------------

Value f_abs(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    if (v.is_integral()) {
        if (v.as_int() == std::numeric_limits<std::int64_t>::min()) {
            raise("integer overflow: the result does not fit in 64 bits");
        }
        return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    }
    if (v.is_float()) {
        return Value(std::fabs(v.as_double()));
    }
    raise("bad operand type for abs(): '{}'", python_type_name(v));
}

Value f_attr(Interpreter& interp, const Value& v, ArgReader& a) {
    const Value name = a.required(0, "name");
    a.done();
    if (!name.is_string()) {
        raise("attribute name must be string, not '{}'", python_type_name(name));
    }
    if (v.is_object() || v.is_undefined()) {
        return interp.get_attr(v, name.as_string());
    }
    Value method;
    if (method_attr(v, name.as_string(), method)) {
        return method;
    }
    return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_type_repr(v), name.as_string()));
}

Value f_batch(Interpreter& interp, const Value& v, ArgReader& a) {
    const std::int64_t count = to_index(a.required(0, "linecount"));
    const Value fill = a.get(1, "fill_with", Value::none());
    a.done();
    List out;
    List current;
    for (Value& item : interp.iterate(v)) {
        if (static_cast<std::int64_t>(current.size()) == count) {
            out.push_back(Value::list(std::move(current)));
            current.clear();
        }
        current.push_back(std::move(item));
    }
    if (!current.empty()) {
        if (!fill.is_none()) {
            while (static_cast<std::int64_t>(current.size()) < count) {
                current.push_back(fill);
            }
        }
        out.push_back(Value::list(std::move(current)));
    }
    return make_generator("generator", std::move(out));
}

Value f_capitalize(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return Value(pytext::capitalize(to_str(v)));
}

Value f_center(Interpreter& interp, const Value& v, ArgReader& a) {
    const std::int64_t width = to_index(a.get(0, "width", Value(80)));
    a.done();
    interp.check_size(static_cast<std::size_t>(std::max<std::int64_t>(width, 0)));
    return Value(pytext::pad(to_str(v), width, U' ', '^'));
}

Value f_length(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return Value(length_of(v));
}

Value f_default(Interpreter&, const Value& v, ArgReader& a) {
    const Value fallback = a.get(0, "default_value", Value(std::string()));
    const bool boolean = a.get(1, "boolean", Value(false)).truthy();
    a.done();
    if (v.is_undefined() || (boolean && !v.truthy())) {
        return fallback;
    }
    return v;
}

Value f_dictsort(Interpreter& interp, const Value& v, ArgReader& a) {
    const bool case_sensitive = a.get(0, "case_sensitive", Value(false)).truthy();
    const Value by = a.get(1, "by", Value("key"));
    const bool reverse = a.get(2, "reverse", Value(false)).truthy();
    a.done();
    if (v.is_undefined()) {
        raise("{}", v.undefined_hint());
    }
    if (!v.is_dict()) {
        raise("'{}' object has no attribute 'items'", python_type_name(v));
    }
    std::size_t pos = 0;
    if (by.is_string() && by.as_string() == "value") {
        pos = 1;
    } else if (!(by.is_string() && by.as_string() == "key")) {
        raise("You can only sort by either \"key\" or \"value\"");
    }
    List items;
    for (const auto& [k, val] : v.as_dict().entries()) {
        items.push_back(Value::tuple({k, val}));
    }
    interp.charge(items.size());
    auto key = [&](const Value& item) {
        const Value& x = item.as_list()[pos];
        return case_sensitive ? x : ignore_case(x);
    };
    stable_sort_values(items, [&](const Value& x, const Value& y) {
        return reverse ? value_less(key(y), key(x)) : value_less(key(x), key(y));
    });
    return Value::list(std::move(items));
}

Value f_escape(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    if (v.is_markup()) {
        return v;
    }
    return Value::markup(html_escape(to_str(v)));
}

Value f_forceescape(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return Value::markup(html_escape(to_str(v)));
}

Value f_first(Interpreter& interp, const Value& v, ArgReader& a) {
    a.done();
    const List items = interp.iterate(v);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Interpreter& interp, const Value& v, ArgReader& a) {
    a.done();
    if (v.is_object() && !v.as_object().is_reversible()) {
        raise("'{}' object is not reversible", python_type_name(v));
    }
    const List items = interp.iterate(v);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value to_float_value(const Value& v, const Value& fallback) {
    if (v.is_undefined()) {
        raise("{}", v.undefined_hint());
    }
    if (v.is_number()) {
        return Value(v.as_double());
    }
    if (v.is_string()) {
        if (const auto d = pytext::parse_float(v.as_string())) {
            return Value(*d);
        }
    }
    return fallback;
}

Value f_float(Interpreter&, const Value& v, ArgReader& a) {
    const Value fallback = a.get(0, "default", Value(0.0));
    a.done();
    return to_float_value(v, fallback);
}

Value f_indent(Interpreter& interp, const Value& v, ArgReader& a) {
    const Value width = a.get(0, "width", Value(4));
    const bool first = a.get(1, "first", Value(false)).truthy();
    const bool blank = a.get(2, "blank", Value(false)).truthy();
    a.done();
    std::string indention;
    if (width.is_string()) {
        indention = width.as_string();
    } else {
        const std::int64_t n = to_index(width);
        interp.check_size(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
        indention.assign(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)), ' ');
    }
    if (v.is_undefined()) {
        raise("{}", v.undefined_hint());
    }
    if (!v.is_string()) {
        raise("unsupported operand type(s) for +=: '{}' and 'str'", python_type_name(v));  // jinja2 does s += "\n"
    }
    const std::string s = v.as_string() + "\n";
    const std::vector<std::string> lines = pytext::splitlines(s, false);
    std::string rv;
    auto add = [&](std::string_view piece) {
        interp.check_size(rv.size() + piece.size());
        rv.append(piece);
    };
    if (blank) {
        for (std::size_t i = 0; i < lines.size(); ++i) {
            if (i > 0) {
                add("\n");
                add(indention);
            }
            add(lines[i]);
        }
    } else {
        for (std::size_t i = 0; i < lines.size(); ++i) {
            if (i > 0) {
                add("\n");
                if (!lines[i].empty()) {
                    add(indention);
                }
            }
            add(lines[i]);
        }
    }
    if (first) {
        rv = indention + rv;
    }
    return v.is_markup() ? Value::markup(std::move(rv)) : Value(std::move(rv));
}

Value f_int(Interpreter&, const Value& v, ArgReader& a) {
    const Value fallback = a.get(0, "default", Value(0));
    const std::int64_t base = to_index(a.get(1, "base", Value(10)));
    a.done();
    if (v.is_undefined()) {
        raise("{}", v.undefined_hint());
    }
    if (v.is_integral()) {
        return Value(v.as_int());
    }
    auto from_double = [&](double d) -> Value {
        if (std::isnan(d) || std::isinf(d)) {
            return fallback;  // Python raises ValueError/OverflowError, which |int turns into the default
        }
        const double t = std::trunc(d);
        if (t >= 9223372036854775808.0 || t < -9223372036854775808.0) {
            raise("integer overflow: {} does not fit in 64 bits", pytext::float_repr(d));
        }
        return Value(static_cast<std::int64_t>(t));
    };
    if (v.is_float()) {
        return from_double(v.as_double());
    }
    if (v.is_string()) {
        if (const auto n = pytext::parse_int(v.as_string(), static_cast<int>(base))) {
            return Value(*n);
        }
        if (const auto d = pytext::parse_float(v.as_string())) {
            return from_double(*d);
        }
    }
    return fallback;
}

Value f_items(Interpreter& interp, const Value& v, ArgReader& a) {
    a.done();
    if (v.is_undefined()) {
        return make_generator("generator", {});
    }
    if (!v.is_dict()) {
        raise("Can only get item pairs from a mapping.");
    }
    List out;
    for (const auto& [k, val] : v.as_dict().entries()) {
        out.push_back(Value::tuple({k, val}));
    }
    interp.charge(out.size());
    return make_generator("generator", std::move(out));
}

Value f_join(Interpreter& interp, const Value& v, ArgReader& a) {
    const Value sep = a.get(0, "d", Value(std::string()));
    const Value attribute = a.get(1, "attribute", Value::none());
    a.done();
    const AttrGetter getter(attribute, false, Value::none());
    const std::string sep_text = to_str(sep);
    std::string out;
    bool first = true;
    for (const Value& item : interp.iterate(v)) {
        if (!first) {
            out += sep_text;
        }
        first = false;
        out += to_str(attribute.is_none() ? item : getter(interp, item));
        interp.check_size(out.size());
    }
    return Value(std::move(out));
}

Value f_list(Interpreter& interp, const Value& v, ArgReader& a) {
    a.done();
    return Value::list(interp.iterate(v));
}

Value f_lower(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return Value(pytext::lower(to_str(v)));
}

Value f_upper(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return Value(pytext::upper(to_str(v)));
}

Value min_max(Interpreter& interp, const Value& v, ArgReader& a, bool want_max) {
    const bool case_sensitive = a.get(0, "case_sensitive", Value(false)).truthy();
    const Value attribute = a.get(1, "attribute", Value::none());
    a.done();
    const List items = interp.iterate(v);
    if (items.empty()) {
        return Value::undefined("No aggregated item, sequence was empty.");
    }
    const AttrGetter key(attribute, !case_sensitive, Value::none());
    std::size_t best = 0;
    Value best_key = key(interp, items[0]);
    for (std::size_t i = 1; i < items.size(); ++i) {
        Value k = key(interp, items[i]);
        if (want_max ? value_less(best_key, k) : value_less(k, best_key)) {
            best = i;
            best_key = std::move(k);
        }
    }
    return items[best];
}

Value f_max(Interpreter& interp, const Value& v, ArgReader& a) {
    return min_max(interp, v, a, true);
}

Value f_min(Interpreter& interp, const Value& v, ArgReader& a) {
    return min_max(interp, v, a, false);
}

Value f_replace(Interpreter& interp, const Value& v, ArgReader& a) {
    const Value old_value = a.required(0, "old");
    const Value new_value = a.required(1, "new");
    const Value count = a.get(2, "count", Value::none());
    a.done();
    const std::int64_t n = count.is_none() ? -1 : to_index(count);
    return Value(pytext::replace(to_str(v), to_str(old_value), to_str(new_value), n, interp.options().max_output_bytes));
}

Value f_reverse(Interpreter& interp, const Value& v, ArgReader& a) {
    a.done();
    if (v.is_string()) {
        return slice_value(v, std::nullopt, std::nullopt, -1);
    }
    if (v.is_object() && !v.as_object().is_reversible()) {
        // reversed() fails on a generator; jinja2 then reverses list(value).
        List items = interp.iterate(v);
        std::reverse(items.begin(), items.end());
        return Value::list(std::move(items));
    }
    if (!v.is_sequence() && !v.is_dict() && !v.is_undefined() && !v.is_object()) {
        raise("argument must be iterable");
    }
    List items = interp.iterate(v);
    std::reverse(items.begin(), items.end());
    return make_generator(v.is_dict() || v.is_object() ? "dict_reverseiterator" : "list_reverseiterator", std::move(items));
}

Value f_round(Interpreter&, const Value& v, ArgReader& a) {
    const std::int64_t precision = to_index(a.get(0, "precision", Value(0)));
    const Value method = a.get(1, "method", Value("common"));
    a.done();
    const std::string m = method.is_string() ? method.as_string() : std::string();
    if (m != "common" && m != "ceil" && m != "floor") {
        raise("method must be common, ceil or floor");
    }
    if (v.is_undefined()) {
        raise("{}", v.undefined_hint());
    }
    if (!v.is_number()) {
        raise("type {} doesn't define __round__ method", python_type_name(v));
    }
    if (m == "common") {
        if (v.is_integral()) {
            if (precision >= 0) {
                return Value(v.as_int());
            }
            // round(int, negative): to a multiple of 10**-precision, ties to even.
            double p = std::pow(10.0, static_cast<double>(-precision));
            const double x = static_cast<double>(v.as_int()) / p;
            return Value(static_cast<std::int64_t>(std::nearbyint(x) * p));
        }
        const double x = v.as_double();
        if (!std::isfinite(x)) {
            return Value(x);
        }
        if (precision > 300 || precision < -300) {
            return Value(precision > 0 ? x : 0.0 * x);
        }
        if (precision >= 0) {
            // printf rounds the exact binary value to nearest, ties to even: what Python's round() does.
            char buf[512];
            std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);
            return Value(std::strtod(buf, nullptr));
        }
        const double p = std::pow(10.0, static_cast<double>(-precision));
        return Value(std::nearbyint(x / p) * p);
    }
    const double p = std::pow(10.0, static_cast<double>(precision));
    const double x = v.as_double() * p;
    return Value((m == "ceil" ? std::ceil(x) : std::floor(x)) / p);
}

Value f_safe(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return Value::markup(to_str(v));
}

Value f_slice(Interpreter& interp, const Value& v, ArgReader& a) {
    const std::int64_t slices = to_index(a.required(0, "slices"));
    const Value fill = a.get(1, "fill_with", Value::none());
    a.done();
    if (slices <= 0) {
        raise("integer division or modulo by zero");
    }
    const List seq = interp.iterate(v);
    const auto length = static_cast<std::int64_t>(seq.size());
    const std::int64_t per = length / slices;
    const std::int64_t extra = length % slices;
    interp.charge(static_cast<std::uint64_t>(slices));
    List out;
    std::int64_t offset = 0;
    for (std::int64_t n = 0; n < slices; ++n) {
        const std::int64_t start = offset + n * per;
        if (n < extra) {
            ++offset;
        }
        const std::int64_t end = offset + (n + 1) * per;
        List part(seq.begin() + start, seq.begin() + end);
        if (!fill.is_none() && n >= extra) {
            part.push_back(fill);
        }
        out.push_back(Value::list(std::move(part)));
    }
    return make_generator("generator", std::move(out));
}

Value f_sort(Interpreter& interp, const Value& v, ArgReader& a) {
    const bool reverse = a.get(0, "reverse", Value(false)).truthy();
    const bool case_sensitive = a.get(1, "case_sensitive", Value(false)).truthy();
    const Value attribute = a.get(2, "attribute", Value::none());
    a.done();
    List items = interp.iterate(v);
    interp.charge(items.size());
    // Comma-separated attributes compare as a list of keys.
    std::vector<AttrGetter> getters;
    if (attribute.is_string()) {
        for (const std::string& part : pytext::split(attribute.as_string(), std::string(","), -1)) {
            getters.emplace_back(Value(part), !case_sensitive, Value::none());
        }
    } else {
        getters.emplace_back(attribute, !case_sensitive, Value::none());
    }
    std::vector<std::pair<Value, Value>> keyed;
    keyed.reserve(items.size());
    for (Value& item : items) {
        List key;
        for (const auto& g : getters) {
            key.push_back(g(interp, item));
        }
        keyed.emplace_back(Value::list(std::move(key)), std::move(item));
    }
    List pairs;
    pairs.reserve(keyed.size());
    for (auto& [k, item] : keyed) {
        pairs.push_back(Value::tuple({k, item}));
    }
    stable_sort_values(pairs, [&](const Value& x, const Value& y) {
        const Value& kx = x.as_list()[0];
        const Value& ky = y.as_list()[0];
        return reverse ? value_less(ky, kx) : value_less(kx, ky);
    });
    List out;
    out.reserve(pairs.size());
    for (const Value& p : pairs) {
        out.push_back(p.as_list()[1]);
    }
    return Value::list(std::move(out));
}

Value f_string(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return soft_str(v);
}

Value f_sum(Interpreter& interp, const Value& v, ArgReader& a) {
    const Value attribute = a.get(0, "attribute", Value::none());
    Value total = a.get(1, "start", Value(0));
    a.done();
    const AttrGetter getter(attribute, false, Value::none());
    if (total.is_string()) {
        raise("sum() can't sum strings [use ''.join(seq) instead]");
    }
    for (const Value& item : interp.iterate(v)) {
        total = binary_op("+", total, attribute.is_none() ? item : getter(interp, item), interp);
    }
    return total;
}

Value f_title(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    // jinja2 splits on runs of [-\s({[<] and upper-cases the first character of every piece.
    const std::u32string s = pytext::decode(to_str(v));
    auto is_sep = [](char32_t c) {
        return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || pytext::is_space(c);
    };
    std::string out;
    std::size_t i = 0;
    while (i < s.size()) {
        std::size_t j = i;
        const bool sep = is_sep(s[i]);
        while (j < s.size() && is_sep(s[j]) == sep) {
            ++j;
        }
        out += pytext::upper(pytext::encode(s.substr(i, 1)));
        out += pytext::lower(pytext::encode(s.substr(i + 1, j - i - 1)));
        i = j;
    }
    return Value(std::move(out));
}

Value f_tojson(Interpreter& interp, const Value& v, ArgReader& a) {
    JsonDumpOptions options;
    options.ensure_ascii = a.get(0, "ensure_ascii", Value(false)).truthy();
    const Value indent = a.get(1, "indent", Value::none());
    const Value separators = a.get(2, "separators", Value::none());
    options.sort_keys = a.get(3, "sort_keys", Value(false)).truthy();
    a.done();
    options.max_bytes = interp.options().max_output_bytes;
    if (!indent.is_none()) {
        options.has_indent = true;
        if (indent.is_string()) {
            options.indent = indent.as_string();
        } else {
            const std::int64_t n = to_index(indent);
            options.indent.assign(static_cast<std::size_t>(std::clamp<std::int64_t>(n, 0, 4096)), ' ');
        }
        options.item_separator.assign(1, ',');  // (assigning a literal trips a GCC 12 -Wrestrict false positive)
    }
    if (!separators.is_none()) {
        const List parts = interp.iterate(separators);
        if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string()) {
            raise("separators must be a pair of strings");
        }
        options.item_separator = parts[0].as_string();
        options.key_separator = parts[1].as_string();
    }
    return Value(json_dumps(v, options));
}

Value f_trim(Interpreter&, const Value& v, ArgReader& a) {
    const std::optional<std::string> chars = opt_str(a.opt(0, "chars"), "trim() chars");
    a.done();
    std::string out = pytext::strip(to_str(v), chars, pytext::StripSide::kBoth);
    return v.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
}

Value f_truncate(Interpreter&, const Value& v, ArgReader& a) {
    const std::int64_t length = to_index(a.get(0, "length", Value(255)));
    const bool killwords = a.get(1, "killwords", Value(false)).truthy();
    const std::string end = to_str(a.get(2, "end", Value("...")));
    const Value leeway_value = a.get(3, "leeway", Value::none());
    a.done();
    const std::int64_t leeway = leeway_value.is_none() ? 5 : to_index(leeway_value);
    const auto end_len = static_cast<std::int64_t>(pytext::length(end));
    if (length < end_len) {
        raise("expected length >= {}, got {}", end_len, length);
    }
    if (leeway < 0) {
        raise("expected leeway >= 0, got {}", leeway);
    }
    // jinja2 takes len() of the value as given: short lists come back unchanged, long ones fail on rsplit.
    if (length_of(v) <= length + leeway) {
        return v;
    }
    if (!v.is_string()) {
        raise("'{}' object has no attribute 'rsplit'", python_type_name(v));
    }
    const Value& s = v;
    const Value head = slice_value(s, std::nullopt, length - end_len, std::nullopt);
    if (killwords) {
        return Value(head.as_string() + end);
    }
    const std::vector<std::string> parts = pytext::rsplit(head.as_string(), std::string(" "), 1);
    return Value(parts[0] + end);
}

Value f_unique(Interpreter& interp, const Value& v, ArgReader& a) {
    const bool case_sensitive = a.get(0, "case_sensitive", Value(false)).truthy();
    const Value attribute = a.get(1, "attribute", Value::none());
    a.done();
    const AttrGetter key(attribute, !case_sensitive, Value::none());
    std::unordered_map<std::string, bool> seen;
    List out;
    for (Value& item : interp.iterate(v)) {
        if (seen.emplace(hash_key(key(interp, item)), true).second) {
            out.push_back(std::move(item));
        }
    }
    return make_generator("generator", std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    const std::u32string s = pytext::decode(to_str(v));
    std::int64_t words = 0;
    bool in_word = false;
    for (char32_t c : s) {
        const bool w = c == '_' || pytext::is_alnum(c);
        if (w && !in_word) {
            ++words;
        }
        in_word = w;
    }
    return Value(words);
}

Value f_groupby(Interpreter& interp, const Value& v, ArgReader& a);

Value f_unsupported(Interpreter&, const Value&, ArgReader& a) {
    raise("the '{}' filter is not supported by this engine", a.callee());
}

const std::unordered_map<std::string_view, FilterFn>& filter_table() {
    static const std::unordered_map<std::string_view, FilterFn> table = {
        {"abs", f_abs},
        {"attr", f_attr},
        {"batch", f_batch},
        {"capitalize", f_capitalize},
        {"center", f_center},
        {"count", f_length},
        {"d", f_default},
        {"default", f_default},
        {"dictsort", f_dictsort},
        {"e", f_escape},
        {"escape", f_escape},
        {"filesizeformat", f_unsupported},
        {"first", f_first},
        {"float", f_float},
        {"forceescape", f_forceescape},
        {"format", nullptr},  // handled by call_filter
        {"groupby", f_groupby},
        {"indent", f_indent},
        {"int", f_int},
        {"items", f_items},
        {"join", f_join},
        {"last", f_last},
        {"length", f_length},
        {"list", f_list},
        {"lower", f_lower},
        {"map", nullptr},  // handled by call_filter
        {"max", f_max},
        {"min", f_min},
        {"pprint", f_unsupported},
        {"random", f_unsupported},
        {"reject", nullptr},  // handled by call_filter
        {"rejectattr", nullptr},  // handled by call_filter
        {"replace", f_replace},
        {"reverse", f_reverse},
        {"round", f_round},
        {"safe", f_safe},
        {"select", nullptr},  // handled by call_filter
        {"selectattr", nullptr},  // handled by call_filter
        {"slice", f_slice},
        {"sort", f_sort},
        {"string", f_string},
        {"striptags", f_unsupported},
        {"sum", f_sum},
        {"title", f_title},
        {"tojson", f_tojson},
        {"trim", f_trim},
        {"truncate", f_truncate},
        {"unique", f_unique},
        {"upper", f_upper},
        {"urlencode", f_unsupported},
        {"urlize", f_unsupported},
        {"wordcount", f_wordcount},
        {"wordwrap", f_unsupported},
        {"xmlattr", f_unsupported},
    };
    return table;
}

// ---- tests -----------------------------------------------------------------------------------------------------

bool t_odd(Interpreter& interp, const Value& v, ArgReader& a) {
    a.done();
    return values_equal(binary_op("%", v, Value(2), interp), Value(1));
}

bool t_even(Interpreter& interp, const Value& v, ArgReader& a) {
    a.done();
    return values_equal(binary_op("%", v, Value(2), interp), Value(0));
}

bool t_divisibleby(Interpreter& interp, const Value& v, ArgReader& a) {
    const Value num = a.required(0, "num");
    a.done();
    return values_equal(binary_op("%", v, num, interp), Value(0));
}

bool t_defined(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return !v.is_undefined();
}

bool t_undefined(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return v.is_undefined();
}

bool t_filter(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return v.is_string() && is_filter_name(v.as_string());
}

bool t_test(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return v.is_string() && is_test_name(v.as_string());
}

bool t_none(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return v.is_none();
}

bool t_boolean(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return v.is_bool();
}

bool t_false(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return v.is_bool() && !v.as_bool();
}

bool t_true(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return v.is_bool() && v.as_bool();
}

bool t_integer(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return v.is_int();
}

bool t_float(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return v.is_float();
}

bool t_lower(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return pytext::str_islower(to_str(v));
}

bool t_upper(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return pytext::str_isupper(to_str(v));
}

bool t_string(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return v.is_string();
}

bool t_mapping(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return v.is_dict() || (v.is_object() && v.as_object().is_mapping());
}

bool t_number(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return v.is_number();
}

bool t_sequence(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    // len() and __getitem__: str, list, tuple, dict, and jinja2's Undefined.
    return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined();
}

bool t_iterable(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    if (v.is_object()) {
        return v.as_object().is_iterable() || dynamic_cast<LoopObject*>(&v.as_object()) != nullptr;
    }
    return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined();
}

bool t_callable(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return v.is_undefined() || (v.is_object() && v.as_object().is_callable());
}

bool t_sameas(Interpreter&, const Value& v, ArgReader& a) {
    const Value other = a.required(0, "other");
    a.done();
    if (v.type() != other.type()) {
        return false;
    }
    switch (v.type()) {
        case Value::Type::kNone:
        case Value::Type::kUndefined:
            return v.is_none();
        case Value::Type::kBool:
            return v.as_bool() == other.as_bool();
        case Value::Type::kInt:
            // CPython caches the small integers -5..256; larger equal ints are distinct objects.
            return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
        case Value::Type::kFloat:
            return false;
        default:
            return v.identity() == other.identity();
    }
}

bool t_escaped(Interpreter&, const Value& v, ArgReader& a) {
    a.done();
    return v.is_markup();
}

bool t_in(Interpreter& interp, const Value& v, ArgReader& a) {
    const Value seq = a.required(0, "seq");
    a.done();
    return contains(interp, seq, v);
}

bool t_eq(Interpreter&, const Value& v, ArgReader& a) {
    const Value other = a.required(0, "b");
    a.done();
    return values_equal(v, other);
}

bool t_ne(Interpreter&, const Value& v, ArgReader& a) {
    const Value other = a.required(0, "b");
    a.done();
    return !values_equal(v, other);
}

bool t_lt(Interpreter&, const Value& v, ArgReader& a) {
    const Value other = a.required(0, "b");
    a.done();
    return value_less(v, other);
}

bool t_le(Interpreter&, const Value& v, ArgReader& a) {
    const Value other = a.required(0, "b");
    a.done();
    return value_less(v, other) || values_equal(v, other);
}

bool t_gt(Interpreter&, const Value& v, ArgReader& a) {
    const Value other = a.required(0, "b");
    a.done();
    return value_less(other, v);
}

bool t_ge(Interpreter&, const Value& v, ArgReader& a) {
    const Value other = a.required(0, "b");
    a.done();
    return value_less(other, v) || values_equal(v, other);
}

const std::unordered_map<std::string_view, TestFn>& test_table() {
    static const std::unordered_map<std::string_view, TestFn> table = {
        {"odd", t_odd},
        {"even", t_even},
        {"divisibleby", t_divisibleby},
        {"defined", t_defined},
        {"undefined", t_undefined},
        {"filter", t_filter},
        {"test", t_test},
        {"none", t_none},
        {"boolean", t_boolean},
        {"false", t_false},
        {"true", t_true},
        {"integer", t_integer},
        {"float", t_float},
        {"lower", t_lower},
        {"upper", t_upper},
        {"string", t_string},
        {"mapping", t_mapping},
        {"number", t_number},
        {"sequence", t_sequence},
        {"iterable", t_iterable},
        {"callable", t_callable},
        {"sameas", t_sameas},
        {"escaped", t_escaped},
        {"in", t_in},
        {"==", t_eq},
        {"eq", t_eq},
        {"equalto", t_eq},
        {"!=", t_ne},
        {"ne", t_ne},
        {">", t_gt},
        {"gt", t_gt},
        {"greaterthan", t_gt},
        {">=", t_ge},
        {"ge", t_ge},
        {"<", t_lt},
        {"lt", t_lt},
        {"lessthan", t_lt},
        {"<=", t_le},
        {"le", t_le},
    };
    return table;
}

// ---- filters that call other filters or tests ----------------------------------------------------------------

// The remaining arguments after the name of a filter or test, passed on to it.
CallArgs forward_args(const List& positional, std::vector<std::pair<std::string, Value>> keyword) {
    CallArgs out;
    out.positional = positional;
    out.keyword = std::move(keyword);
    return out;
}

Value f_groupby(Interpreter& interp, const Value& v, ArgReader& a) {
    const Value attribute = a.required(0, "attribute");
    const Value fallback = a.get(1, "default", Value::none());
    const bool case_sensitive = a.get(2, "case_sensitive", Value(false)).truthy();
    a.done();
    const AttrGetter sort_key(attribute, !case_sensitive, fallback);
    const AttrGetter output_key(attribute, false, fallback);
    List items = interp.iterate(v);
    interp.charge(items.size());
    stable_sort_values(items, [&](const Value& x, const Value& y) {
        return value_less(sort_key(interp, x), sort_key(interp, y));
    });
    List groups;
    std::size_t i = 0;
    while (i < items.size()) {
        const Value key = sort_key(interp, items[i]);
        List members;
        std::size_t j = i;
        while (j < items.size() && values_equal(sort_key(interp, items[j]), key)) {
            members.push_back(items[j]);
            ++j;
        }
        const Value grouper = case_sensitive ? key : output_key(interp, members[0]);
        groups.push_back(Value::tuple({grouper, Value::list(std::move(members))}));
        i = j;
    }
    return Value::list(std::move(groups));
}

// map / select / reject / selectattr / rejectattr, which take the name of a filter or test plus its arguments.
Value higher_order_filter(Interpreter& interp, const std::string& name, const Value& v, CallArgs& args) {
    if (name == "map") {
        if (args.positional.empty()) {
            const Value* attribute = nullptr;
            Value fallback = Value::none();
            for (const auto& [k, val] : args.keyword) {
                if (k == "attribute") {
                    attribute = &val;
                } else if (k == "default") {
                    fallback = val;
                } else {
                    raise("Unexpected keyword argument '{}'", k);
                }
            }
            if (attribute == nullptr) {
                raise("map requires a filter argument");
            }
            const AttrGetter getter(*attribute, false, fallback);
            List out;
            if (v.truthy()) {
                for (const Value& item : interp.iterate(v)) {
                    out.push_back(getter(interp, item));
                }
            }
            return make_generator("generator", std::move(out));
        }
        const Value filter_name = args.positional[0];
        if (!filter_name.is_string() || !is_filter_name(filter_name.as_string())) {
            raise("No filter named {}.", to_repr(filter_name));
        }
        const List rest(args.positional.begin() + 1, args.positional.end());
        List out;
        if (v.truthy()) {
            for (const Value& item : interp.iterate(v)) {
                CallArgs forwarded = forward_args(rest, args.keyword);
                out.push_back(interp.apply_filter(filter_name.as_string(), item, forwarded));
            }
        }
        return make_generator("generator", std::move(out));
    }
    const bool attr = name == "selectattr" || name == "rejectattr";
    const bool keep = name == "select" || name == "selectattr";
    std::size_t off = 0;
    Value attribute;
    if (attr) {
        if (args.positional.empty()) {
            raise("Missing parameter for attribute name");
        }
        attribute = args.positional[0];
        off = 1;
    }
    const AttrGetter getter(attribute, false, Value::none());
    std::optional<std::string> test_name;
    List rest;
    if (args.positional.size() > off) {
        const Value& tn = args.positional[off];
        if (!tn.is_string() || !is_test_name(tn.as_string())) {
            raise("No test named {}.", to_repr(tn));
        }
        test_name = tn.as_string();
        rest.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(off + 1), args.positional.end());
    }
    List out;
    if (v.truthy()) {
        for (const Value& item : interp.iterate(v)) {
            const Value subject = attr ? getter(interp, item) : item;
            bool passed = false;
            if (test_name) {
                CallArgs forwarded = forward_args(rest, args.keyword);
                passed = interp.apply_test(*test_name, subject, forwarded);
            } else {
                passed = subject.truthy();
            }
            if (passed == keep) {
                out.push_back(item);
            }
        }
    }
    return make_generator("generator", std::move(out));
}

}  // namespace

bool is_filter_name(std::string_view name) {
    return filter_table().count(name) > 0;
}

bool is_test_name(std::string_view name) {
    return test_table().count(name) > 0;
}

namespace {

// The filters jinja2 implements as generator functions: their whole body (argument checks included) runs when the
// result is first iterated.
bool is_lazy_filter(const std::string& name) {
    return name == "map" || name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr" ||
           name == "items" || name == "unique" || name == "batch" || name == "slice";
}

Value eager_filter(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args) {
    if (name == "map" || name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
        return higher_order_filter(interp, name, input, args);
    }
    const auto it = filter_table().find(name);
    ArgReader reader(args, name);
    return it->second(interp, input, reader);
}

}  // namespace

Value call_filter(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args) {
    interp.charge(1);
    if (is_lazy_filter(name)) {
        Interpreter* ip = &interp;  // generators never outlive the render that made them
        return Value::object(std::make_shared<GeneratorObject>("generator", [ip, name, input, args]() mutable {
            Value produced = eager_filter(*ip, name, input, args);
            return ip->iterate(produced);
        }));
    }
    if (name == "format") {
        if (!args.positional.empty() && !args.keyword.empty()) {
            raise("can't handle positional and keyword arguments at the same time");
        }
        Value format_args;
        if (!args.keyword.empty()) {
            Dict d;
            for (const auto& [k, v] : args.keyword) {
                d.set(Value(k), v);
            }
            format_args = Value::dict(std::move(d));
        } else {
            format_args = Value::tuple(args.positional);
        }
        return Value(percent_format(to_str(input), format_args, interp));
    }
    const auto it = filter_table().find(name);
    if (it == filter_table().end() || it->second == nullptr) {
        raise("No filter named '{}' found.", name);
    }
    ArgReader reader(args, name);
    return it->second(interp, input, reader);
}

bool call_test(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args) {
    interp.charge(1);
    const auto it = test_table().find(name);
    if (it == test_table().end()) {
        raise("No test named '{}' found.", name);
    }
    ArgReader reader(args, name);
    return it->second(interp, input, reader);
}

}  // namespace msa::jinja
