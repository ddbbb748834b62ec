// Abstract syntax tree of a parsed Jinja template (expressions and statements), produced by jinja_parser and
// walked by jinja_interpreter.
#pragma once

#include "chat/jinja_value.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace msa::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct SourcePos {
    int line = 0;
    int column = 0;
};

// Arguments of a call, filter or test: f(a, b, k=v, *args, **kwargs).
struct ArgExprs {
    std::vector<ExprPtr> positional;
    std::vector<std::pair<std::string, ExprPtr>> keyword;
    ExprPtr star_args;
    ExprPtr star_kwargs;
};

enum class ExprKind : std::uint8_t {
    kLiteral,    // literal
    kName,       // name
    kList,       // items
    kTuple,      // items
    kDict,       // items: key, value, key, value, ...
    kGetAttr,    // a.name
    kGetItem,    // a[b]
    kSlice,      // items: start, stop, step (each may be null); only as the index of kGetItem
    kCall,       // a(args)
    kFilter,     // a | name(args); a is null inside {% filter %} and {% set x | f %}
    kTest,       // a is name(args)
    kNot,        // not a
    kNeg,        // -a
    kPos,        // +a
    kBinary,     // a op b (op: + - * / // % **)
    kAnd,        // a and b
    kOr,         // a or b
    kConcat,     // items joined with ~
    kCompare,    // items[0] ops[0] items[1] ops[1] items[2] ... (chained)
    kCondExpr,   // b if a else c (c may be null)
};

struct Expr {
    ExprKind kind = ExprKind::kLiteral;
    SourcePos pos;
    Value literal;
    std::string name;              // name, attribute, filter or test name, binary operator
    std::vector<ExprPtr> items;    // list/tuple/dict/slice/concat/compare operands
    std::vector<std::string> ops;  // compare operators: == != < <= > >= in notin
    ExprPtr a;
    ExprPtr b;
    ExprPtr c;
    ArgExprs args;
    // Height of the tree below and including this node; set by the parser (0: not measured yet).
    std::uint32_t height = 0;
};

// Assignment target of for/set/with: a name, a (nested) tuple of names, or namespace.attribute.
struct Target {
    enum class Kind : std::uint8_t { kName, kTuple, kNamespaceAttr };
    Kind kind = Kind::kName;
    std::string name;  // kName / kNamespaceAttr: the variable
    std::string attr;  // kNamespaceAttr: the attribute
    std::vector<Target> items;
};

// Parameters of a macro or of a call block's caller.
struct Signature {
    std::vector<std::string> params;
    std::vector<ExprPtr> defaults;  // for the last defaults.size() parameters
    bool uses_varargs = false;      // the body reads `varargs`
    bool uses_kwargs = false;       // the body reads `kwargs`
    bool uses_caller = false;       // the body reads `caller`
};

enum class StmtKind : std::uint8_t {
    kData,         // text
    kPrint,        // {{ expr }} or {% print expr %}
    kIf,           // branches + else_body
    kFor,          // target in expr [if filter] [recursive]: body [else else_body]
    kSet,          // target = expr
    kSetBlock,     // {% set target [| filters] %}body{% endset %}; expr holds the filter chain (or null)
    kMacro,        // {% macro name(signature) %}body{% endmacro %}
    kCallBlock,    // {% call(signature) expr %}body{% endcall %}
    kFilterBlock,  // {% filter chain %}body{% endfilter %}; expr holds the filter chain
    kWith,         // {% with targets = values %}body{% endwith %}
    kBreak,
    kContinue,
    kScope,        // body rendered in place ({% generation %}, HF's assistant-mask extension)
    kUnsupported,  // a jinja2 tag this engine does not implement (include, import, extends, block, ...)
};

struct Stmt {
    StmtKind kind = StmtKind::kData;
    SourcePos pos;
    std::string text;  // kData text; kMacro name; kUnsupported tag name
    ExprPtr expr;
    ExprPtr filter;  // kFor: the `if` condition
    Target target;
    std::vector<Target> targets;  // kWith
    std::vector<ExprPtr> values;  // kWith
    std::vector<std::pair<ExprPtr, Body>> branches;  // kIf
    Body body;
    Body else_body;
    Signature signature;
    bool recursive = false;
    // Names that start out undefined in the frame this statement opens (loop body, macro, caller, with, filter/set
    // block, generation) and in a for-loop's else frame; filled by annotate_frames (jinja_symbols.h).
    std::vector<std::string> frame_undefined;
    std::vector<std::string> else_frame_undefined;
};

struct TemplateAst {
    Body body;
    std::vector<std::string> frame_undefined;  // of the top-level frame
};

}  // namespace msa::jinja
