// Tree-walking evaluator of a parsed template with jinja2's runtime semantics: lexical scopes (a for-loop body gets a
// fresh scope per iteration, macros close over the scope they are defined in, top-level `set` writes the template
// context), default Undefined (prints as "", fails when used), the loop object, macros and call blocks, and the
// sandbox rules of Hugging Face's ImmutableSandboxedEnvironment (no mutating methods on lists and dicts, no
// underscore attributes, range() capped at 100000). Every render is bounded: steps, call depth, output and string
// sizes (exceeding a limit is an error, never a hang or a crash).
#pragma once

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace msa::jinja {

struct RenderOptions {
    // Largest rendered output, and largest string any operation may build while rendering.
    std::size_t max_output_bytes = 32u << 20;
    // Evaluation steps (statements, expressions, loop iterations, items processed by filters).
    std::uint64_t max_steps = 50'000'000;
    // Nested macro/caller/recursive-loop calls, and nested statement+expression evaluation.
    int max_call_depth = 200;
    int max_eval_depth = 2000;
    // Time used by strftime_now() (seconds since the epoch, formatted in local time); current time when unset.
    std::optional<std::int64_t> now_unix_seconds;
};

// Variables of one scope; lookups walk up to the parent.
class Scope {
public:
    explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}
    const Value* find(const std::string& name) const;
    void set(const std::string& name, Value value) { vars_[name] = std::move(value); }
    const std::shared_ptr<Scope>& parent() const { return parent_; }
    void clear() { vars_.clear(); }

private:
    std::shared_ptr<Scope> parent_;
    std::unordered_map<std::string, Value> vars_;
};

class Interpreter {
public:
    Interpreter(const RenderOptions& options, std::shared_ptr<Scope> globals);
    ~Interpreter();
    Interpreter(const Interpreter&) = delete;
    Interpreter& operator=(const Interpreter&) = delete;

    // Renders a template body with `context` as its top-level variables.
    std::string render(const TemplateAst& ast, const Dict& context);

    // ---- services for builtins and runtime objects ----
    const RenderOptions& options() const { return options_; }
    // Counts evaluation steps; throws when the budget is exhausted.
    void charge(std::uint64_t steps) const;
    // Charges for copying `bytes` of string data (one step per KiB), so that a loop that keeps rebuilding a large
    // string stops within the step budget instead of running for minutes.
    void charge_bytes(std::size_t bytes) const { charge(bytes >> 10); }
    // Throws when a string of `bytes` would exceed the size limit.
    void check_size(std::size_t bytes) const;
    // jinja2's environment.getattr / getitem (sandboxed): attribute falls back to item and vice versa.
    Value get_attr(const Value& obj, const std::string& name);
    Value get_item(const Value& obj, const Value& key);
    // Python iter(): list/tuple items, dict keys, string characters, generator items; undefined is empty.
    List iterate(const Value& v);
    // Calls any callable value (macro, builtin, bound method, loop, caller).
    Value call(const Value& callee, CallArgs& args);
    Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
    bool apply_test(const std::string& name, const Value& input, CallArgs& args);
    // A new scope for a frame of the template, with the names jinja2 declares undefined on entry (jinja_symbols.h).
    static std::shared_ptr<Scope> enter_frame(std::shared_ptr<Scope> parent, const std::vector<std::string>& undefined);
    // Runs a macro or caller body in `scope` and returns its output.
    std::string render_body(const Body& body, const std::shared_ptr<Scope>& scope);
    // Runs one recursive-loop level (loop(items)) and returns its output.
    std::string render_loop(const Stmt& loop_stmt, List items, const std::shared_ptr<Scope>& scope, int depth);
    // Assigns a variable, keeping track of scopes that may take part in reference cycles.
    void assign(Scope& scope, const std::string& name, Value value, const std::shared_ptr<Scope>& owner);
    // Registers an object whose references must be dropped when the render ends (namespaces, cyclers).
    void track(const std::shared_ptr<Object>& obj);
    // Evaluates an expression (macro defaults are evaluated by the macro object).
    Value eval(const Expr& e, const std::shared_ptr<Scope>& scope);

    // RAII guard for nested calls (macros, callers, recursive loops).
    class CallDepth {
    public:
        explicit CallDepth(Interpreter& interp);
        ~CallDepth();
        CallDepth(const CallDepth&) = delete;
        CallDepth& operator=(const CallDepth&) = delete;

    private:
        Interpreter& interp_;
    };

private:
    enum class Flow : std::uint8_t { kNormal, kBreak, kContinue };

    Flow exec_body(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out);
    Flow exec(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
    Flow exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out, List items, int depth);
    void exec_call_block(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
    void assign_target(const Target& t, Value value, const std::shared_ptr<Scope>& scope);
    void append_output(std::string& out, std::string_view text) const;

    Value eval_impl(const Expr& e, const std::shared_ptr<Scope>& scope);
    Value eval_call(const Expr& e, const std::shared_ptr<Scope>& scope, const Value* extra_caller);
    Value eval_compare(const Expr& e, const std::shared_ptr<Scope>& scope);
    Value eval_slice(const Value& target, const Expr& slice, const std::shared_ptr<Scope>& scope);
    CallArgs eval_args(const ArgExprs& args, const std::shared_ptr<Scope>& scope);
    Value lookup(const std::string& name, const std::shared_ptr<Scope>& scope) const;

    const RenderOptions& options_;
    std::shared_ptr<Scope> globals_;
    mutable std::uint64_t steps_ = 0;  // charged by const operations too (they build values)
    int call_depth_ = 0;
    int eval_depth_ = 0;
    // Scopes holding objects and tracked objects: cleared after the render to break reference cycles
    // (a macro stored in the scope it closes over, a namespace that contains itself).
    std::vector<std::weak_ptr<Scope>> object_scopes_;
    std::vector<std::weak_ptr<Object>> tracked_;
};

// Python semantics used by the interpreter and the builtins.
Value binary_op(const std::string& op, const Value& a, const Value& b, const Interpreter& interp);
bool contains(Interpreter& interp, const Value& container, const Value& item);
// a[start:stop:step] for lists, tuples and strings (Python slice rules). Throws for step 0.
Value slice_value(const Value& v, const std::optional<std::int64_t>& start, const std::optional<std::int64_t>& stop,
                  const std::optional<std::int64_t>& step);
// Concatenates str() of the values (jinja `~`).
Value concat_values(const List& parts, const Interpreter& interp);
// HTML-escapes like markupsafe.escape (returns the text).
std::string html_escape(std::string_view s);

}  // namespace msa::jinja
