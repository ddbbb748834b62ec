#include "chat/jinja_objects.h"

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"

namespace msa::jinja {

// ---- namespace ----------------------------------------------------------------------------------------------

std::string NamespaceObject::repr() const {
    return "<Namespace " + to_repr(Value::dict(attrs_)) + ">";
}

Value NamespaceObject::get_attr(std::string_view name) {
    if (const Value* v = attrs_.find(name)) {
        return *v;
    }
    return Value::undefined(fmt::format("'jinja2.utils.Namespace object' has no attribute '{}'", name));
}

// ---- loop ---------------------------------------------------------------------------------------------------

std::string LoopObject::repr() const {
    return fmt::format("<LoopContext {}/{}>", index0_ + 1, items_.size());
}

Value LoopObject::get_attr(std::string_view name) {
    const auto length = static_cast<std::int64_t>(items_.size());
    const auto index0 = static_cast<std::int64_t>(index0_);
    if (name == "index") {
        return Value(index0 + 1);
    }
    if (name == "index0") {
        return Value(index0);
    }
    if (name == "revindex") {
        return Value(length - index0);
    }
    if (name == "revindex0") {
        return Value(length - index0 - 1);
    }
    if (name == "first") {
        return Value(index0 == 0);
    }
    if (name == "last") {
        return Value(index0 == length - 1);
    }
    if (name == "length") {
        return Value(length);
    }
    if (name == "depth") {
        return Value(static_cast<std::int64_t>(depth_));
    }
    if (name == "depth0") {
        return Value(static_cast<std::int64_t>(depth_ - 1));
    }
    if (name == "previtem") {
        return index0 > 0 ? items_[index0_ - 1] : Value::undefined("there is no previous item");
    }
    if (name == "nextitem") {
        return index0 + 1 < length ? items_[index0_ + 1] : Value::undefined("there is no next item");
    }
    if (name == "cycle") {
        auto self = std::static_pointer_cast<LoopObject>(shared_from_this());
        return Value::object(std::make_shared<FunctionObject>("cycle", [self](Interpreter&, CallArgs& args) {
            if (args.positional.empty()) {
                raise("no items for cycling given");
            }
            return args.positional[self->index0_ % args.positional.size()];
        }));
    }
    if (name == "changed") {
        auto self = std::static_pointer_cast<LoopObject>(shared_from_this());
        return Value::object(std::make_shared<FunctionObject>("changed", [self](Interpreter&, CallArgs& args) {
            const Value now = Value::list(args.positional);
            if (self->has_changed_value_ && values_equal(now, self->last_changed_)) {
                return Value(false);
            }
            self->has_changed_value_ = true;
            self->last_changed_ = now;
            return Value(true);
        }));
    }
    return Value::undefined(fmt::format("'jinja2.runtime.LoopContext object' has no attribute '{}'", name));
}

Value LoopObject::call(Interpreter& interp, CallArgs& args) {
    if (stmt_ == nullptr) {
        raise("Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.");
    }
    if (args.positional.size() != 1 || !args.keyword.empty()) {
        raise("loop() takes exactly one argument (the items of the next level)");
    }
    const Interpreter::CallDepth depth(interp);
    return Value(interp.render_loop(*stmt_, interp.iterate(args.positional[0]), scope_, depth_ + 1));
}

// ---- macro --------------------------------------------------------------------------------------------------

Value MacroObject::get_attr(std::string_view name) {
    if (name == "name") {
        return Value(name_);
    }
    if (name == "arguments") {
        List params;
        for (const auto& p : signature_->params) {
            params.emplace_back(p);
        }
        return Value::tuple(std::move(params));
    }
    if (name == "catch_kwargs") {
        return Value(signature_->uses_kwargs);
    }
    if (name == "catch_varargs") {
        return Value(signature_->uses_varargs);
    }
    if (name == "caller") {
        return Value(signature_->uses_caller);
    }
    return Value::undefined(fmt::format("'jinja2.runtime.Macro object' has no attribute '{}'", name));
}

Value MacroObject::call(Interpreter& interp, CallArgs& args) {
    const Interpreter::CallDepth depth(interp);
    auto scope = Interpreter::enter_frame(closure_, definition_->frame_undefined);
    const auto& params = signature_->params;
    const std::size_t first_default = params.size() - signature_->defaults.size();
    std::vector<bool> bound(params.size(), false);
    List extra_positional;
    for (std::size_t i = 0; i < args.positional.size(); ++i) {
        if (i < params.size()) {
            interp.assign(*scope, params[i], args.positional[i], scope);
            bound[i] = true;
        } else {
            extra_positional.push_back(args.positional[i]);
        }
    }
    if (!extra_positional.empty() && !signature_->uses_varargs) {
        raise("macro '{}' takes not more than {} argument(s)", name_, params.size());
    }
    Dict extra_keyword;
    Value caller = Value::undefined("No caller defined");
    for (auto& [key, value] : args.keyword) {
        bool matched = false;
        for (std::size_t i = 0; i < params.size(); ++i) {
            if (params[i] == key) {
                if (bound[i]) {
                    raise("macro '{}' got multiple values for argument '{}'", name_, key);
                }
                interp.assign(*scope, params[i], value, scope);
                bound[i] = true;
                matched = true;
                break;
            }
        }
        if (matched) {
            continue;
        }
        if (key == "caller" && signature_->uses_caller) {
            caller = value;
            continue;
        }
        if (!signature_->uses_kwargs) {
            raise("macro '{}' takes no keyword argument '{}'", name_, key);
        }
        extra_keyword.set(Value(key), value);
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
        if (bound[i]) {
            continue;
        }
        if (i >= first_default) {
            interp.assign(*scope, params[i], interp.eval(*signature_->defaults[i - first_default], scope), scope);
        } else {
            interp.assign(*scope, params[i], Value::undefined(fmt::format("parameter '{}' was not provided", params[i])),
                          scope);
        }
    }
    if (signature_->uses_varargs) {
        interp.assign(*scope, "varargs", Value::tuple(std::move(extra_positional)), scope);
    }
    if (signature_->uses_kwargs) {
        interp.assign(*scope, "kwargs", Value::dict(std::move(extra_keyword)), scope);
    }
    if (signature_->uses_caller) {
        interp.assign(*scope, "caller", caller, scope);
    }
    return Value(interp.render_body(definition_->body, scope));
}

// ---- bound method ---------------------------------------------------------------------------------------------

std::string BoundMethod::repr() const {
    return "<built-in method " + name_ + " of " + python_type_name(receiver_) + " object>";
}

Value BoundMethod::call(Interpreter& interp, CallArgs& args) {
    return call_method(interp, receiver_, name_, args);
}

// ---- generator ------------------------------------------------------------------------------------------------

List GeneratorObject::iterate() {
    if (producer_) {
        Producer produce = std::move(producer_);
        producer_ = nullptr;
        items_ = produce();
    }
    List rest(items_.begin() + static_cast<std::ptrdiff_t>(next_), items_.end());
    next_ = items_.size();
    return rest;
}

// ---- dict views -----------------------------------------------------------------------------------------------

std::string DictViewObject::type_name() const {
    switch (kind_) {
        case Kind::kKeys:
            return "dict_keys";
        case Kind::kValues:
            return "dict_values";
        default:
            return "dict_items";
    }
}

std::string DictViewObject::repr() const {
    List items;
    for (const auto& [k, v] : dict_.as_dict().entries()) {
        items.push_back(kind_ == Kind::kKeys ? k : (kind_ == Kind::kValues ? v : Value::tuple({k, v})));
    }
    return type_name() + "(" + to_repr(Value::list(std::move(items))) + ")";
}

List DictViewObject::iterate() {
    List items;
    items.reserve(dict_.as_dict().size());
    for (const auto& [k, v] : dict_.as_dict().entries()) {
        items.push_back(kind_ == Kind::kKeys ? k : (kind_ == Kind::kValues ? v : Value::tuple({k, v})));
    }
    return items;
}

// ---- cycler / joiner --------------------------------------------------------------------------------------------

Value CyclerObject::get_attr(std::string_view name) {
    if (name == "current") {
        return items_.empty() ? Value::undefined("the cycler has no items") : items_[pos_];
    }
    auto self = std::static_pointer_cast<CyclerObject>(shared_from_this());
    if (name == "next") {
        return Value::object(std::make_shared<FunctionObject>("next", [self](Interpreter&, CallArgs&) {
            if (self->items_.empty()) {
                raise("the cycler has no items");
            }
            Value v = self->items_[self->pos_];
            self->pos_ = (self->pos_ + 1) % self->items_.size();
            return v;
        }));
    }
    if (name == "reset") {
        return Value::object(std::make_shared<FunctionObject>("reset", [self](Interpreter&, CallArgs&) {
            self->pos_ = 0;
            return Value::none();
        }));
    }
    return Object::get_attr(name);
}

Value JoinerObject::call(Interpreter&, CallArgs&) {
    if (!used_) {
        used_ = true;
        return Value(std::string());
    }
    return Value(sep_);
}

}  // namespace msa::jinja
