// Parser from tokens to the AST, following jinja2's grammar (operator precedence, tuples without parentheses,
// tests with a bare argument, filter chains, slices, call arguments with *args/**kwargs) and the statements
// Hugging Face's environment enables: if/elif/else, for (else, `if` filter, recursive), set (incl. block set and
// namespace attributes), macro, call, filter, with, print, raw, break/continue (loopcontrols) and generation.
#pragma once

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

#include <cstdint>
#include <string_view>

namespace msa::jinja {

// Nesting limit for expressions and statements (deeper templates are rejected with an error, never a crash).
constexpr int kMaxParseDepth = 256;
// Height limit of one expression tree. Operator, filter and attribute chains (a.b.c, x|f|g, 1+2+3) are parsed in loops,
// not by recursion, so they are measured separately: the evaluator, the validators and the tree's destructor recurse
// over the tree, and a long chain must be an error, never a stack overflow.
constexpr std::uint32_t kMaxExprHeight = 1000;

// Parses a template; throws TemplateError with line and column. Unknown filters and tests are rejected here, as
// jinja2 does when it compiles a template (except directly inside an `if` or an inline if-expression, where
// jinja2 defers the error to the call).
TemplateAst parse_template(std::string_view source);

}  // namespace msa::jinja
