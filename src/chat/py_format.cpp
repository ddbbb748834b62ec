// Python string formatting for templates: printf-style `str % args` (and jinja's |format filter), and
// str.format() with the format-spec mini-language for str, int and float.
#include "chat/jinja_args.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/py_text.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace msa::jinja {

namespace {

std::string c_format_double(const std::string& spec, double v) {
    char buf[512];
    const int n = std::snprintf(buf, sizeof(buf), spec.c_str(), v);
    if (n < 0 || static_cast<std::size_t>(n) >= sizeof(buf)) {
        raise("formatted number is too long");
    }
    return std::string(buf, static_cast<std::size_t>(n));
}

std::string c_format_int(const std::string& spec, long long v) {
    char buf[512];
    const int n = std::snprintf(buf, sizeof(buf), spec.c_str(), v);
    if (n < 0 || static_cast<std::size_t>(n) >= sizeof(buf)) {
        raise("formatted number is too long");
    }
    return std::string(buf, static_cast<std::size_t>(n));
}

// Python float formatting for %e %f %g (nan/inf spelled like Python).
std::string format_float(double v, char conv, const std::string& flags, int precision) {
    if (std::isnan(v) || std::isinf(v)) {
        std::string s = std::isnan(v) ? "nan" : "inf";
        if (conv >= 'A' && conv <= 'Z') {
            s = pytext::upper(s);
        }
        if (std::signbit(v) && !std::isnan(v)) {
            return "-" + s;
        }
        if (flags.find('+') != std::string::npos) {
            return "+" + s;
        }
        if (flags.find(' ') != std::string::npos) {
            return " " + s;
        }
        return s;
    }
    std::string spec = "%";
    for (char f : flags) {
        if (f == '+' || f == ' ' || f == '#') {
            spec.push_back(f);
        }
    }
    spec += "." + std::to_string(precision);
    spec.push_back(conv);
    return c_format_double(spec, v);
}

std::string pad_field(std::string body, std::int64_t width, bool left, bool zero) {
    const auto len = static_cast<std::int64_t>(pytext::length(body));
    if (width <= len) {
        return body;
    }
    const auto fill = static_cast<std::size_t>(width - len);
    if (left) {
        return body + std::string(fill, ' ');
    }
    if (zero) {
        std::size_t sign = 0;
        if (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) {
            sign = 1;
        }
        if (body.size() > sign + 1 && body[sign] == '0' && (body[sign + 1] == 'x' || body[sign + 1] == 'X' ||
                                                            body[sign + 1] == 'o')) {
            sign += 2;
        }
        return body.substr(0, sign) + std::string(fill, '0') + body.substr(sign);
    }
    return std::string(fill, ' ') + body;
}

std::int64_t int_for_format(const Value& v, char conv) {
    if (v.is_integral()) {
        return v.as_int();
    }
    if (v.is_float() && (conv == 'd' || conv == 'i' || conv == 'u')) {
        const double t = std::trunc(v.as_double());
        if (!std::isfinite(t) || t >= 9223372036854775808.0 || t < -9223372036854775808.0) {
            raise("cannot convert float {} to a 64-bit integer", pytext::float_repr(v.as_double()));
        }
        return static_cast<std::int64_t>(t);
    }
    if (conv == 'd' || conv == 'i' || conv == 'u') {
        raise("%{} format: a real number is required, not {}", conv, python_type_name(v));
    }
    raise("%{} format: an integer is required, not {}", conv, python_type_name(v));
}

std::string format_int_conv(std::int64_t n, char conv, const std::string& flags, int precision) {
    const std::uint64_t mag = n < 0 ? static_cast<std::uint64_t>(-(n + 1)) + 1 : static_cast<std::uint64_t>(n);
    std::string digits;
    std::string prefix;
    if (conv == 'x' || conv == 'X' || conv == 'o') {
        digits = c_format_int(conv == 'x' ? "%llx" : (conv == 'X' ? "%llX" : "%llo"), static_cast<long long>(mag));
        if (flags.find('#') != std::string::npos) {
            prefix = conv == 'x' ? "0x" : (conv == 'X' ? "0X" : "0o");
        }
    } else {
        digits = std::to_string(mag);
    }
    if (precision > 0 && static_cast<int>(digits.size()) < precision) {
        digits.insert(0, static_cast<std::size_t>(precision) - digits.size(), '0');
    }
    std::string sign;
    if (n < 0) {
        sign = "-";
    } else if (flags.find('+') != std::string::npos) {
        sign = "+";
    } else if (flags.find(' ') != std::string::npos) {
        sign = " ";
    }
    return sign + prefix + digits;
}

}  // namespace

std::string percent_format(const std::string& format, const Value& args, const Interpreter& interp) {
    List positional;
    const Dict* mapping = nullptr;
    if (args.is_tuple()) {
        positional = args.as_list();
    } else {
        positional.push_back(args);
        if (args.is_dict()) {
            mapping = &args.as_dict();
        }
    }
    std::size_t next = 0;
    bool used_mapping = false;
    auto next_arg = [&]() -> const Value& {
        if (next >= positional.size()) {
            raise("not enough arguments for format string");
        }
        return positional[next++];
    };
    std::string out;
    std::size_t i = 0;
    while (i < format.size()) {
        const char c = format[i];
        if (c != '%') {
            out.push_back(c);
            ++i;
            continue;
        }
        ++i;
        if (i >= format.size()) {
            raise("incomplete format");
        }
        const Value* value = nullptr;
        if (format[i] == '(') {
            if (mapping == nullptr) {
                raise("format requires a mapping");
            }
            int depth = 1;
            std::size_t start = ++i;
            while (i < format.size() && depth > 0) {
                depth += format[i] == '(' ? 1 : (format[i] == ')' ? -1 : 0);
                ++i;
            }
            if (depth != 0) {
                raise("incomplete format key");
            }
            const std::string key = format.substr(start, i - 1 - start);
            value = mapping->find(std::string_view(key));
            if (value == nullptr) {
                raise("KeyError: {}", pytext::repr(key));
            }
            used_mapping = true;
        }
        std::string flags;
        while (i < format.size() && (format[i] == '-' || format[i] == '+' || format[i] == ' ' || format[i] == '#' ||
                                     format[i] == '0')) {
            flags.push_back(format[i++]);
        }
        std::int64_t width = 0;
        if (i < format.size() && format[i] == '*') {
            width = to_index(next_arg());
            ++i;
        } else {
            while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
                width = width * 10 + (format[i++] - '0');
                if (width > 1'000'000) {
                    raise("width too big");
                }
            }
        }
        int precision = -1;
        if (i < format.size() && format[i] == '.') {
            ++i;
            precision = 0;
            if (i < format.size() && format[i] == '*') {
                precision = static_cast<int>(to_index(next_arg()));
                ++i;
            } else {
                while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
                    precision = precision * 10 + (format[i++] - '0');
                    if (precision > 400) {
                        raise("precision too big");
                    }
                }
            }
        }
        while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) {
            ++i;
        }
        if (i >= format.size()) {
            raise("incomplete format");
        }
        const char conv = format[i++];
        if (conv == '%') {
            out.push_back('%');
            continue;
        }
        const Value& v = value != nullptr ? *value : next_arg();
        if (v.is_undefined() && conv != 's') {
            raise("{}", v.undefined_hint());
        }
        interp.check_size(out.size() + static_cast<std::size_t>(std::max<std::int64_t>(width, 0)));
        const bool left = flags.find('-') != std::string::npos;
        const bool zero = flags.find('0') != std::string::npos && !left;
        std::string body;
        switch (conv) {
            case 's':
            case 'r':
            case 'a': {
                body = conv == 's' ? to_str(v) : to_repr(v);
                if (precision >= 0) {
                    body = slice_value(Value(body), std::nullopt, precision, std::nullopt).as_string();
                }
                out += pad_field(body, width, left, false);
                continue;
            }
            case 'd':
            case 'i':
            case 'u':
            case 'x':
            case 'X':
            case 'o':
                body = format_int_conv(int_for_format(v, conv), conv, flags, precision);
                break;
            case 'e':
            case 'E':
            case 'f':
            case 'F':
            case 'g':
            case 'G':
                if (!v.is_number()) {
                    raise("must be real number, not {}", python_type_name(v));
                }
                body = format_float(v.as_double(), conv, flags, precision < 0 ? 6 : precision);
                break;
            case 'c':
                if (v.is_string() && pytext::length(v.as_string()) == 1) {
                    body = v.as_string();
                } else if (v.is_integral() && v.as_int() >= 0 && v.as_int() <= 0x10FFFF) {
                    pytext::append_utf8(body, static_cast<char32_t>(v.as_int()));
                } else {
                    raise("%c requires int or char");
                }
                out += pad_field(body, width, left, false);
                continue;
            default:
                raise("unsupported format character '{}'", conv);
        }
        out += pad_field(body, width, left, zero);
    }
    if (!used_mapping && mapping == nullptr && next < positional.size()) {
        raise("not all arguments converted during string formatting");
    }
    return out;
}

namespace {

struct FormatSpec {
    char32_t fill = U' ';
    char align = '\0';
    char sign = '-';
    bool alternate = false;
    bool zero = false;
    std::int64_t width = -1;
    char grouping = '\0';
    int precision = -1;
    char type = '\0';
};

FormatSpec parse_spec(const std::string& spec) {
    FormatSpec f;
    const std::u32string s = pytext::decode(spec);
    std::size_t i = 0;
    auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
    if (s.size() >= 2 && is_align(s[1])) {
        f.fill = s[0];
        f.align = static_cast<char>(s[1]);
        i = 2;
    } else if (!s.empty() && is_align(s[0])) {
        f.align = static_cast<char>(s[0]);
        i = 1;
    }
    if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) {
        f.sign = static_cast<char>(s[i++]);
    }
    if (i < s.size() && s[i] == '#') {
        f.alternate = true;
        ++i;
    }
    if (i < s.size() && s[i] == '0') {
        f.zero = true;
        ++i;
    }
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        f.width = (f.width < 0 ? 0 : f.width) * 10 + static_cast<std::int64_t>(s[i++] - '0');
        if (f.width > 1'000'000) {
            raise("Too many decimal digits in format string");
        }
    }
    if (i < s.size() && (s[i] == ',' || s[i] == '_')) {
        f.grouping = static_cast<char>(s[i++]);
    }
    if (i < s.size() && s[i] == '.') {
        ++i;
        f.precision = 0;
        bool any = false;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
            f.precision = f.precision * 10 + static_cast<int>(s[i++] - '0');
            any = true;
            if (f.precision > 400) {
                raise("Too many decimal digits in format string");
            }
        }
        if (!any) {
            raise("Format specifier missing precision");
        }
    }
    if (i < s.size()) {
        f.type = static_cast<char>(s[i++]);
    }
    if (i != s.size()) {
        raise("Invalid format specifier '{}'", spec);
    }
    return f;
}

std::string group_digits(const std::string& digits, char sep) {
    std::string out;
    const std::size_t n = digits.size();
    for (std::size_t i = 0; i < n; ++i) {
        if (i > 0 && (n - i) % 3 == 0) {
            out.push_back(sep);
        }
        out.push_back(digits[i]);
    }
    return out;
}

std::string apply_width(const std::string& sign, const std::string& body, const FormatSpec& f, char default_align) {
    char align = f.align ? f.align : default_align;
    char32_t fill = f.fill;
    if (!f.align && f.zero) {
        align = '=';
        fill = U'0';
    }
    const std::int64_t len = static_cast<std::int64_t>(pytext::length(sign) + pytext::length(body));
    if (f.width <= len) {
        return sign + body;
    }
    const std::int64_t pad = f.width - len;
    std::string fill_text;
    pytext::append_utf8(fill_text, fill);
    auto repeat = [&](std::int64_t n) {
        std::string out;
        for (std::int64_t k = 0; k < n; ++k) {
            out += fill_text;
        }
        return out;
    };
    switch (align) {
        case '<':
            return sign + body + repeat(pad);
        case '^':
            return repeat(pad / 2) + sign + body + repeat(pad - pad / 2);
        case '=':
            return sign + repeat(pad) + body;
        default:
            return repeat(pad) + sign + body;
    }
}

std::string format_value(const Value& v, const std::string& spec_text) {
    if (spec_text.empty()) {
        return to_str(v);
    }
    const FormatSpec f = parse_spec(spec_text);
    if (v.is_string()) {
        if (f.type != '\0' && f.type != 's') {
            raise("Unknown format code '{}' for object of type 'str'", f.type);
        }
        std::string body = v.as_string();
        if (f.precision >= 0) {
            body = slice_value(v, std::nullopt, f.precision, std::nullopt).as_string();
        }
        return apply_width("", body, f, '<');
    }
    const bool as_int = v.is_integral() && (f.type == '\0' || f.type == 'd' || f.type == 'b' || f.type == 'o' ||
                                             f.type == 'x' || f.type == 'X' || f.type == 'c' || f.type == 'n');
    if (as_int) {
        const std::int64_t n = v.as_int();
        const std::uint64_t mag = n < 0 ? static_cast<std::uint64_t>(-(n + 1)) + 1 : static_cast<std::uint64_t>(n);
        std::string digits;
        std::string prefix;
        switch (f.type) {
            case 'b':
                for (std::uint64_t m = mag; m > 0; m >>= 1) {
                    digits.insert(digits.begin(), static_cast<char>('0' + (m & 1)));
                }
                prefix = "0b";
                break;
            case 'o':
                digits = c_format_int("%llo", static_cast<long long>(mag));
                prefix = "0o";
                break;
            case 'x':
            case 'X':
                digits = c_format_int(f.type == 'x' ? "%llx" : "%llX", static_cast<long long>(mag));
                prefix = f.type == 'x' ? "0x" : "0X";
                break;
            case 'c':
                if (n < 0 || n > 0x10FFFF) {
                    raise("%c arg not in range(0x110000)");
                }
                pytext::append_utf8(digits, static_cast<char32_t>(n));
                break;
            default:
                digits = std::to_string(mag);
        }
        if (digits.empty()) {
            digits = "0";
        }
        if (f.grouping) {
            digits = group_digits(digits, f.grouping);
        }
        std::string sign = n < 0 ? "-" : (f.sign == '+' ? "+" : (f.sign == ' ' ? " " : ""));
        if (f.alternate) {
            sign += prefix;
        }
        if (f.type == '\0' && v.is_bool() && spec_text.empty()) {
            return to_str(v);
        }
        return apply_width(sign, digits, f, '>');
    }
    if (v.is_number()) {
        const double d = v.as_double();
        char type = f.type;
        std::string body;
        if (std::isnan(d) || std::isinf(d)) {
            body = std::isnan(d) ? "nan" : "inf";
            if (type == 'E' || type == 'F' || type == 'G') {
                body = pytext::upper(body);
            }
        } else if (type == '\0' && f.precision < 0) {
            body = pytext::float_repr(std::fabs(d));
        } else if (type == '%') {
            body = c_format_double("%." + std::to_string(f.precision < 0 ? 6 : f.precision) + "f", std::fabs(d) * 100) +
                   "%";
        } else if (type == 'e' || type == 'E' || type == 'f' || type == 'F' || type == 'g' || type == 'G' ||
                   type == 'n' || type == '\0') {
            const int precision = f.precision < 0 ? 6 : f.precision;
            char conv = type == 'n' ? 'g' : type;
            if (type == '\0') {
                conv = 'g';
            }
            std::string spec = std::string("%") + (f.alternate ? "#" : "") + "." + std::to_string(precision) + conv;
            body = c_format_double(spec, std::fabs(d));
            if (type == '\0' && body.find_first_of(".eEn") == std::string::npos) {
                body += ".0";  // no type: like 'g' but always a digit after the point in fixed notation
            }
        } else {
            raise("Unknown format code '{}' for object of type 'float'", type);
        }
        if (f.grouping && !std::isnan(d) && !std::isinf(d)) {
            const std::size_t end = body.find_first_not_of("0123456789");
            body = group_digits(body.substr(0, end), f.grouping) + (end == std::string::npos ? "" : body.substr(end));
        }
        const std::string sign = std::signbit(d) && !std::isnan(d) ? "-" : (f.sign == '+' ? "+" : (f.sign == ' ' ? " " : ""));
        return apply_width(sign, body, f, '>');
    }
    raise("unsupported format string passed to {}.__format__", python_type_name(v));
}

}  // namespace

std::string brace_format(Interpreter& interp, const std::string& format, const CallArgs& args) {
    std::string out;
    std::size_t i = 0;
    std::size_t auto_index = 0;
    bool used_auto = false;
    bool used_manual = false;
    auto resolve = [&](const std::string& field) -> Value {
        // field_name: (digits | identifier | "") ( "." name | "[" key "]" )*
        std::size_t p = 0;
        while (p < field.size() && field[p] != '.' && field[p] != '[') {
            ++p;
        }
        const std::string head = field.substr(0, p);
        Value v;
        if (head.empty()) {
            if (used_manual) {
                raise("cannot switch from manual field specification to automatic field numbering");
            }
            used_auto = true;
            if (auto_index >= args.positional.size()) {
                raise("Replacement index {} out of range for positional args tuple", auto_index);
            }
            v = args.positional[auto_index++];
        } else if (pytext::all_chars(head, pytext::is_digit)) {
            if (used_auto) {
                raise("cannot switch from automatic field numbering to manual field specification");
            }
            used_manual = true;
            const auto idx = pytext::parse_int(head, 10);
            if (!idx || *idx < 0 || static_cast<std::size_t>(*idx) >= args.positional.size()) {
                raise("Replacement index {} out of range for positional args tuple", head);
            }
            v = args.positional[static_cast<std::size_t>(*idx)];
        } else {
            bool found = false;
            for (const auto& [k, val] : args.keyword) {
                if (k == head) {
                    v = val;
                    found = true;
                }
            }
            if (!found) {
                raise("KeyError: {}", pytext::repr(head));
            }
        }
        while (p < field.size()) {
            if (field[p] == '.') {
                std::size_t q = ++p;
                while (q < field.size() && field[q] != '.' && field[q] != '[') {
                    ++q;
                }
                v = interp.get_attr(v, field.substr(p, q - p));
                p = q;
            } else {
                const std::size_t q = field.find(']', p);
                if (q == std::string::npos) {
                    raise("Missing ']' in format string");
                }
                const std::string key = field.substr(p + 1, q - p - 1);
                const auto idx = pytext::all_chars(key, pytext::is_digit) ? pytext::parse_int(key, 10) : std::nullopt;
                v = interp.get_item(v, idx ? Value(*idx) : Value(key));
                p = q + 1;
            }
        }
        return v;
    };
    while (i < format.size()) {
        const char c = format[i];
        if (c == '}') {
            if (i + 1 < format.size() && format[i + 1] == '}') {
                out.push_back('}');
                i += 2;
                continue;
            }
            raise("{}", "Single '}' encountered in format string");
        }
        if (c != '{') {
            out.push_back(c);
            ++i;
            continue;
        }
        if (i + 1 < format.size() && format[i + 1] == '{') {
            out.push_back('{');
            i += 2;
            continue;
        }
        // Find the matching '}' (format specs may nest one level of {}).
        int depth = 1;
        std::size_t j = i + 1;
        while (j < format.size() && depth > 0) {
            depth += format[j] == '{' ? 1 : (format[j] == '}' ? -1 : 0);
            ++j;
        }
        if (depth != 0) {
            raise("{}", "expected '}' before end of string");
        }
        const std::string inner = format.substr(i + 1, j - i - 2);
        i = j;
        std::string field = inner;
        std::string spec;
        char conversion = '\0';
        std::size_t bracket = 0;
        for (std::size_t k = 0; k < inner.size(); ++k) {
            if (inner[k] == '[') {
                ++bracket;
            } else if (inner[k] == ']' && bracket > 0) {
                --bracket;
            } else if (bracket == 0 && (inner[k] == '!' || inner[k] == ':')) {
                field = inner.substr(0, k);
                std::string rest = inner.substr(k);
                if (rest[0] == '!') {
                    if (rest.size() < 2) {
                        raise("end of string while looking for conversion specifier");
                    }
                    conversion = rest[1];
                    rest = rest.substr(2);
                    if (!rest.empty() && rest[0] != ':') {
                        raise("expected ':' after conversion specifier");
                    }
                }
                if (!rest.empty()) {
                    spec = rest.substr(1);
                }
                break;
            }
        }
        if (spec.find('{') != std::string::npos) {
            spec = brace_format(interp, spec, args);
        }
        Value v = resolve(field);
        if (conversion == 'r' || conversion == 'a') {
            v = Value(to_repr(v));
        } else if (conversion == 's') {
            v = Value(to_str(v));
        } else if (conversion != '\0') {
            raise("Unknown conversion specifier {}", conversion);
        }
        if (v.is_undefined()) {
            v = Value(std::string());
        }
        out += format_value(v, spec);
        interp.check_size(out.size());
    }
    return out;
}

}  // namespace msa::jinja
