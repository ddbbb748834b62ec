// Runtime objects of the Jinja engine: namespace(), the loop variable, macros and callers, builtin functions,
// bound methods (`"s".strip`), one-shot generators (what jinja2's map/select/... filters return), cycler and joiner.
#pragma once

#include "chat/jinja_ast.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_value.h"

#include <functional>
#include <memory>
#include <string>

namespace msa::jinja {

// namespace(...): the only value templates may mutate (`{% set ns.attr = value %}`).
class NamespaceObject : public Object {
public:
    explicit NamespaceObject(Dict attrs) : attrs_(std::move(attrs)) {}
    std::string type_name() const override { return "Namespace"; }
    std::string repr() const override;
    Value get_attr(std::string_view name) override;
    void set_attr(const std::string& name, Value value) { attrs_.set(Value(name), std::move(value)); }
    void clear() override { attrs_.clear(); }

private:
    Dict attrs_;
};

// State shared by the loop variable of one for-loop.
class LoopObject : public Object {
public:
    LoopObject(List items, int depth, const Stmt* recursive_stmt, std::shared_ptr<Scope> recursive_scope)
        : items_(std::move(items)), depth_(depth), stmt_(recursive_stmt), scope_(std::move(recursive_scope)) {}
    std::string type_name() const override { return "LoopContext"; }
    std::string repr() const override;
    Value get_attr(std::string_view name) override;
    // loop(items) renders the body of a recursive loop again.
    bool is_callable() const override { return stmt_ != nullptr; }
    Value call(Interpreter& interp, CallArgs& args) override;
    void clear() override { scope_.reset(); }

    void set_index(std::size_t index0) { index0_ = index0; }
    const List& items() const { return items_; }

private:
    List items_;
    std::size_t index0_ = 0;
    int depth_ = 1;
    const Stmt* stmt_;
    std::shared_ptr<Scope> scope_;
    bool has_changed_value_ = false;
    Value last_changed_;
};

// A macro ({% macro %}) or the caller of a call block.
class MacroObject : public Object {
public:
    // `definition` is the {% macro %} or {% call %} statement (signature, body, frame symbols).
    MacroObject(std::string name, const Stmt* definition, std::shared_ptr<Scope> closure)
        : name_(std::move(name)), definition_(definition), signature_(&definition->signature),
          closure_(std::move(closure)) {}
    std::string type_name() const override { return "Macro"; }
    std::string repr() const override { return "<Macro '" + name_ + "'>"; }
    Value get_attr(std::string_view name) override;
    bool is_callable() const override { return true; }
    Value call(Interpreter& interp, CallArgs& args) override;
    void clear() override { closure_.reset(); }

private:
    std::string name_;
    const Stmt* definition_;
    const Signature* signature_;
    std::shared_ptr<Scope> closure_;
};

class FunctionObject : public Object {
public:
    using Fn = std::function<Value(Interpreter&, CallArgs&)>;
    FunctionObject(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
    std::string type_name() const override { return "builtin_function_or_method"; }
    std::string repr() const override { return "<built-in function " + name_ + ">"; }
    bool is_callable() const override { return true; }
    Value call(Interpreter& interp, CallArgs& args) override { return fn_(interp, args); }

private:
    std::string name_;
    Fn fn_;
};

// A method of a str, list, tuple or dict value (`message.content.startswith`).
class BoundMethod : public Object {
public:
    BoundMethod(Value receiver, std::string name) : receiver_(std::move(receiver)), name_(std::move(name)) {}
    std::string type_name() const override { return "builtin_function_or_method"; }
    std::string repr() const override;
    bool is_callable() const override { return true; }
    Value call(Interpreter& interp, CallArgs& args) override;
    void clear() override { receiver_ = Value(); }

private:
    Value receiver_;
    std::string name_;
};

// One-shot iterator (what jinja2's map/select/items/unique/... filters and reversed() return): always truthy, has
// no length, and yields its items once. A lazy generator computes its items on first iteration, so that, as in
// jinja2, a filter applied to the wrong type only fails when its result is iterated.
class GeneratorObject : public Object {
public:
    using Producer = std::function<List()>;
    GeneratorObject(std::string type, List items) : type_(std::move(type)), items_(std::move(items)) {}
    GeneratorObject(std::string type, Producer producer) : type_(std::move(type)), producer_(std::move(producer)) {}
    std::string type_name() const override { return type_; }
    std::string repr() const override { return "<" + type_ + " object>"; }
    bool is_iterable() const override { return true; }
    List iterate() override;
    void clear() override {
        items_.clear();
        producer_ = nullptr;
    }

private:
    std::string type_;
    List items_;
    Producer producer_;
    std::size_t next_ = 0;
};

// dict.keys() / .values() / .items(): iterable any number of times, has a length, not subscriptable.
class DictViewObject : public Object {
public:
    enum class Kind : std::uint8_t { kKeys, kValues, kItems };
    DictViewObject(Kind kind, Value dict) : kind_(kind), dict_(std::move(dict)) {}
    std::string type_name() const override;
    std::string repr() const override;
    bool truthy() const override { return !dict_.as_dict().empty(); }
    std::optional<std::int64_t> length() const override { return static_cast<std::int64_t>(dict_.as_dict().size()); }
    bool is_iterable() const override { return true; }
    bool is_reversible() const override { return true; }
    List iterate() override;

private:
    Kind kind_;
    Value dict_;
};

// cycler(*items): .next(), .current, .reset().
class CyclerObject : public Object {
public:
    explicit CyclerObject(List items) : items_(std::move(items)) {}
    std::string type_name() const override { return "Cycler"; }
    Value get_attr(std::string_view name) override;
    void clear() override { items_.clear(); }

private:
    List items_;
    std::size_t pos_ = 0;
};

// joiner(sep): returns "" the first time it is called, then sep.
class JoinerObject : public Object {
public:
    explicit JoinerObject(std::string sep) : sep_(std::move(sep)) {}
    std::string type_name() const override { return "Joiner"; }
    bool is_callable() const override { return true; }
    Value call(Interpreter& interp, CallArgs& args) override;

private:
    std::string sep_;
    bool used_ = false;
};

}  // namespace msa::jinja
