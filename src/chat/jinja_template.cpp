#include "chat/jinja_template.h"

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_parser.h"
#include "chat/py_text.h"

namespace msa::jinja {

namespace {

TemplateError located(const std::string& name, const TemplateError& e) {
    std::string where = "template '" + name + "'";
    if (e.line() > 0) {
        where += ", line " + std::to_string(e.line()) + ", column " + std::to_string(e.column());
    }
    if (e.raised_by_template()) {
        return TemplateError(where + ": raise_exception: " + e.message(), e.line(), e.column(), true);
    }
    return TemplateError(where + ": " + e.message(), e.line(), e.column());
}

}  // namespace

Template::Template(std::string_view source, std::string name) : name_(std::move(name)) {
    if (!pytext::is_valid_utf8(source)) {
        throw TemplateError("template '" + name_ + "': the source is not valid UTF-8", 0, 0);
    }
    try {
        ast_ = std::make_shared<const TemplateAst>(parse_template(source));
    } catch (const TemplateError& e) {
        throw located(name_, e);
    } catch (const Error& e) {
        throw TemplateError("template '" + name_ + "': " + e.what(), 0, 0);
    }
}

std::string Template::render(const Dict& context, const RenderOptions& options) const {
    try {
        static const std::shared_ptr<Scope> globals = make_global_scope();
        Interpreter interp(options, globals);
        return interp.render(*ast_, context);
    } catch (const TemplateError& e) {
        throw located(name_, e);
    } catch (const Error& e) {
        throw TemplateError("template '" + name_ + "': " + e.what(), 0, 0);
    }
}

}  // namespace msa::jinja
