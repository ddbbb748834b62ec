// The builtins of Hugging Face's chat-template environment: jinja2's filters (with HF's tojson), tests, global
// functions (range, dict, namespace, cycler, joiner, raise_exception, strftime_now) and the Python methods of
// str, list, tuple and dict that templates call (`content.strip()`, `messages[0].get('role')`, ...).
#pragma once

#include "chat/jinja_interpreter.h"
#include "chat/jinja_value.h"

#include <memory>
#include <string>
#include <string_view>

namespace msa::jinja {

class Scope;

// Names jinja2 knows (an unknown one is a compile-time error). A few known filters are not implemented
// (random, wordwrap, urlize, pprint, filesizeformat, xmlattr, urlencode, striptags) and fail when called.
bool is_filter_name(std::string_view name);
bool is_test_name(std::string_view name);

Value call_filter(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args);
bool call_test(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args);

// Attribute lookup on str/list/tuple/dict values. Returns true and sets `out` to a bound method when `name` is a
// method of the value's Python type; mutating methods (append, update, pop, ...) yield the sandbox's
// "unsafe" undefined value instead.
bool method_attr(const Value& receiver, const std::string& name, Value& out);
Value call_method(Interpreter& interp, const Value& receiver, const std::string& name, CallArgs& args);

// The global scope of every render.
std::shared_ptr<Scope> make_global_scope();

// printf-style formatting (Python `str % args` and jinja's |format): args is a tuple, a dict, or a single value.
std::string percent_format(const std::string& format, const Value& args, const Interpreter& interp);
// Python str.format(*args, **kwargs).
std::string brace_format(Interpreter& interp, const std::string& format, const CallArgs& args);

}  // namespace msa::jinja
