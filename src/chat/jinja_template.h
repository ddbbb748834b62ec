// A compiled Jinja template: the engine's public entry point. Rendering matches Python jinja2 3.1 configured as
// Hugging Face transformers configures it for chat templates (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols, the generation tag, HF's tojson/raise_exception/strftime_now).
//
//   msa::jinja::Template t("Hello {{ name }}!", "greeting");
//   msa::jinja::Dict ctx;
//   ctx.set("name", "world");
//   std::string s = t.render(ctx);  // "Hello world!"
//
// Errors (syntax, undefined values used as values, raise_exception(), limits) are thrown as TemplateError, an
// msa::Error whose message names the template, line and column.
#pragma once

#include "chat/jinja_ast.h"
#include "chat/jinja_error.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_value.h"

#include <memory>
#include <string>
#include <string_view>

namespace msa::jinja {

class Template {
public:
    // Parses `source`; `name` appears in error messages. Throws TemplateError.
    Template(std::string_view source, std::string name);

    // Renders with `context` as the template's variables. Thread-safe: a Template may render concurrently.
    std::string render(const Dict& context, const RenderOptions& options = {}) const;

    const std::string& name() const { return name_; }
    const TemplateAst& ast() const { return *ast_; }

private:
    std::string name_;
    std::shared_ptr<const TemplateAst> ast_;
};

}  // namespace msa::jinja
