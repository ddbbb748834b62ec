#include "chat/jinja_symbols.h"

#include <map>
#include <memory>
#include <set>

namespace msa::jinja {

namespace {

enum class Load : std::uint8_t { kParameter, kResolve, kAlias, kUndefined };

// The symbol table of one frame, with jinja2's rules for what a name is bound to when the frame starts.
struct Symbols {
    const Symbols* parent = nullptr;
    std::map<std::string, Load> refs;
    std::set<std::string> stores;

    bool find_ref(const std::string& name) const {
        for (const Symbols* s = this; s != nullptr; s = s->parent) {
            if (s->refs.count(name)) {
                return true;
            }
        }
        return false;
    }
    void store(const std::string& name) {
        stores.insert(name);
        if (!refs.count(name)) {
            refs[name] = (parent != nullptr && parent->find_ref(name)) ? Load::kAlias : Load::kUndefined;
        }
    }
    void parameter(const std::string& name) {
        stores.insert(name);
        refs[name] = Load::kParameter;
    }
    void load(const std::string& name) {
        if (!find_ref(name)) {
            refs[name] = Load::kResolve;
        }
    }
    // Names assigned in only some branches of an if get the value from outside (alias or context).
    void branch_update(const std::vector<Symbols>& branches) {
        std::map<std::string, std::size_t> counts;
        for (const auto& b : branches) {
            for (const auto& target : b.stores) {
                if (!stores.count(target)) {
                    ++counts[target];
                }
            }
        }
        for (const auto& b : branches) {
            for (const auto& [name, load_kind] : b.refs) {
                refs[name] = load_kind;
            }
            stores.insert(b.stores.begin(), b.stores.end());
        }
        for (const auto& [name, count] : counts) {
            if (count == branches.size()) {
                continue;
            }
            refs[name] = (parent != nullptr && parent->find_ref(name)) ? Load::kAlias : Load::kResolve;
        }
    }
    std::vector<std::string> undefined_names() const {
        std::vector<std::string> out;
        for (const auto& [name, load_kind] : refs) {
            if (load_kind == Load::kUndefined) {
                out.push_back(name);
            }
        }
        return out;
    }
};

// jinja2's FrameSymbolVisitor: what one frame's own statements reference (nested frames are not entered).
class FrameVisitor {
public:
    explicit FrameVisitor(Symbols& symbols) : sym_(&symbols) {}

    void body(const Body& b) {
        for (const auto& s : b) {
            stmt(*s);
        }
    }

    void expr(const Expr* e) {
        if (e == nullptr) {
            return;
        }
        if (e->kind == ExprKind::kName) {
            sym_->load(e->name);
        }
        for (const auto& item : e->items) {
            expr(item.get());
        }
        expr(e->a.get());
        expr(e->b.get());
        expr(e->c.get());
        for (const auto& arg : e->args.positional) {
            expr(arg.get());
        }
        for (const auto& [k, v] : e->args.keyword) {
            expr(v.get());
        }
        expr(e->args.star_args.get());
        expr(e->args.star_kwargs.get());
    }

    void store_target(const Target& t) {
        switch (t.kind) {
            case Target::Kind::kName:
                sym_->store(t.name);
                break;
            case Target::Kind::kTuple:
                for (const auto& item : t.items) {
                    store_target(item);
                }
                break;
            case Target::Kind::kNamespaceAttr:
                sym_->load(t.name);
                break;
        }
    }

    void param_target(const Target& t) {
        if (t.kind == Target::Kind::kTuple) {
            for (const auto& item : t.items) {
                param_target(item);
            }
        } else {
            sym_->parameter(t.name);
        }
    }

private:
    // One if/elif chain from branch `i` on, as jinja2 nests elifs: test, then body / elifs / else as branches.
    void if_chain(const Stmt& s, std::size_t i, bool is_elif) {
        expr(s.branches[i].first.get());
        Symbols original = *sym_;
        auto branch = [&](auto&& visit) {
            Symbols copy = original;
            Symbols* saved = sym_;
            sym_ = &copy;
            visit();
            sym_ = saved;
            return copy;
        };
        std::vector<Symbols> branches;
        branches.push_back(branch([&] { body(s.branches[i].second); }));
        if (is_elif) {
            // An elif node of jinja2 has no elifs and no else of its own.
            branches.push_back(branch([] {}));
            branches.push_back(branch([] {}));
        } else {
            branches.push_back(branch([&] {
                for (std::size_t k = i + 1; k < s.branches.size(); ++k) {
                    if_chain(s, k, true);
                }
            }));
            branches.push_back(branch([&] { body(s.else_body); }));
        }
        sym_->branch_update(branches);
    }

    void stmt(const Stmt& s) {
        switch (s.kind) {
            case StmtKind::kPrint:
                expr(s.expr.get());
                break;
            case StmtKind::kIf:
                if_chain(s, 0, false);
                break;
            case StmtKind::kFor:
                expr(s.expr.get());
                break;
            case StmtKind::kSet:
                expr(s.expr.get());
                store_target(s.target);
                break;
            case StmtKind::kSetBlock:
                store_target(s.target);
                break;
            case StmtKind::kMacro:
                sym_->store(s.text);
                break;
            case StmtKind::kCallBlock:
            case StmtKind::kFilterBlock:
                expr(s.expr.get());
                break;
            case StmtKind::kWith:
                for (const auto& v : s.values) {
                    expr(v.get());
                }
                break;
            default:
                break;
        }
    }

    Symbols* sym_;
};

void analyze_children(const Body& body, const Symbols& parent);

// Analyzes the frame made of `statements` (with `params` bound on entry) and records its undefined names.
Symbols analyze_frame(const Symbols* parent, const Body& statements, const std::vector<const Target*>& params,
                      const std::vector<std::string>& plain_params, const std::vector<const Expr*>& exprs) {
    Symbols sym;
    sym.parent = parent;
    FrameVisitor v(sym);
    for (const Target* t : params) {
        v.param_target(*t);
    }
    for (const auto& name : plain_params) {
        sym.parameter(name);
    }
    for (const Expr* e : exprs) {
        v.expr(e);
    }
    v.body(statements);
    return sym;
}

// Finds the frames opened by statements of `body` (a frame whose final symbols are `parent`).
void analyze_children(const Body& body, const Symbols& parent) {
    for (const auto& ptr : body) {
        Stmt& s = *ptr;
        switch (s.kind) {
            case StmtKind::kIf:
                for (const auto& [test, branch] : s.branches) {
                    analyze_children(branch, parent);
                }
                analyze_children(s.else_body, parent);
                break;
            case StmtKind::kFor: {
                const Symbols frame = analyze_frame(&parent, s.body, {&s.target}, {}, {});
                s.frame_undefined = frame.undefined_names();
                analyze_children(s.body, frame);
                const Symbols else_frame = analyze_frame(&parent, s.else_body, {}, {}, {});
                s.else_frame_undefined = else_frame.undefined_names();
                analyze_children(s.else_body, else_frame);
                break;
            }
            case StmtKind::kMacro:
            case StmtKind::kCallBlock: {
                std::vector<std::string> params = s.signature.params;
                for (const char* special : {"varargs", "kwargs", "caller"}) {
                    params.emplace_back(special);
                }
                std::vector<const Expr*> defaults;
                for (const auto& d : s.signature.defaults) {
                    defaults.push_back(d.get());
                }
                const Symbols frame = analyze_frame(&parent, s.body, {}, params, defaults);
                s.frame_undefined = frame.undefined_names();
                analyze_children(s.body, frame);
                break;
            }
            case StmtKind::kWith: {
                std::vector<const Target*> targets;
                for (const auto& t : s.targets) {
                    targets.push_back(&t);
                }
                const Symbols frame = analyze_frame(&parent, s.body, targets, {}, {});
                s.frame_undefined = frame.undefined_names();
                analyze_children(s.body, frame);
                break;
            }
            case StmtKind::kFilterBlock:
            case StmtKind::kSetBlock:
            case StmtKind::kScope: {
                const Symbols frame = analyze_frame(&parent, s.body, {}, {}, {});
                s.frame_undefined = frame.undefined_names();
                analyze_children(s.body, frame);
                break;
            }
            default:
                break;
        }
    }
}

}  // namespace

void annotate_frames(TemplateAst& ast) {
    const Symbols root = analyze_frame(nullptr, ast.body, {}, {}, {});
    ast.frame_undefined = root.undefined_names();
    analyze_children(ast.body, root);
}

}  // namespace msa::jinja
