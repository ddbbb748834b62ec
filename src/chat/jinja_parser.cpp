#include "chat/jinja_parser.h"

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_symbols.h"

#include <algorithm>
#include <set>
#include <utility>

namespace msa::jinja {

namespace {

std::string describe(const Token& t) {
    switch (t.type) {
        case TokenType::kData:
            return "template data / text";
        case TokenType::kVariableBegin:
            return "begin of print statement";
        case TokenType::kVariableEnd:
            return "end of print statement";
        case TokenType::kBlockBegin:
            return "begin of statement block";
        case TokenType::kBlockEnd:
            return "end of statement block";
        case TokenType::kName:
        case TokenType::kOperator:
            return t.text;
        case TokenType::kString:
            return "string";
        case TokenType::kInteger:
            return "integer";
        case TokenType::kFloat:
            return "float";
        case TokenType::kEof:
            return "end of template";
    }
    return "token";
}

class Parser {
public:
    explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

    TemplateAst parse() {
        TemplateAst ast;
        ast.body = subparse({});
        if (!at(TokenType::kEof)) {
            fail_here("unexpected '" + describe(current()) + "'");
        }
        return ast;
    }

private:
    // ---- token stream ----
    const Token& current() const { return tokens_[pos_]; }
    const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
    void advance() {
        if (pos_ + 1 < tokens_.size()) {
            ++pos_;
        }
    }
    bool at(TokenType type) const { return current().type == type; }
    bool at_op(std::string_view op) const { return at(TokenType::kOperator) && current().text == op; }
    bool at_name(std::string_view name) const { return at(TokenType::kName) && current().text == name; }
    bool skip_op(std::string_view op) {
        if (at_op(op)) {
            advance();
            return true;
        }
        return false;
    }
    bool skip_name(std::string_view name) {
        if (at_name(name)) {
            advance();
            return true;
        }
        return false;
    }

    [[noreturn]] void fail_at(const Token& t, const std::string& message) const {
        throw TemplateError(message, t.line, t.column);
    }
    [[noreturn]] void fail_here(const std::string& message) const { fail_at(current(), message); }

    void expect(TokenType type, std::string_view what) {
        if (!at(type)) {
            if (at(TokenType::kEof)) {
                fail_here(eof_message());
            }
            fail_here("expected token '" + std::string(what) + "', got '" + describe(current()) + "'");
        }
        advance();
    }
    void expect_op(std::string_view op) {
        if (!at_op(op)) {
            if (at(TokenType::kEof)) {
                fail_here(eof_message());
            }
            fail_here("expected token '" + std::string(op) + "', got '" + describe(current()) + "'");
        }
        advance();
    }
    std::string expect_name() {
        if (!at(TokenType::kName)) {
            if (at(TokenType::kEof)) {
                fail_here(eof_message());
            }
            fail_here("expected token 'name', got '" + describe(current()) + "'");
        }
        std::string name = current().text;
        advance();
        return name;
    }
    void expect_name(std::string_view name) {
        if (!at_name(name)) {
            fail_here("expected token '" + std::string(name) + "', got '" + describe(current()) + "'");
        }
        advance();
    }

    std::string eof_message() const {
        std::string msg = "Unexpected end of template.";
        if (!end_stack_.empty()) {
            msg += " Jinja was looking for the following tags: ";
            const auto& ends = end_stack_.back();
            for (std::size_t i = 0; i < ends.size(); ++i) {
                msg += (i ? " or '" : "'") + ends[i] + "'";
            }
            msg += ".";
        }
        if (!tag_stack_.empty()) {
            msg += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
        }
        return msg;
    }

    // RAII nesting guard for recursion in the parser.
    class Nest {
    public:
        explicit Nest(Parser& p) : p_(p) {
            if (++p_.depth_ > kMaxParseDepth) {
                p_.fail_here("template nesting exceeds the limit of " + std::to_string(kMaxParseDepth) + " levels");
            }
        }
        ~Nest() { --p_.depth_; }
        Nest(const Nest&) = delete;
        Nest& operator=(const Nest&) = delete;

    private:
        Parser& p_;
    };

    ExprPtr make(ExprKind kind, const Token& at_token) const {
        auto e = std::make_unique<Expr>();
        e->kind = kind;
        e->pos = {at_token.line, at_token.column};
        return e;
    }
    // Measures an expression node (children first, each node once) and stores its height.
    static std::uint32_t measure(Expr& e) {
        if (e.height != 0) {
            return e.height;
        }
        std::uint32_t h = 0;
        const auto child = [&h](const ExprPtr& c) {
            if (c) {
                h = std::max(h, measure(*c));
            }
        };
        child(e.a);
        child(e.b);
        child(e.c);
        for (const auto& item : e.items) {
            child(item);
        }
        for (const auto& arg : e.args.positional) {
            child(arg);
        }
        for (const auto& [key, arg] : e.args.keyword) {
            child(arg);
        }
        child(e.args.star_args);
        child(e.args.star_kwargs);
        e.height = h + 1;
        return e.height;
    }
    // A node built by a loop of the parser (a chain link), checked against kMaxExprHeight.
    ExprPtr chained(ExprPtr e) const {
        if (measure(*e) > kMaxExprHeight) {
            fail_here("expression nesting exceeds the limit of " + std::to_string(kMaxExprHeight) +
                      " levels (a chain of operators, filters, attributes or calls that long)");
        }
        return e;
    }
    StmtPtr make_stmt(StmtKind kind, const Token& at_token) const {
        auto s = std::make_unique<Stmt>();
        s->kind = kind;
        s->pos = {at_token.line, at_token.column};
        return s;
    }

    // ---- statements ----
    bool at_end_token(const std::vector<std::string>& ends) const {
        if (!at(TokenType::kName)) {
            return false;
        }
        for (const auto& e : ends) {
            if (current().text == e) {
                return true;
            }
        }
        return false;
    }

    Body subparse(const std::vector<std::string>& ends) {
        const Nest nest(*this);
        Body body;
        if (!ends.empty()) {
            end_stack_.push_back(ends);
        }
        while (!at(TokenType::kEof)) {
            const Token& t = current();
            if (t.type == TokenType::kData) {
                auto s = make_stmt(StmtKind::kData, t);
                s->text = t.text;
                body.push_back(std::move(s));
                advance();
            } else if (t.type == TokenType::kVariableBegin) {
                auto s = make_stmt(StmtKind::kPrint, t);
                advance();
                s->expr = parse_tuple(false, true, {}, false);
                expect(TokenType::kVariableEnd, "end of print statement");
                body.push_back(std::move(s));
            } else if (t.type == TokenType::kBlockBegin) {
                advance();
                if (!ends.empty() && at_end_token(ends)) {
                    end_stack_.pop_back();
                    return body;
                }
                parse_statement(body);
                expect(TokenType::kBlockEnd, "end of statement block");
            } else {
                fail_here("unexpected '" + describe(t) + "'");
            }
        }
        if (!ends.empty()) {
            end_stack_.pop_back();
        }
        return body;
    }

    Body parse_statements(const std::vector<std::string>& ends, bool drop_needle) {
        skip_op(":");
        expect(TokenType::kBlockEnd, "end of statement block");
        Body body = subparse(ends);
        if (at(TokenType::kEof)) {
            fail_here(eof_message_for(ends));
        }
        if (drop_needle) {
            advance();
        }
        return body;
    }

    std::string eof_message_for(const std::vector<std::string>& ends) {
        end_stack_.push_back(ends);
        std::string msg = eof_message();
        end_stack_.pop_back();
        return msg;
    }

    void parse_statement(Body& out) {
        const Nest nest(*this);
        if (!at(TokenType::kName)) {
            fail_here("tag name expected");
        }
        const Token tag = current();
        const std::string& name = tag.text;
        tag_stack_.push_back(name);
        if (name == "for") {
            out.push_back(parse_for());
        } else if (name == "if") {
            out.push_back(parse_if());
        } else if (name == "set") {
            out.push_back(parse_set());
        } else if (name == "macro") {
            out.push_back(parse_macro());
        } else if (name == "call") {
            out.push_back(parse_call_block());
        } else if (name == "filter") {
            out.push_back(parse_filter_block());
        } else if (name == "with") {
            out.push_back(parse_with());
        } else if (name == "print") {
            advance();
            bool first = true;
            while (!at(TokenType::kBlockEnd)) {
                if (!first) {
                    expect_op(",");
                }
                first = false;
                auto s = make_stmt(StmtKind::kPrint, tag);
                s->expr = parse_expression(true);
                out.push_back(std::move(s));
            }
        } else if (name == "break" || name == "continue") {
            if (loop_depth_ == 0) {
                fail_at(tag, "'" + name + "' outside of a loop");
            }
            advance();
            out.push_back(make_stmt(name == "break" ? StmtKind::kBreak : StmtKind::kContinue, tag));
        } else if (name == "generation") {
            advance();
            auto s = make_stmt(StmtKind::kScope, tag);
            s->body = parse_statements({"endgeneration"}, true);
            out.push_back(std::move(s));
        } else if (name == "block" || name == "extends" || name == "include" || name == "import" ||
                   name == "from" || name == "autoescape") {
            fail_at(tag, "the '" + name + "' tag is not supported in chat templates by this engine");
        } else {
            tag_stack_.pop_back();
            std::string msg = "Encountered unknown tag '" + name + "'.";
            if (!end_stack_.empty()) {
                msg += " Jinja was looking for the following tags: ";
                const auto& ends = end_stack_.back();
                for (std::size_t i = 0; i < ends.size(); ++i) {
                    msg += (i ? " or '" : "'") + ends[i] + "'";
                }
                msg += ".";
            }
            if (!tag_stack_.empty()) {
                msg += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
            }
            fail_at(tag, msg);
        }
        tag_stack_.pop_back();
    }

    StmtPtr parse_for() {
        auto s = make_stmt(StmtKind::kFor, current());
        advance();
        s->target = parse_assign_target(true, false, {"in"}, false);
        expect_name("in");
        s->expr = parse_tuple(false, false, {"recursive"}, false);
        if (skip_name("if")) {
            s->filter = parse_expression(true);
        }
        s->recursive = skip_name("recursive");
        ++loop_depth_;
        s->body = parse_statements({"endfor", "else"}, false);
        --loop_depth_;
        const bool has_else = at_name("else");
        advance();
        if (has_else) {
            s->else_body = parse_statements({"endfor"}, true);
        }
        return s;
    }

    StmtPtr parse_if() {
        auto s = make_stmt(StmtKind::kIf, current());
        advance();
        while (true) {
            ExprPtr test = parse_tuple(false, false, {}, false);
            Body body = parse_statements({"elif", "else", "endif"}, false);
            s->branches.emplace_back(std::move(test), std::move(body));
            const std::string which = current().text;
            advance();
            if (which == "elif") {
                continue;
            }
            if (which == "else") {
                s->else_body = parse_statements({"endif"}, true);
            }
            break;
        }
        return s;
    }

    StmtPtr parse_set() {
        const Token tag = current();
        advance();
        Target target = parse_assign_target(true, false, {}, true);
        if (skip_op("=")) {
            auto s = make_stmt(StmtKind::kSet, tag);
            s->target = std::move(target);
            s->expr = parse_tuple(false, true, {}, false);
            return s;
        }
        auto s = make_stmt(StmtKind::kSetBlock, tag);
        s->target = std::move(target);
        s->expr = parse_filter(nullptr, false);
        s->body = parse_statements({"endset"}, true);
        return s;
    }

    StmtPtr parse_with() {
        auto s = make_stmt(StmtKind::kWith, current());
        advance();
        while (!at(TokenType::kBlockEnd)) {
            if (!s->targets.empty()) {
                expect_op(",");
            }
            s->targets.push_back(parse_assign_target(true, false, {}, false));
            expect_op("=");
            s->values.push_back(parse_expression(true));
        }
        s->body = parse_statements({"endwith"}, true);
        return s;
    }

    void parse_signature(Signature& sig) {
        expect_op("(");
        while (!at_op(")")) {
            if (!sig.params.empty()) {
                expect_op(",");
            }
            sig.params.push_back(expect_name());
            if (skip_op("=")) {
                sig.defaults.push_back(parse_expression(true));
            } else if (!sig.defaults.empty()) {
                fail_here("non-default argument follows default argument");
            }
        }
        expect_op(")");
    }

    StmtPtr parse_macro() {
        auto s = make_stmt(StmtKind::kMacro, current());
        advance();
        s->text = expect_name();
        parse_signature(s->signature);
        const int saved_loop_depth = loop_depth_;
        loop_depth_ = 0;
        s->body = parse_statements({"endmacro"}, true);
        loop_depth_ = saved_loop_depth;
        scan_signature_uses(s->body, s->signature);
        return s;
    }

    StmtPtr parse_call_block() {
        const Token tag = current();
        auto s = make_stmt(StmtKind::kCallBlock, tag);
        advance();
        if (at_op("(")) {
            parse_signature(s->signature);
        }
        s->expr = parse_expression(true);
        if (s->expr->kind != ExprKind::kCall) {
            fail_at(tag, "expected call");
        }
        const int saved_loop_depth = loop_depth_;
        loop_depth_ = 0;
        s->body = parse_statements({"endcall"}, true);
        loop_depth_ = saved_loop_depth;
        scan_signature_uses(s->body, s->signature);
        return s;
    }

    StmtPtr parse_filter_block() {
        auto s = make_stmt(StmtKind::kFilterBlock, current());
        advance();
        s->expr = parse_filter(nullptr, true);
        s->body = parse_statements({"endfilter"}, true);
        return s;
    }

    Target parse_assign_target(bool with_tuple, bool name_only, const std::vector<std::string>& extra_end,
                               bool with_namespace) {
        Target target;
        if (with_namespace && at(TokenType::kName) && look().type == TokenType::kOperator && look().text == ".") {
            target.kind = Target::Kind::kNamespaceAttr;
            target.name = expect_name();
            advance();  // the dot
            target.attr = expect_name();
            return target;
        }
        if (name_only) {
            target.name = expect_name();
            return target;
        }
        const Token start = current();
        ExprPtr e = with_tuple ? parse_tuple(true, true, extra_end, false) : parse_primary();
        if (!to_target(*e, target)) {
            fail_at(start, "can't assign to '" + std::string(e->kind == ExprKind::kLiteral ? "const" : "expression") +
                               "'");
        }
        return target;
    }

    static bool to_target(const Expr& e, Target& out) {
        if (e.kind == ExprKind::kName) {
            out.kind = Target::Kind::kName;
            out.name = e.name;
            return true;
        }
        if (e.kind == ExprKind::kTuple) {
            out.kind = Target::Kind::kTuple;
            for (const auto& item : e.items) {
                Target sub;
                if (!to_target(*item, sub)) {
                    return false;
                }
                out.items.push_back(std::move(sub));
            }
            return true;
        }
        return false;
    }

    // Records whether a macro (or caller) body reads varargs, kwargs or caller.
    static void scan_signature_uses(const Body& body, Signature& sig) {
        for (const auto& stmt : body) {
            scan_stmt(*stmt, sig);
        }
    }
    static void scan_stmt(const Stmt& s, Signature& sig) {
        if (s.kind == StmtKind::kMacro) {
            return;  // a nested macro has its own varargs/kwargs/caller
        }
        scan_expr(s.expr.get(), sig);
        scan_expr(s.filter.get(), sig);
        for (const auto& v : s.values) {
            scan_expr(v.get(), sig);
        }
        for (const auto& [test, body] : s.branches) {
            scan_expr(test.get(), sig);
            scan_signature_uses(body, sig);
        }
        for (const auto& d : s.signature.defaults) {
            scan_expr(d.get(), sig);
        }
        scan_signature_uses(s.body, sig);
        scan_signature_uses(s.else_body, sig);
    }
    static void scan_expr(const Expr* e, Signature& sig) {
        if (e == nullptr) {
            return;
        }
        if (e->kind == ExprKind::kName) {
            sig.uses_varargs = sig.uses_varargs || e->name == "varargs";
            sig.uses_kwargs = sig.uses_kwargs || e->name == "kwargs";
            sig.uses_caller = sig.uses_caller || e->name == "caller";
        }
        for (const auto& item : e->items) {
            scan_expr(item.get(), sig);
        }
        scan_expr(e->a.get(), sig);
        scan_expr(e->b.get(), sig);
        scan_expr(e->c.get(), sig);
        for (const auto& arg : e->args.positional) {
            scan_expr(arg.get(), sig);
        }
        for (const auto& [k, v] : e->args.keyword) {
            scan_expr(v.get(), sig);
        }
        scan_expr(e->args.star_args.get(), sig);
        scan_expr(e->args.star_kwargs.get(), sig);
    }

    // ---- expressions ----
    bool is_tuple_end(const std::vector<std::string>& extra_end) const {
        if (at(TokenType::kVariableEnd) || at(TokenType::kBlockEnd) || at_op(")")) {
            return true;
        }
        return at_end_token(extra_end);
    }

    ExprPtr parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra_end,
                        bool explicit_parentheses) {
        const Token start = current();
        std::vector<ExprPtr> items;
        bool is_tuple = false;
        while (true) {
            if (!items.empty()) {
                expect_op(",");
            }
            if (is_tuple_end(extra_end)) {
                break;
            }
            items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
            if (at_op(",")) {
                is_tuple = true;
            } else {
                break;
            }
        }
        if (!is_tuple) {
            if (!items.empty()) {
                return std::move(items[0]);
            }
            if (!explicit_parentheses) {
                fail_here("Expected an expression, got '" + describe(current()) + "'");
            }
        }
        auto e = make(ExprKind::kTuple, start);
        e->items = std::move(items);
        return e;
    }

    ExprPtr parse_expression(bool with_condexpr) {
        const Nest nest(*this);
        if (!with_condexpr) {
            return parse_or();
        }
        const Token start = current();
        ExprPtr expr1 = parse_or();
        while (skip_name("if")) {
            ExprPtr expr2 = parse_or();
            ExprPtr expr3;
            if (skip_name("else")) {
                expr3 = parse_expression(true);
            }
            auto e = make(ExprKind::kCondExpr, start);
            e->a = std::move(expr2);
            e->b = std::move(expr1);
            e->c = std::move(expr3);
            expr1 = chained(std::move(e));
        }
        return expr1;
    }

    ExprPtr parse_or() { return parse_left_assoc("or", ExprKind::kOr, &Parser::parse_and); }

    ExprPtr parse_and() { return parse_left_assoc("and", ExprKind::kAnd, &Parser::parse_not); }

    // `operand (keyword operand)*`, folded to the left: the shared shape of `or` and `and`.
    ExprPtr parse_left_assoc(std::string_view keyword, ExprKind kind, ExprPtr (Parser::*operand)()) {
        const Token start = current();
        ExprPtr left = (this->*operand)();
        while (skip_name(keyword)) {
            auto e = make(kind, start);
            e->a = std::move(left);
            e->b = (this->*operand)();
            left = chained(std::move(e));
        }
        return left;
    }

    ExprPtr parse_not() {
        if (at_name("not")) {
            const Nest nest(*this);
            auto e = make(ExprKind::kNot, current());
            advance();
            e->a = parse_not();
            return e;
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        const Token start = current();
        ExprPtr expr = parse_math1();
        std::vector<ExprPtr> operands;
        std::vector<std::string> ops;
        while (true) {
            if (at(TokenType::kOperator) && (current().text == "==" || current().text == "!=" ||
                                             current().text == "<" || current().text == "<=" ||
                                             current().text == ">" || current().text == ">=")) {
                ops.push_back(current().text);
                advance();
            } else if (skip_name("in")) {
                ops.emplace_back("in");
            } else if (at_name("not") && look().type == TokenType::kName && look().text == "in") {
                advance();
                advance();
                ops.emplace_back("notin");
            } else {
                break;
            }
            operands.push_back(parse_math1());
        }
        if (ops.empty()) {
            return expr;
        }
        auto e = make(ExprKind::kCompare, start);
        e->items.push_back(std::move(expr));
        for (auto& o : operands) {
            e->items.push_back(std::move(o));
        }
        e->ops = std::move(ops);
        return e;
    }

    ExprPtr binary(ExprKind kind, const Token& start, std::string op, ExprPtr a, ExprPtr b) const {
        auto e = make(kind, start);
        e->name = std::move(op);
        e->a = std::move(a);
        e->b = std::move(b);
        return chained(std::move(e));
    }

    ExprPtr parse_math1() {
        const Token start = current();
        ExprPtr left = parse_concat();
        while (at_op("+") || at_op("-")) {
            std::string op = current().text;
            advance();
            left = binary(ExprKind::kBinary, start, std::move(op), std::move(left), parse_concat());
        }
        return left;
    }

    ExprPtr parse_concat() {
        const Token start = current();
        ExprPtr first = parse_math2();
        if (!at_op("~")) {
            return first;
        }
        auto e = make(ExprKind::kConcat, start);
        e->items.push_back(std::move(first));
        while (skip_op("~")) {
            e->items.push_back(parse_math2());
        }
        return e;
    }

    ExprPtr parse_math2() {
        const Token start = current();
        ExprPtr left = parse_pow();
        while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
            std::string op = current().text;
            advance();
            left = binary(ExprKind::kBinary, start, std::move(op), std::move(left), parse_pow());
        }
        return left;
    }

    ExprPtr parse_pow() {
        const Token start = current();
        ExprPtr left = parse_unary(true);
        while (skip_op("**")) {
            left = binary(ExprKind::kBinary, start, "**", std::move(left), parse_unary(true));
        }
        return left;
    }

    ExprPtr parse_unary(bool with_filter) {
        const Nest nest(*this);
        const Token start = current();
        ExprPtr node;
        if (at_op("-") || at_op("+")) {
            const bool neg = current().text == "-";
            advance();
            node = make(neg ? ExprKind::kNeg : ExprKind::kPos, start);
            node->a = parse_unary(false);
        } else {
            node = parse_primary();
        }
        node = parse_postfix(std::move(node));
        if (with_filter) {
            node = parse_filter_expr(std::move(node));
        }
        return node;
    }

    ExprPtr parse_primary() {
        const Nest nest(*this);
        const Token t = current();
        switch (t.type) {
            case TokenType::kName: {
                advance();
                if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
                    auto e = make(ExprKind::kLiteral, t);
                    e->literal = Value(t.text == "true" || t.text == "True");
                    return e;
                }
                if (t.text == "none" || t.text == "None") {
                    auto e = make(ExprKind::kLiteral, t);
                    e->literal = Value::none();
                    return e;
                }
                auto e = make(ExprKind::kName, t);
                e->name = t.text;
                return e;
            }
            case TokenType::kString: {
                std::string s = t.text;
                advance();
                while (at(TokenType::kString)) {
                    s += current().text;
                    advance();
                }
                auto e = make(ExprKind::kLiteral, t);
                e->literal = Value(std::move(s));
                return e;
            }
            case TokenType::kInteger:
            case TokenType::kFloat: {
                advance();
                auto e = make(ExprKind::kLiteral, t);
                e->literal = t.type == TokenType::kInteger ? Value(t.int_value) : Value(t.float_value);
                return e;
            }
            case TokenType::kOperator:
                if (t.text == "(") {
                    advance();
                    ExprPtr e = parse_tuple(false, true, {}, true);
                    expect_op(")");
                    return e;
                }
                if (t.text == "[") {
                    return parse_list();
                }
                if (t.text == "{") {
                    return parse_dict();
                }
                break;
            default:
                break;
        }
        if (t.type == TokenType::kEof) {
            fail_here(eof_message());
        }
        fail_here("unexpected '" + describe(t) + "'");
    }

    ExprPtr parse_list() {
        auto e = make(ExprKind::kList, current());
        expect_op("[");
        while (!at_op("]")) {
            if (!e->items.empty()) {
                expect_op(",");
            }
            if (at_op("]")) {
                break;
            }
            e->items.push_back(parse_expression(true));
        }
        expect_op("]");
        return e;
    }

    ExprPtr parse_dict() {
        auto e = make(ExprKind::kDict, current());
        expect_op("{");
        while (!at_op("}")) {
            if (!e->items.empty()) {
                expect_op(",");
            }
            if (at_op("}")) {
                break;
            }
            e->items.push_back(parse_expression(true));
            expect_op(":");
            e->items.push_back(parse_expression(true));
        }
        expect_op("}");
        return e;
    }

    ExprPtr parse_postfix(ExprPtr node) {
        while (true) {
            if (at_op(".") || at_op("[")) {
                node = chained(parse_subscript(std::move(node)));
            } else if (at_op("(")) {
                node = chained(parse_call(std::move(node)));
            } else {
                return node;
            }
        }
    }

    ExprPtr parse_filter_expr(ExprPtr node) {
        while (true) {
            if (at_op("|")) {
                node = parse_filter(std::move(node), false);
            } else if (at_name("is")) {
                node = chained(parse_test(std::move(node)));
            } else if (at_op("(")) {
                node = chained(parse_call(std::move(node)));
            } else {
                return node;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr node) {
        const Nest nest(*this);
        const Token t = current();
        advance();
        if (t.text == ".") {
            const Token attr = current();
            advance();
            if (attr.type == TokenType::kName) {
                auto e = make(ExprKind::kGetAttr, t);
                e->a = std::move(node);
                e->name = attr.text;
                return e;
            }
            if (attr.type != TokenType::kInteger) {
                fail_at(attr, "expected name or number");
            }
            auto index = make(ExprKind::kLiteral, attr);
            index->literal = Value(attr.int_value);
            auto e = make(ExprKind::kGetItem, t);
            e->a = std::move(node);
            e->b = std::move(index);
            return e;
        }
        std::vector<ExprPtr> args;
        while (!at_op("]")) {
            if (!args.empty()) {
                expect_op(",");
            }
            args.push_back(parse_subscribed());
        }
        expect_op("]");
        auto e = make(ExprKind::kGetItem, t);
        e->a = std::move(node);
        if (args.size() == 1) {
            e->b = std::move(args[0]);
        } else {
            auto tuple = make(ExprKind::kTuple, t);
            tuple->items = std::move(args);
            e->b = std::move(tuple);
        }
        return e;
    }

    ExprPtr parse_subscribed() {
        const Token start = current();
        std::vector<ExprPtr> parts;
        if (at_op(":")) {
            advance();
            parts.push_back(nullptr);
        } else {
            ExprPtr node = parse_expression(true);
            if (!at_op(":")) {
                return node;
            }
            advance();
            parts.push_back(std::move(node));
        }
        if (at_op(":")) {
            parts.push_back(nullptr);
        } else if (!at_op("]") && !at_op(",")) {
            parts.push_back(parse_expression(true));
        } else {
            parts.push_back(nullptr);
        }
        if (at_op(":")) {
            advance();
            if (!at_op("]") && !at_op(",")) {
                parts.push_back(parse_expression(true));
            } else {
                parts.push_back(nullptr);
            }
        } else {
            parts.push_back(nullptr);
        }
        auto e = make(ExprKind::kSlice, start);
        e->items = std::move(parts);
        return e;
    }

    void parse_call_args(ArgExprs& args) {
        const Token open = current();
        expect_op("(");
        bool require_comma = false;
        auto ensure = [&](bool ok) {
            if (!ok) {
                fail_at(open, "invalid syntax for function call expression");
            }
        };
        while (!at_op(")")) {
            if (require_comma) {
                expect_op(",");
                if (at_op(")")) {
                    break;
                }
            }
            if (at_op("*")) {
                ensure(!args.star_args && !args.star_kwargs);
                advance();
                args.star_args = parse_expression(true);
            } else if (at_op("**")) {
                ensure(!args.star_kwargs);
                advance();
                args.star_kwargs = parse_expression(true);
            } else if (at(TokenType::kName) && look().type == TokenType::kOperator && look().text == "=") {
                ensure(!args.star_kwargs);
                std::string key = current().text;
                advance();
                advance();
                args.keyword.emplace_back(std::move(key), parse_expression(true));
            } else {
                ensure(!args.star_args && !args.star_kwargs && args.keyword.empty());
                args.positional.push_back(parse_expression(true));
            }
            require_comma = true;
        }
        expect_op(")");
    }

    ExprPtr parse_call(ExprPtr node) {
        const Nest nest(*this);
        auto e = make(ExprKind::kCall, current());
        e->a = std::move(node);
        parse_call_args(e->args);
        return e;
    }

    ExprPtr parse_filter(ExprPtr node, bool start_inline) {
        const Nest nest(*this);
        while (at_op("|") || start_inline) {
            if (!start_inline) {
                advance();
            }
            const Token name_token = current();
            std::string name = expect_name();
            while (at_op(".")) {
                advance();
                name += "." + expect_name();
            }
            auto e = make(ExprKind::kFilter, name_token);
            e->name = std::move(name);
            e->a = std::move(node);
            if (at_op("(")) {
                parse_call_args(e->args);
            }
            node = chained(std::move(e));
            start_inline = false;
        }
        return node;
    }

    ExprPtr parse_test(ExprPtr node) {
        const Nest nest(*this);
        const Token is_token = current();
        advance();
        const bool negated = skip_name("not");
        std::string name = expect_name();
        while (at_op(".")) {
            advance();
            name += "." + expect_name();
        }
        auto e = make(ExprKind::kTest, is_token);
        e->name = std::move(name);
        e->a = std::move(node);
        const bool bare_arg_start = at(TokenType::kName) || at(TokenType::kString) || at(TokenType::kInteger) ||
                                    at(TokenType::kFloat) || at_op("(") || at_op("[") || at_op("{");
        if (at_op("(")) {
            parse_call_args(e->args);
        } else if (bare_arg_start && !at_name("else") && !at_name("or") && !at_name("and")) {
            if (at_name("is")) {
                fail_here("You cannot chain multiple tests with is");
            }
            e->args.positional.push_back(parse_postfix(parse_primary()));
        }
        if (!negated) {
            return e;
        }
        auto n = make(ExprKind::kNot, is_token);
        n->a = std::move(e);
        return n;
    }

    std::vector<Token> tokens_;
    std::size_t pos_ = 0;
    int depth_ = 0;
    int loop_depth_ = 0;
    std::vector<std::vector<std::string>> end_stack_;
    std::vector<std::string> tag_stack_;
};

// jinja2 resolves filters and tests when it compiles a template: an unknown name is an error even in code that never
// runs, except directly inside an `if` statement or an inline `x if c else y` (jinja2's "soft" frames), where the
// error is raised only if the filter or test is actually called. Nested loops, macros and blocks are not soft.
class NameValidator {
public:
    void body(const Body& b, bool soft) {
        for (const auto& s : b) {
            stmt(*s, soft);
        }
    }

private:
    void stmt(const Stmt& s, bool soft) {
        switch (s.kind) {
            case StmtKind::kIf:
                for (const auto& [test, branch] : s.branches) {
                    expr(test.get(), true);
                    body(branch, true);
                }
                body(s.else_body, true);
                return;
            case StmtKind::kFor:
                expr(s.expr.get(), soft);
                expr(s.filter.get(), false);
                break;
            case StmtKind::kPrint:
            case StmtKind::kSet:
            case StmtKind::kCallBlock:
                expr(s.expr.get(), soft);
                break;
            case StmtKind::kWith:
                for (const auto& v : s.values) {
                    expr(v.get(), soft);
                }
                break;
            default:
                expr(s.expr.get(), false);
                break;
        }
        for (const auto& d : s.signature.defaults) {
            expr(d.get(), false);
        }
        body(s.body, false);
        body(s.else_body, false);
    }

    void expr(const Expr* e, bool soft) {
        if (e == nullptr) {
            return;
        }
        if (e->kind == ExprKind::kCondExpr) {
            soft = true;
        }
        if (!soft && e->kind == ExprKind::kFilter && !is_filter_name(e->name)) {
            throw TemplateError("No filter named '" + e->name + "'.", e->pos.line, e->pos.column);
        }
        if (!soft && e->kind == ExprKind::kTest && !is_test_name(e->name)) {
            throw TemplateError("No test named '" + e->name + "'.", e->pos.line, e->pos.column);
        }
        for (const auto& item : e->items) {
            expr(item.get(), soft);
        }
        expr(e->a.get(), soft);
        expr(e->b.get(), soft);
        expr(e->c.get(), soft);
        for (const auto& arg : e->args.positional) {
            expr(arg.get(), soft);
        }
        for (const auto& [k, v] : e->args.keyword) {
            expr(v.get(), soft);
        }
        expr(e->args.star_args.get(), soft);
        expr(e->args.star_kwargs.get(), soft);
    }
};

}  // namespace

TemplateAst parse_template(std::string_view source) {
    TemplateAst ast = Parser(tokenize(source)).parse();
    NameValidator().body(ast.body, false);
    annotate_frames(ast);
    return ast;
}

}  // namespace msa::jinja
