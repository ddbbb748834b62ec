#include "chat/jinja_interpreter.h"

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_objects.h"
#include "chat/py_text.h"

#include <cmath>
#include <limits>

namespace msa::jinja {

// ---- Scope ----------------------------------------------------------------------------------------------------

const Value* Scope::find(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
        const auto it = s->vars_.find(name);
        if (it != s->vars_.end()) {
            return &it->second;
        }
    }
    return nullptr;
}

// ---- Python operators -----------------------------------------------------------------------------------------

namespace {

[[noreturn]] void raise_undefined(const Value& v) {
    raise("{}", v.undefined_hint().empty() ? std::string("value is undefined") : v.undefined_hint());
}

// Python ints are unbounded; ours are 64-bit and overflow is an error (never a wrong number).
std::int64_t checked(char op, std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    bool overflow = false;
    switch (op) {
        case '+':
            overflow = __builtin_add_overflow(a, b, &r);
            break;
        case '-':
            overflow = __builtin_sub_overflow(a, b, &r);
            break;
        default:
            overflow = __builtin_mul_overflow(a, b, &r);
            break;
    }
    if (overflow) {
        raise("integer overflow: the result does not fit in 64 bits");
    }
    return r;
}

Value repeat(const Value& seq, std::int64_t count, const Interpreter& interp) {
    if (count <= 0) {
        if (seq.is_string()) {
            return seq.is_markup() ? Value::markup("") : Value(std::string());
        }
        return seq.is_tuple() ? Value::tuple({}) : Value::list({});
    }
    const auto n = static_cast<std::size_t>(count);
    if (seq.is_string()) {
        const std::string& s = seq.as_string();
        if (!s.empty() && n > interp.options().max_output_bytes / s.size()) {
            raise("string repetition exceeds the limit of {} bytes", interp.options().max_output_bytes);
        }
        interp.charge_bytes(s.size() * n);
        std::string out;
        out.reserve(s.size() * n);
        for (std::size_t i = 0; i < n; ++i) {
            out += s;
        }
        return seq.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
    }
    const List& items = seq.as_list();
    if (!items.empty() && n > interp.options().max_output_bytes / items.size()) {
        raise("sequence repetition exceeds the limit of {} items", interp.options().max_output_bytes);
    }
    interp.charge(items.size() * n);
    List out;
    out.reserve(items.size() * n);
    for (std::size_t i = 0; i < n; ++i) {
        out.insert(out.end(), items.begin(), items.end());
    }
    return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

double float_mod(double x, double y) {
    double mod = std::fmod(x, y);
    if (mod != 0.0) {
        if ((y < 0) != (mod < 0)) {
            mod += y;
        }
    } else {
        mod = std::copysign(0.0, y);
    }
    return mod;
}

double float_floordiv(double x, double y) {
    double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0.0 && ((y < 0) != (mod < 0))) {
        div -= 1.0;
    }
    if (div != 0.0) {
        double floordiv = std::floor(div);
        if (div - floordiv > 0.5) {
            floordiv += 1.0;
        }
        return floordiv;
    }
    return std::copysign(0.0, x / y);
}

std::int64_t int_pow(std::int64_t base, std::int64_t exp) {
    std::int64_t result = 1;
    bool overflow = false;
    while (exp > 0) {
        if (exp & 1) {
            overflow = overflow || __builtin_mul_overflow(result, base, &result);
        }
        exp >>= 1;
        if (exp > 0) {
            overflow = overflow || __builtin_mul_overflow(base, base, &base);
        }
    }
    if (overflow) {
        raise("integer overflow: the result does not fit in 64 bits");
    }
    return result;
}

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
    raise("unsupported operand type(s) for {}: '{}' and '{}'", op, python_type_name(a), python_type_name(b));
}

}  // namespace

std::string html_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&#34;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out.push_back(c);
        }
    }
    return out;
}

Value binary_op(const std::string& op, const Value& a, const Value& b, const Interpreter& interp) {
    if (a.is_undefined()) {
        raise_undefined(a);
    }
    if (b.is_undefined()) {
        raise_undefined(b);
    }
    const bool ints = a.is_integral() && b.is_integral();
    const bool nums = a.is_number() && b.is_number();
    if (op == "+") {
        if (ints) {
            return Value(checked('+', a.as_int(), b.as_int()));
        }
        if (nums) {
            return Value(a.as_double() + b.as_double());
        }
        if (a.is_string() && b.is_string()) {
            interp.check_size(a.as_string().size() + b.as_string().size());
            interp.charge_bytes(a.as_string().size() + b.as_string().size());
            if (a.is_markup() || b.is_markup()) {
                const std::string left = a.is_markup() ? a.as_string() : html_escape(a.as_string());
                const std::string right = b.is_markup() ? b.as_string() : html_escape(b.as_string());
                return Value::markup(left + right);
            }
            return Value(a.as_string() + b.as_string());
        }
        if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
            interp.charge(a.as_list().size() + b.as_list().size());
            List out = a.as_list();
            out.insert(out.end(), b.as_list().begin(), b.as_list().end());
            return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
        }
        if (a.is_string() || a.is_sequence()) {
            raise("can only concatenate {} (not \"{}\") to {}", python_type_name(a), python_type_name(b),
                  python_type_name(a));
        }
        unsupported(op, a, b);
    }
    if (op == "-") {
        if (ints) {
            return Value(checked('-', a.as_int(), b.as_int()));
        }
        if (nums) {
            return Value(a.as_double() - b.as_double());
        }
        unsupported(op, a, b);
    }
    if (op == "*") {
        if (ints) {
            return Value(checked('*', a.as_int(), b.as_int()));
        }
        if (nums) {
            return Value(a.as_double() * b.as_double());
        }
        if ((a.is_string() || a.is_sequence()) && b.is_integral()) {
            return repeat(a, b.as_int(), interp);
        }
        if ((b.is_string() || b.is_sequence()) && a.is_integral()) {
            return repeat(b, a.as_int(), interp);
        }
        if (a.is_string() || a.is_sequence()) {
            raise("can't multiply sequence by non-int of type '{}'", python_type_name(b));
        }
        unsupported(op, a, b);
    }
    if (op == "/") {
        if (nums) {
            if (b.as_double() == 0.0) {
                raise("division by zero");
            }
            return Value(a.as_double() / b.as_double());
        }
        unsupported(op, a, b);
    }
    if (op == "//") {
        if (ints) {
            const std::int64_t x = a.as_int();
            const std::int64_t y = b.as_int();
            if (y == 0) {
                raise("integer division or modulo by zero");
            }
            if (x == std::numeric_limits<std::int64_t>::min() && y == -1) {
                raise("integer overflow: the result does not fit in 64 bits");
            }
            std::int64_t q = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) {
                --q;
            }
            return Value(q);
        }
        if (nums) {
            if (b.as_double() == 0.0) {
                raise("float floor division by zero");
            }
            return Value(float_floordiv(a.as_double(), b.as_double()));
        }
        unsupported(op, a, b);
    }
    if (op == "%") {
        if (a.is_string()) {
            std::string s = percent_format(a.as_string(), b, interp);
            return a.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
        }
        if (ints) {
            const std::int64_t x = a.as_int();
            const std::int64_t y = b.as_int();
            if (y == 0) {
                raise("integer division or modulo by zero");
            }
            if (y == -1) {
                return Value(static_cast<std::int64_t>(0));
            }
            std::int64_t r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) {
                r += y;
            }
            return Value(r);
        }
        if (nums) {
            if (b.as_double() == 0.0) {
                raise("float modulo");
            }
            return Value(float_mod(a.as_double(), b.as_double()));
        }
        unsupported(op, a, b);
    }
    if (op == "**") {
        if (ints && b.as_int() >= 0) {
            return Value(int_pow(a.as_int(), b.as_int()));
        }
        if (nums) {
            const double x = a.as_double();
            const double y = b.as_double();
            if (x == 0.0 && y < 0.0) {
                raise("0.0 cannot be raised to a negative power");
            }
            if (x < 0.0 && y != std::floor(y)) {
                raise("a negative number raised to a fractional power gives a complex number, which is not supported");
            }
            return Value(std::pow(x, y));
        }
        unsupported("** or pow()", a, b);
    }
    raise("unknown operator '{}'", op);
}

bool contains(Interpreter& interp, const Value& container, const Value& item) {
    switch (container.type()) {
        case Value::Type::kUndefined:
            return false;
        case Value::Type::kString:
            if (!item.is_string()) {
                raise("'in <string>' requires string as left operand, not {}", python_type_name(item));
            }
            return container.as_string().find(item.as_string()) != std::string::npos;
        case Value::Type::kList:
        case Value::Type::kTuple:
            for (const Value& v : container.as_list()) {
                if (values_equal(v, item)) {
                    return true;
                }
            }
            return false;
        case Value::Type::kDict:
            return container.as_dict().find(item) != nullptr;
        case Value::Type::kObject:
            if (container.as_object().is_iterable()) {
                for (const Value& v : interp.iterate(container)) {
                    if (values_equal(v, item)) {
                        return true;
                    }
                }
                return false;
            }
            [[fallthrough]];
        default:
            raise("argument of type '{}' is not iterable", python_type_name(container));
    }
}

Value slice_value(const Value& v, const std::optional<std::int64_t>& start_arg,
                  const std::optional<std::int64_t>& stop_arg, const std::optional<std::int64_t>& step_arg) {
    const std::int64_t step = step_arg.value_or(1);
    if (step == 0) {
        raise("slice step cannot be zero");
    }
    std::u32string chars;
    const bool is_str = v.is_string();
    const bool ascii = is_str && pytext::is_ascii(v.as_string());
    if (is_str && !ascii) {
        chars = pytext::decode(v.as_string());
    }
    const std::int64_t length = is_str ? static_cast<std::int64_t>(ascii ? v.as_string().size() : chars.size())
                                       : static_cast<std::int64_t>(v.as_list().size());
    auto adjust = [&](const std::optional<std::int64_t>& arg, bool is_start) {
        if (!arg) {
            if (step < 0) {
                return is_start ? length - 1 : static_cast<std::int64_t>(-1);
            }
            return is_start ? static_cast<std::int64_t>(0) : length;
        }
        std::int64_t x = *arg;
        if (x < 0) {
            x += length;
            if (x < 0) {
                x = step < 0 ? -1 : 0;
            }
        } else if (x >= length) {
            x = step < 0 ? length - 1 : length;
        }
        return x;
    };
    const std::int64_t start = adjust(start_arg, true);
    const std::int64_t stop = adjust(stop_arg, false);
    std::vector<std::int64_t> indices;
    if (step > 0) {
        for (std::int64_t i = start; i < stop; i += step) {
            indices.push_back(i);
        }
    } else {
        for (std::int64_t i = start; i > stop; i += step) {
            indices.push_back(i);
        }
    }
    if (is_str) {
        std::string out;
        const std::string& s = v.as_string();
        for (const std::int64_t i : indices) {
            if (ascii) {
                out.push_back(s[static_cast<std::size_t>(i)]);
            } else {
                pytext::append_utf8(out, chars[static_cast<std::size_t>(i)]);
            }
        }
        return v.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
    }
    List out;
    out.reserve(indices.size());
    for (const std::int64_t i : indices) {
        out.push_back(v.as_list()[static_cast<std::size_t>(i)]);
    }
    return v.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Value concat_values(const List& parts, const Interpreter& interp) {
    // With autoescape off (HF's setting) jinja2 joins with plain str(): Markup operands are not special here.
    std::string out;
    for (const Value& p : parts) {
        out += to_str(p);
        interp.check_size(out.size());
    }
    interp.charge_bytes(out.size());
    return Value(std::move(out));
}

// ---- Interpreter ------------------------------------------------------------------------------------------------

Interpreter::Interpreter(const RenderOptions& options, std::shared_ptr<Scope> globals)
    : options_(options), globals_(std::move(globals)) {}

Interpreter::~Interpreter() {
    for (const auto& weak : object_scopes_) {
        if (auto scope = weak.lock()) {
            scope->clear();
        }
    }
    for (const auto& weak : tracked_) {
        if (auto obj = weak.lock()) {
            obj->clear();
        }
    }
}

Interpreter::CallDepth::CallDepth(Interpreter& interp) : interp_(interp) {
    if (++interp_.call_depth_ > interp_.options_.max_call_depth) {
        --interp_.call_depth_;
        raise("maximum recursion depth exceeded: more than {} nested macro calls", interp_.options_.max_call_depth);
    }
}

Interpreter::CallDepth::~CallDepth() {
    --interp_.call_depth_;
}

void Interpreter::charge(std::uint64_t steps) const {
    steps_ += steps;
    if (steps_ > options_.max_steps) {
        raise("the template exceeded the limit of {} evaluation steps", options_.max_steps);
    }
}

void Interpreter::check_size(std::size_t bytes) const {
    if (bytes > options_.max_output_bytes) {
        raise("a string built by the template exceeds the limit of {} bytes", options_.max_output_bytes);
    }
}

void Interpreter::append_output(std::string& out, std::string_view text) const {
    if (out.size() + text.size() > options_.max_output_bytes) {
        raise("the rendered output exceeds the limit of {} bytes", options_.max_output_bytes);
    }
    out.append(text);
}

namespace {

// Appends a weak reference, dropping expired ones whenever the list doubles (its size stays proportional to the
// objects alive, not to the number of assignments a long loop makes).
template <typename T>
void remember(std::vector<std::weak_ptr<T>>& list, const std::shared_ptr<T>& item) {
    if (list.size() >= 1024 && (list.size() & (list.size() - 1)) == 0) {
        std::erase_if(list, [](const std::weak_ptr<T>& w) { return w.expired(); });
    }
    list.push_back(item);
}

}  // namespace

void Interpreter::track(const std::shared_ptr<Object>& obj) {
    remember(tracked_, obj);
}

void Interpreter::assign(Scope& scope, const std::string& name, Value value, const std::shared_ptr<Scope>& owner) {
    const bool is_object = value.is_object();
    scope.set(name, std::move(value));
    if (is_object && (object_scopes_.empty() || object_scopes_.back().lock() != owner)) {
        remember(object_scopes_, owner);
    }
}

std::shared_ptr<Scope> Interpreter::enter_frame(std::shared_ptr<Scope> parent,
                                               const std::vector<std::string>& undefined) {
    auto scope = std::make_shared<Scope>(std::move(parent));
    for (const auto& name : undefined) {
        scope->set(name, Value::undefined("'" + name + "' is undefined"));
    }
    return scope;
}

std::string Interpreter::render(const TemplateAst& ast, const Dict& context) {
    // The render context (below the globals), then the template's top-level frame.
    auto context_scope = std::make_shared<Scope>(globals_);
    for (const auto& [key, value] : context.entries()) {
        if (!key.is_string()) {
            raise("template context keys must be strings, got {}", python_type_name(key));
        }
        assign(*context_scope, key.as_string(), value, context_scope);
    }
    auto root = enter_frame(context_scope, ast.frame_undefined);
    std::string out;
    exec_body(ast.body, root, out);
    return out;
}

std::string Interpreter::render_body(const Body& body, const std::shared_ptr<Scope>& scope) {
    std::string out;
    exec_body(body, scope, out);
    return out;
}

std::string Interpreter::render_loop(const Stmt& loop_stmt, List items, const std::shared_ptr<Scope>& scope,
                                     int depth) {
    std::string out;
    exec_for(loop_stmt, scope, out, std::move(items), depth);
    return out;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out) {
    for (const auto& stmt : body) {
        const Flow flow = exec(*stmt, scope, out);
        if (flow != Flow::kNormal) {
            return flow;
        }
    }
    return Flow::kNormal;
}

namespace {

// Applies a filter chain parsed with a null innermost input ({% filter %}, {% set x | f %}) to `input`.
Value apply_chain(Interpreter& interp, const Expr& chain, const Value& input, const std::shared_ptr<Scope>& scope,
                  CallArgs (*eval_args)(Interpreter&, const ArgExprs&, const std::shared_ptr<Scope>&)) {
    const Value inner = chain.a ? apply_chain(interp, *chain.a, input, scope, eval_args) : input;
    CallArgs args = eval_args(interp, chain.args, scope);
    return interp.apply_filter(chain.name, inner, args);
}

class EvalDepth {
public:
    EvalDepth(int& depth, int limit) : depth_(depth) {
        if (++depth_ > limit) {
            --depth_;
            raise("maximum recursion depth exceeded: the template nests more than {} evaluations", limit);
        }
    }
    ~EvalDepth() { --depth_; }
    EvalDepth(const EvalDepth&) = delete;
    EvalDepth& operator=(const EvalDepth&) = delete;

private:
    int& depth_;
};

}  // namespace

Interpreter::Flow Interpreter::exec(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
    try {
        charge(1);
        const EvalDepth depth(eval_depth_, options_.max_eval_depth);
        auto eval_args_fn = [](Interpreter& interp, const ArgExprs& args, const std::shared_ptr<Scope>& sc) {
            return interp.eval_args(args, sc);
        };
        switch (s.kind) {
            case StmtKind::kData:
                append_output(out, s.text);
                return Flow::kNormal;
            case StmtKind::kPrint:
                append_output(out, to_str(eval(*s.expr, scope)));
                return Flow::kNormal;
            case StmtKind::kIf:
                for (const auto& [test, body] : s.branches) {
                    if (eval(*test, scope).truthy()) {
                        return exec_body(body, scope, out);
                    }
                }
                return exec_body(s.else_body, scope, out);
            case StmtKind::kFor:
                return exec_for(s, scope, out, iterate(eval(*s.expr, scope)), 1);
            case StmtKind::kSet:
                assign_target(s.target, eval(*s.expr, scope), scope);
                return Flow::kNormal;
            case StmtKind::kSetBlock: {
                auto inner = enter_frame(scope, s.frame_undefined);
                std::string buf;
                exec_body(s.body, inner, buf);
                Value v(std::move(buf));
                if (s.expr) {
                    v = apply_chain(*this, *s.expr, v, scope, eval_args_fn);
                }
                assign_target(s.target, std::move(v), scope);
                return Flow::kNormal;
            }
            case StmtKind::kMacro: {
                auto macro = std::make_shared<MacroObject>(s.text, &s, scope);
                assign(*scope, s.text, Value::object(macro), scope);
                return Flow::kNormal;
            }
            case StmtKind::kCallBlock:
                exec_call_block(s, scope, out);
                return Flow::kNormal;
            case StmtKind::kFilterBlock: {
                auto inner = enter_frame(scope, s.frame_undefined);
                std::string buf;
                exec_body(s.body, inner, buf);
                append_output(out, to_str(apply_chain(*this, *s.expr, Value(std::move(buf)), scope, eval_args_fn)));
                return Flow::kNormal;
            }
            case StmtKind::kWith: {
                List values;
                for (const auto& v : s.values) {
                    values.push_back(eval(*v, scope));
                }
                auto inner = enter_frame(scope, s.frame_undefined);
                for (std::size_t i = 0; i < s.targets.size(); ++i) {
                    assign_target(s.targets[i], values[i], inner);
                }
                return exec_body(s.body, inner, out);
            }
            case StmtKind::kBreak:
                return Flow::kBreak;
            case StmtKind::kContinue:
                return Flow::kContinue;
            case StmtKind::kScope: {
                auto inner = enter_frame(scope, s.frame_undefined);
                exec_body(s.body, inner, out);
                return Flow::kNormal;
            }
            case StmtKind::kUnsupported:
                raise("the '{}' tag is not supported", s.text);
        }
        return Flow::kNormal;
    } catch (const TemplateError& e) {
        if (e.line() == 0) {
            throw TemplateError(e.message(), s.pos.line, s.pos.column, e.raised_by_template());
        }
        throw;
    } catch (const Error& e) {
        throw TemplateError(e.what(), s.pos.line, s.pos.column);
    }
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out,
                                        List items, int depth) {
    if (s.filter) {
        List kept;
        for (Value& item : items) {
            charge(1);
            auto test_scope = std::make_shared<Scope>(scope);
            assign_target(s.target, item, test_scope);
            if (eval(*s.filter, test_scope).truthy()) {
                kept.push_back(std::move(item));
            }
        }
        items = std::move(kept);
    }
    if (items.empty()) {
        auto inner = enter_frame(scope, s.else_frame_undefined);
        return exec_body(s.else_body, inner, out);
    }
    const std::size_t n = items.size();
    auto loop = std::make_shared<LoopObject>(std::move(items), depth, s.recursive ? &s : nullptr,
                                             s.recursive ? scope : nullptr);
    const Value loop_value = Value::object(loop);
    for (std::size_t i = 0; i < n; ++i) {
        charge(1);
        loop->set_index(i);
        auto iteration = enter_frame(scope, s.frame_undefined);
        assign_target(s.target, loop->items()[i], iteration);
        iteration->set("loop", loop_value);
        if (s.recursive) {
            assign(*iteration, "loop", loop_value, iteration);
        }
        if (exec_body(s.body, iteration, out) == Flow::kBreak) {
            break;
        }
    }
    return Flow::kNormal;
}

void Interpreter::exec_call_block(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
    auto caller = std::make_shared<MacroObject>("caller", &s, scope);
    const Value caller_value = Value::object(caller);
    append_output(out, to_str(eval_call(*s.expr, scope, &caller_value)));
}

void Interpreter::assign_target(const Target& t, Value value, const std::shared_ptr<Scope>& scope) {
    switch (t.kind) {
        case Target::Kind::kName:
            assign(*scope, t.name, std::move(value), scope);
            return;
        case Target::Kind::kTuple: {
            const List items = iterate(value);
            if (items.size() > t.items.size()) {
                raise("too many values to unpack (expected {})", t.items.size());
            }
            if (items.size() < t.items.size()) {
                raise("not enough values to unpack (expected {}, got {})", t.items.size(), items.size());
            }
            for (std::size_t i = 0; i < items.size(); ++i) {
                assign_target(t.items[i], items[i], scope);
            }
            return;
        }
        case Target::Kind::kNamespaceAttr: {
            const Value target = lookup(t.name, scope);
            auto* ns = target.is_object() ? dynamic_cast<NamespaceObject*>(&target.as_object()) : nullptr;
            if (ns == nullptr) {
                raise("cannot assign attribute on non-namespace object");
            }
            ns->set_attr(t.attr, std::move(value));
            return;
        }
    }
}

Value Interpreter::lookup(const std::string& name, const std::shared_ptr<Scope>& scope) const {
    if (const Value* v = scope->find(name)) {
        return *v;
    }
    return Value::undefined("'" + name + "' is undefined");
}

Value Interpreter::eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
    try {
        charge(1);
        const EvalDepth depth(eval_depth_, options_.max_eval_depth);
        return eval_impl(e, scope);
    } catch (const TemplateError& err) {
        if (err.line() == 0) {
            throw TemplateError(err.message(), e.pos.line, e.pos.column, err.raised_by_template());
        }
        throw;
    } catch (const Error& err) {
        throw TemplateError(err.what(), e.pos.line, e.pos.column);
    }
}

Value Interpreter::eval_impl(const Expr& e, const std::shared_ptr<Scope>& scope) {
    switch (e.kind) {
        case ExprKind::kLiteral:
            return e.literal;
        case ExprKind::kName:
            return lookup(e.name, scope);
        case ExprKind::kList:
        case ExprKind::kTuple: {
            List items;
            items.reserve(e.items.size());
            for (const auto& item : e.items) {
                items.push_back(eval(*item, scope));
            }
            return e.kind == ExprKind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
        }
        case ExprKind::kDict: {
            Dict d;
            for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
                Value key = eval(*e.items[i], scope);
                d.set(key, eval(*e.items[i + 1], scope));
            }
            return Value::dict(std::move(d));
        }
        case ExprKind::kGetAttr:
            return get_attr(eval(*e.a, scope), e.name);
        case ExprKind::kGetItem: {
            const Value target = eval(*e.a, scope);
            if (e.b->kind == ExprKind::kSlice) {
                return eval_slice(target, *e.b, scope);
            }
            return get_item(target, eval(*e.b, scope));
        }
        case ExprKind::kSlice:
            raise("a slice is only valid inside a subscript");
        case ExprKind::kCall:
            return eval_call(e, scope, nullptr);
        case ExprKind::kFilter: {
            const Value input = eval(*e.a, scope);
            CallArgs args = eval_args(e.args, scope);
            return apply_filter(e.name, input, args);
        }
        case ExprKind::kTest: {
            const Value input = eval(*e.a, scope);
            CallArgs args = eval_args(e.args, scope);
            return Value(apply_test(e.name, input, args));
        }
        case ExprKind::kNot:
            return Value(!eval(*e.a, scope).truthy());
        case ExprKind::kNeg:
        case ExprKind::kPos: {
            const Value v = eval(*e.a, scope);
            if (v.is_undefined()) {
                raise_undefined(v);
            }
            const bool neg = e.kind == ExprKind::kNeg;
            if (v.is_integral()) {
                if (!neg) {
                    return Value(v.as_int());
                }
                return Value(checked('-', 0, v.as_int()));
            }
            if (v.is_float()) {
                return Value(neg ? -v.as_double() : v.as_double());
            }
            raise("bad operand type for unary {}: '{}'", neg ? "-" : "+", python_type_name(v));
        }
        case ExprKind::kBinary: {
            const Value a = eval(*e.a, scope);
            const Value b = eval(*e.b, scope);
            return binary_op(e.name, a, b, *this);
        }
        case ExprKind::kAnd: {
            Value left = eval(*e.a, scope);
            return left.truthy() ? eval(*e.b, scope) : left;
        }
        case ExprKind::kOr: {
            Value left = eval(*e.a, scope);
            return left.truthy() ? left : eval(*e.b, scope);
        }
        case ExprKind::kConcat: {
            List parts;
            for (const auto& item : e.items) {
                parts.push_back(eval(*item, scope));
            }
            return concat_values(parts, *this);
        }
        case ExprKind::kCompare:
            return eval_compare(e, scope);
        case ExprKind::kCondExpr:
            if (eval(*e.a, scope).truthy()) {
                return eval(*e.b, scope);
            }
            if (e.c) {
                return eval(*e.c, scope);
            }
            return Value::undefined(fmt::format(
                "the inline if-expression on line {} evaluated to false and no else section was defined.", e.pos.line));
    }
    raise("internal error: unknown expression kind");
}

Value Interpreter::eval_compare(const Expr& e, const std::shared_ptr<Scope>& scope) {
    Value left = eval(*e.items[0], scope);
    for (std::size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.items[i + 1], scope);
        const std::string& op = e.ops[i];
        bool result = false;
        if (op == "==") {
            result = values_equal(left, right);
        } else if (op == "!=") {
            result = !values_equal(left, right);
        } else if (op == "<") {
            result = value_less(left, right);
        } else if (op == "<=") {
            result = value_less(left, right) || values_equal(left, right);
        } else if (op == ">") {
            result = value_less(right, left);
        } else if (op == ">=") {
            result = value_less(right, left) || values_equal(left, right);
        } else if (op == "in") {
            result = contains(*this, right, left);
        } else {
            result = !contains(*this, right, left);
        }
        if (!result) {
            return Value(false);
        }
        left = std::move(right);
    }
    return Value(true);
}

Value Interpreter::eval_slice(const Value& target, const Expr& slice, const std::shared_ptr<Scope>& scope) {
    // jinja2 compiles x[a:b:c] to a plain Python subscript (not environment.getitem), so a type that cannot be
    // sliced is an error rather than an undefined value.
    std::optional<std::int64_t> parts[3];
    for (std::size_t i = 0; i < 3; ++i) {
        if (!slice.items[i]) {
            continue;
        }
        const Value v = eval(*slice.items[i], scope);
        if (v.is_none()) {
            continue;
        }
        if (!v.is_integral()) {
            raise("slice indices must be integers or None or have an __index__ method");
        }
        parts[i] = v.as_int();
    }
    if (target.is_undefined()) {
        raise_undefined(target);
    }
    if (target.is_string() || target.is_sequence()) {
        return slice_value(target, parts[0], parts[1], parts[2]);
    }
    if (target.is_dict()) {
        raise("unhashable type: 'slice'");
    }
    raise("'{}' object is not subscriptable", python_type_name(target));
}

CallArgs Interpreter::eval_args(const ArgExprs& args, const std::shared_ptr<Scope>& scope) {
    CallArgs out;
    for (const auto& a : args.positional) {
        out.positional.push_back(eval(*a, scope));
    }
    if (args.star_args) {
        for (Value& v : iterate(eval(*args.star_args, scope))) {
            out.positional.push_back(std::move(v));
        }
    }
    for (const auto& [key, expr] : args.keyword) {
        out.keyword.emplace_back(key, eval(*expr, scope));
    }
    if (args.star_kwargs) {
        const Value kw = eval(*args.star_kwargs, scope);
        if (!kw.is_dict()) {
            raise("argument after ** must be a mapping, not {}", python_type_name(kw));
        }
        for (const auto& [k, v] : kw.as_dict().entries()) {
            if (!k.is_string()) {
                raise("keywords must be strings");
            }
            for (const auto& existing : out.keyword) {
                if (existing.first == k.as_string()) {
                    raise("got multiple values for keyword argument '{}'", k.as_string());
                }
            }
            out.keyword.emplace_back(k.as_string(), v);
        }
    }
    return out;
}

Value Interpreter::eval_call(const Expr& e, const std::shared_ptr<Scope>& scope, const Value* extra_caller) {
    const Value callee = eval(*e.a, scope);
    CallArgs args = eval_args(e.args, scope);
    if (extra_caller != nullptr) {
        args.keyword.emplace_back("caller", *extra_caller);
    }
    return call(callee, args);
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
    if (callee.is_undefined()) {
        raise_undefined(callee);
    }
    if (callee.is_object() && callee.as_object().is_callable()) {
        return callee.as_object().call(*this, args);
    }
    raise("'{}' object is not callable", python_type_name(callee));
}

Value Interpreter::apply_filter(const std::string& name, const Value& input, CallArgs& args) {
    return call_filter(*this, name, input, args);
}

bool Interpreter::apply_test(const std::string& name, const Value& input, CallArgs& args) {
    return call_test(*this, name, input, args);
}

Value Interpreter::get_attr(const Value& obj, const std::string& name) {
    if (obj.is_undefined()) {
        raise_undefined(obj);
    }
    if (!name.empty() && name[0] == '_') {
        return Value::undefined(
            fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, python_type_name(obj)));
    }
    if (obj.is_object()) {
        return obj.as_object().get_attr(name);
    }
    Value method;
    if (method_attr(obj, name, method)) {
        return method;
    }
    if (obj.is_dict()) {
        if (const Value* v = obj.as_dict().find(std::string_view(name))) {
            return *v;
        }
    }
    return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_type_repr(obj), name));
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
    if (obj.is_undefined()) {
        raise_undefined(obj);
    }
    auto no_element = [&]() {
        if (key.is_string()) {
            return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_type_repr(obj), key.as_string()));
        }
        return Value::undefined(fmt::format("{} has no element {}", object_type_repr(obj), to_repr(key)));
    };
    auto attr_fallback = [&]() {
        if (key.is_string()) {
            const std::string& name = key.as_string();
            if (!name.empty() && name[0] == '_') {
                return Value::undefined(
                    fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, python_type_name(obj)));
            }
            if (obj.is_object()) {
                return obj.as_object().get_attr(name);
            }
            Value method;
            if (method_attr(obj, name, method)) {
                return method;
            }
        }
        return no_element();
    };
    if ((obj.is_sequence() || obj.is_string()) && key.is_integral()) {
        std::int64_t i = key.as_int();
        if (obj.is_string()) {
            const std::string& s = obj.as_string();
            const bool ascii = pytext::is_ascii(s);
            const auto length = static_cast<std::int64_t>(ascii ? s.size() : pytext::length(s));
            if (i < 0) {
                i += length;
            }
            if (i < 0 || i >= length) {
                return no_element();
            }
            if (ascii) {
                return Value(std::string(1, s[static_cast<std::size_t>(i)]));
            }
            const std::size_t begin = pytext::byte_offset(s, static_cast<std::size_t>(i));
            const std::size_t end = pytext::byte_offset(s, static_cast<std::size_t>(i) + 1);
            return Value(s.substr(begin, end - begin));
        }
        const List& items = obj.as_list();
        if (i < 0) {
            i += static_cast<std::int64_t>(items.size());
        }
        if (i < 0 || i >= static_cast<std::int64_t>(items.size())) {
            return no_element();
        }
        return items[static_cast<std::size_t>(i)];
    }
    if (obj.is_dict()) {
        try {
            if (const Value* v = obj.as_dict().find(key)) {
                return *v;
            }
        } catch (const Error&) {
            return no_element();  // unhashable key: jinja2 turns the TypeError into an undefined value
        }
    }
    return attr_fallback();
}

List Interpreter::iterate(const Value& v) {
    switch (v.type()) {
        case Value::Type::kUndefined:
            return {};
        case Value::Type::kList:
        case Value::Type::kTuple:
            charge(v.as_list().size());
            return v.as_list();
        case Value::Type::kDict: {
            List keys;
            keys.reserve(v.as_dict().size());
            for (const auto& [k, val] : v.as_dict().entries()) {
                keys.push_back(k);
            }
            charge(keys.size());
            return keys;
        }
        case Value::Type::kString: {
            List chars;
            const std::string& s = v.as_string();
            std::size_t pos = 0;
            while (pos < s.size()) {
                std::size_t len = 1;
                const auto b = static_cast<unsigned char>(s[pos]);
                if (b >= 0xF0) {
                    len = 4;
                } else if (b >= 0xE0) {
                    len = 3;
                } else if (b >= 0xC0) {
                    len = 2;
                }
                len = std::min(len, s.size() - pos);
                chars.emplace_back(s.substr(pos, len));
                pos += len;
            }
            charge(chars.size());
            return chars;
        }
        case Value::Type::kObject:
            if (v.as_object().is_iterable()) {
                List items = v.as_object().iterate();
                charge(items.size());
                return items;
            }
            [[fallthrough]];
        default:
            raise("'{}' object is not iterable", python_type_name(v));
    }
}

}  // namespace msa::jinja
