// Global functions of HF's chat-template environment: jinja2's range (capped at 100000 items like the sandbox),
// dict, namespace, cycler, joiner, lipsum (unsupported), plus HF's raise_exception and strftime_now.
#include "chat/jinja_args.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_objects.h"
#include "chat/py_text.h"

#include <chrono>
#include <ctime>

namespace msa::jinja {

namespace {

constexpr std::int64_t kMaxRange = 100000;

Value fn_range(Interpreter& interp, CallArgs& args) {
    if (!args.keyword.empty()) {
        raise("range() takes no keyword arguments");
    }
    std::int64_t start = 0;
    std::int64_t stop = 0;
    std::int64_t step = 1;
    switch (args.positional.size()) {
        case 1:
            stop = to_index(args.positional[0]);
            break;
        case 2:
            start = to_index(args.positional[0]);
            stop = to_index(args.positional[1]);
            break;
        case 3:
            start = to_index(args.positional[0]);
            stop = to_index(args.positional[1]);
            step = to_index(args.positional[2]);
            break;
        default:
            raise("range expected 1 to 3 arguments, got {}", args.positional.size());
    }
    if (step == 0) {
        raise("range() arg 3 must not be zero");
    }
    // Number of items without overflow.
    const long double span = static_cast<long double>(stop) - static_cast<long double>(start);
    const long double count_ld = span / static_cast<long double>(step);
    const std::int64_t count = count_ld <= 0 ? 0 : static_cast<std::int64_t>(std::ceil(static_cast<double>(count_ld)));
    if (count > kMaxRange) {
        raise("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
    }
    interp.charge(static_cast<std::uint64_t>(count));
    List out;
    out.reserve(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) {
        out.emplace_back(start + i * step);
    }
    return Value::list(std::move(out));
}

// dict(mapping_or_pairs, **kwargs) and namespace(...) share Python's dict() constructor.
Dict dict_from_args(Interpreter& interp, CallArgs& args, const char* callee) {
    Dict d;
    if (args.positional.size() > 1) {
        raise("{} expected at most 1 argument, got {}", callee, args.positional.size());
    }
    if (args.positional.size() == 1) {
        const Value& src = args.positional[0];
        if (src.is_dict()) {
            d = src.as_dict();
        } else {
            for (const Value& pair : interp.iterate(src)) {
                const List kv = interp.iterate(pair);
                if (kv.size() != 2) {
                    raise("dictionary update sequence element has length {}; 2 is required", kv.size());
                }
                d.set(kv[0], kv[1]);
            }
        }
    }
    for (const auto& [k, v] : args.keyword) {
        d.set(Value(k), v);
    }
    return d;
}

Value fn_dict(Interpreter& interp, CallArgs& args) {
    return Value::dict(dict_from_args(interp, args, "dict"));
}

Value fn_namespace(Interpreter& interp, CallArgs& args) {
    auto ns = std::make_shared<NamespaceObject>(dict_from_args(interp, args, "namespace"));
    interp.track(ns);
    return Value::object(ns);
}

Value fn_cycler(Interpreter& interp, CallArgs& args) {
    if (!args.keyword.empty()) {
        raise("cycler() takes no keyword arguments");
    }
    if (args.positional.empty()) {
        raise("at least one item has to be provided");
    }
    auto cycler = std::make_shared<CyclerObject>(args.positional);
    interp.track(cycler);
    return Value::object(cycler);
}

Value fn_joiner(Interpreter&, CallArgs& args) {
    ArgReader a(args, "joiner");
    const Value sep = a.get(0, "sep", Value(", "));
    a.done();
    return Value::object(std::make_shared<JoinerObject>(to_str(sep)));
}

Value fn_lipsum(Interpreter&, CallArgs&) {
    raise("lipsum() is not supported by this engine");
}

Value fn_raise_exception(Interpreter&, CallArgs& args) {
    ArgReader a(args, "raise_exception");
    const Value message = a.required(0, "message");
    a.done();
    throw TemplateError(to_str(message), 0, 0, /*raised_by_template=*/true);
}

Value fn_strftime_now(Interpreter& interp, CallArgs& args) {
    ArgReader a(args, "strftime_now");
    const Value format = a.required(0, "format");
    a.done();
    const std::string& f = req_str(format, "strftime() argument 1");
    const std::time_t now =
        interp.options().now_unix_seconds
            ? static_cast<std::time_t>(*interp.options().now_unix_seconds)
            : std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    localtime_r(&now, &tm);
    if (f.empty()) {
        return Value(std::string());
    }
    // strftime returns 0 both for "too small" and for an empty result: grow until it fits or clearly is empty.
    for (std::size_t size = 64 + f.size() * 4; size <= (1u << 20); size *= 4) {
        std::string buf(size, '\0');
        const std::size_t n = std::strftime(buf.data(), buf.size(), f.c_str(), &tm);
        if (n > 0) {
            buf.resize(n);
            return Value(std::move(buf));
        }
    }
    return Value(std::string());
}

void add(Scope& scope, const char* name, FunctionObject::Fn fn) {
    scope.set(name, Value::object(std::make_shared<FunctionObject>(name, std::move(fn))));
}

}  // namespace

std::shared_ptr<Scope> make_global_scope() {
    auto scope = std::make_shared<Scope>(nullptr);
    add(*scope, "range", fn_range);
    add(*scope, "dict", fn_dict);
    add(*scope, "namespace", fn_namespace);
    add(*scope, "cycler", fn_cycler);
    add(*scope, "joiner", fn_joiner);
    add(*scope, "lipsum", fn_lipsum);
    add(*scope, "raise_exception", fn_raise_exception);
    add(*scope, "strftime_now", fn_strftime_now);
    return scope;
}

}  // namespace msa::jinja
