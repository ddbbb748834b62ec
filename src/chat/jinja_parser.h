// Parser from tokens to the AST, following jinja2's grammar (operator precedence, tuples without parentheses,
// tests with a bare argument, filter chains, slices, call arguments with *args/**kwargs) and the statements
// Hugging Face's environment enables: if/elif/else, for (else, `if` filter, recursive), set (incl. block set and
// namespace attributes), macro, call, filter, with, print, raw, break/continue (loopcontrols) and generation.
#pragma once

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

#include <string_view>

namespace msa::jinja {

// Nesting limit for expressions and statements (deeper templates are rejected with an error, never a crash).
constexpr int kMaxParseDepth = 256;

// Parses a template; throws TemplateError with line and column. Unknown filters and tests are rejected here, as
// jinja2 does when it compiles a template (except directly inside an `if` or an inline if-expression, where
// jinja2 defers the error to the call).
TemplateAst parse_template(std::string_view source);

}  // namespace msa::jinja
