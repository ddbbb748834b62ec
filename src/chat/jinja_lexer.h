// Tokenizer for Jinja templates, configured as Hugging Face transformers configures jinja2 for chat templates:
// trim_blocks=True (the first newline after a block or comment tag is removed), lstrip_blocks=True (spaces and tabs
// before a block or comment tag at the start of a line are removed), keep_trailing_newline=False (one trailing
// newline of the source is dropped), "\n" newlines (\r\n and \r are normalized), whitespace control with `-` and
// `+`, {% raw %} blocks, and Python literals inside tags.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace msa::jinja {

enum class TokenType : std::uint8_t {
    kData,           // template text (already whitespace-controlled)
    kVariableBegin,  // {{
    kVariableEnd,    // }}
    kBlockBegin,     // {%
    kBlockEnd,       // %}
    kName,
    kString,
    kInteger,
    kFloat,
    kOperator,  // text holds the operator: + - / // * % ** ~ [ ] ( ) { } == != > >= < <= = . : | , ;
    kEof,
};

struct Token {
    TokenType type = TokenType::kEof;
    std::string text;  // data, name, decoded string literal, or operator
    std::int64_t int_value = 0;
    double float_value = 0.0;
    int line = 1;
    int column = 1;
};

// Tokenizes `source`; throws TemplateError (with line and column) on a lexical error.
std::vector<Token> tokenize(std::string_view source);

}  // namespace msa::jinja
