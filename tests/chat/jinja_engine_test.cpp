// Engine behaviour that the jinja2 case table cannot express: error positions and types, the limits that keep any
// template from hanging or crashing the server, reference cycles, concurrency and JSON conversion.
#include "chat/jinja_error.h"
#include "chat/jinja_template.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <thread>

namespace msa::jinja {
namespace {

std::string render(const std::string& source, const nlohmann::ordered_json& context = nlohmann::ordered_json::object(),
                   const RenderOptions& options = {}) {
    const Template t(source, "test");
    const Value ctx = from_json(context.is_null() ? nlohmann::ordered_json::object() : context);
    return t.render(ctx.as_dict(), options);
}

TemplateError render_error(const std::string& source,
                           const nlohmann::ordered_json& context = nlohmann::ordered_json::object(),
                           const RenderOptions& options = {}) {
    try {
        render(source, context, options);
    } catch (const TemplateError& e) {
        return e;
    }
    ADD_FAILURE() << "no error for: " << source;
    return TemplateError("", 0, 0);
}

TEST(JinjaErrors, SyntaxErrorsNameTemplateLineAndColumn) {
    const TemplateError e = render_error("line one\n  {{ 1 + }}");
    EXPECT_EQ(e.line(), 2);
    EXPECT_GT(e.column(), 0);
    EXPECT_NE(std::string(e.what()).find("template 'test', line 2, column"), std::string::npos) << e.what();
    EXPECT_FALSE(e.raised_by_template());
}

TEST(JinjaErrors, UnclosedBlockSaysWhatIsMissing) {
    const TemplateError e = render_error("{% for x in y %}\n{% if x %}\n{% endfor %}");
    EXPECT_NE(std::string(e.what()).find("endif"), std::string::npos) << e.what();
}

TEST(JinjaErrors, RuntimeErrorsPointAtTheFailingExpression) {
    const TemplateError e = render_error("{% for m in ms %}\n  {{ m.a.b }}\n{% endfor %}", {{"ms", {{{"x", 1}}}}});
    EXPECT_EQ(e.line(), 2);
    EXPECT_NE(std::string(e.what()).find("'dict object' has no attribute 'a'"), std::string::npos) << e.what();
}

TEST(JinjaErrors, RaiseExceptionKeepsTheTemplatesMessage) {
    const TemplateError e = render_error("{% if true %}{{ raise_exception('Conversation roles must alternate') }}{% endif %}");
    EXPECT_TRUE(e.raised_by_template());
    EXPECT_NE(std::string(e.what()).find("Conversation roles must alternate"), std::string::npos);
}

TEST(JinjaErrors, UndefinedVariableMessage) {
    const TemplateError e = render_error("{{ missing + 1 }}");
    EXPECT_NE(std::string(e.what()).find("'missing' is undefined"), std::string::npos) << e.what();
}

TEST(JinjaErrors, IntegerOverflowIsAnErrorNotAWrongNumber) {
    EXPECT_NE(std::string(render_error("{{ 9223372036854775807 + 1 }}").what()).find("overflow"), std::string::npos);
    EXPECT_NE(std::string(render_error("{{ 2 ** 64 }}").what()).find("overflow"), std::string::npos);
    EXPECT_EQ(render("{{ 2 ** 62 }}"), "4611686018427387904");
}

TEST(JinjaErrors, InvalidUtf8SourceIsRejected) {
    EXPECT_THROW(Template(std::string("{{ 'a\xff' }}"), "bad"), TemplateError);
}

TEST(JinjaLimits, InfiniteMacroRecursionStops) {
    const TemplateError e = render_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}");
    EXPECT_NE(std::string(e.what()).find("recursion"), std::string::npos) << e.what();
}

TEST(JinjaLimits, StepBudgetStopsLongLoops) {
    RenderOptions options;
    options.max_steps = 100000;
    const TemplateError e =
        render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", {}, options);
    EXPECT_NE(std::string(e.what()).find("steps"), std::string::npos) << e.what();
}

TEST(JinjaLimits, StepBudgetCountsTheItemsAndBytesThatOperationsCopy) {
    // Rebuilding a growing list or string in a loop costs quadratic time in few steps; the copies are charged.
    RenderOptions options;
    options.max_steps = 200000;
    EXPECT_NE(std::string(render_error("{% set ns = namespace(a=[]) %}{% for i in range(20000) %}"
                                       "{% set ns.a = ns.a + [i] %}{% endfor %}{{ ns.a|length }}",
                                       {}, options)
                              .what())
                  .find("steps"),
              std::string::npos);
    options.max_steps = 500000;
    for (const char* op : {"~", "+"}) {
        const std::string source = std::string("{% set ns = namespace(s='') %}{% for i in range(5000) %}{% set ns.s = ns.s ") +
                                   op + " ('x' * 100) %}{% endfor %}{{ ns.s|length }}";
        EXPECT_NE(std::string(render_error(source, {}, options).what()).find("steps"), std::string::npos) << op;
    }
    EXPECT_THROW(render("{% for i in range(100) %}{% set l = [0] * 10000 %}{% endfor %}", {}, options), TemplateError);
    // The same work on small values stays well inside the budget.
    EXPECT_EQ(render("{% set ns = namespace(a=[], s='') %}{% for i in range(100) %}{% set ns.a = ns.a + [i] %}"
                     "{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.a|length }} {{ ns.s|length }}",
                     {}, options),
              "100 190");
}

TEST(JinjaErrors, ColumnsCountCodePointsOnLongLines) {
    // Columns are code points from the line start, also after many tags on one line (counted incrementally).
    for (const int n : {1, 7, 3000}) {
        std::string ascii;
        std::string accented;
        for (int i = 0; i < n; ++i) {
            ascii += "{{ 'a' }}";
            accented += "{{ '\xc3\xa9' }}";  // one code point, two bytes
        }
        const TemplateError a = render_error(ascii + "x\n {{ 1 + }}");
        const TemplateError b = render_error(accented + "x\n {{ 1 + }}");
        EXPECT_EQ(a.line(), 2);
        EXPECT_EQ(b.line(), 2);
        EXPECT_EQ(a.column(), b.column());
        const TemplateError c = render_error(ascii + " {{ 1 + }}");
        const TemplateError d = render_error(accented + " {{ 1 + }}");
        EXPECT_EQ(c.line(), 1);
        EXPECT_EQ(c.column(), d.column()) << n;
        EXPECT_GT(c.column(), 9 * n);
    }
}

TEST(JinjaLimits, OutputAndStringSizesAreBounded) {
    RenderOptions options;
    options.max_output_bytes = 1 << 20;
    EXPECT_NE(std::string(render_error("{% for i in range(10000) %}{{ 'x' * 1000 }}{% endfor %}", {}, options).what())
                  .find("limit"),
              std::string::npos);
    EXPECT_THROW(render("{{ 'x' * 1000000000000 }}", {}, options), TemplateError);
    EXPECT_THROW(render("{% set s = 'x' * 1000000 %}{{ ([s] * 10000)|join }}", {}, options), TemplateError);
    EXPECT_THROW(render("{% set s = 'x' * 1000000 %}{{ ([s] * 10000)|tojson }}", {}, options), TemplateError);
    EXPECT_THROW(render("{{ 'x'|center(100000000) }}", {}, options), TemplateError);
    EXPECT_THROW(render("{{ range(1000000)|length }}", {}, options), TemplateError);  // the sandbox's MAX_RANGE
}

TEST(JinjaLimits, DeepNestingIsAnErrorNotAStackOverflow) {
    EXPECT_THROW(render(std::string("{{ ") + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"),
                 TemplateError);
    std::string ifs;
    for (int i = 0; i < 2000; ++i) {
        ifs += "{% if true %}";
    }
    EXPECT_THROW(render(ifs), TemplateError);
    EXPECT_THROW(render("{{ " + std::string(5000, '-') + "1 }}"), TemplateError);
    EXPECT_THROW(render("{{ " + std::string(3000, '[') + std::string(3000, ']') + " }}"), TemplateError);
    // Chains are parsed in loops, not by recursion; a long one is an error too (the tree would be too deep).
    const auto repeated = [](const std::string& part, int n) {
        std::string out;
        for (int i = 0; i < n; ++i) {
            out += part;
        }
        return out;
    };
    for (const char* link : {".b", "[0]", "()", "+1", "*1", "**1", "|string", " is defined", " or x", " and x"}) {
        EXPECT_THROW(render(std::string("{{ x") + repeated(link, 100000) + " }}", {{"x", 1}}), TemplateError) << link;
    }
    EXPECT_THROW(render("{{ 1 if x" + repeated(" else 1 if x", 3000) + " }}"), TemplateError);
    EXPECT_THROW(render("{% filter upper" + repeated("|lower", 100000) + " %}x{% endfilter %}"), TemplateError);
    // Nesting deeper than Python's repr/json allow, built at run time.
    EXPECT_THROW(render("{% set ns = namespace(v=[]) %}{% for i in range(2000) %}{% set ns.v = [ns.v] %}{% endfor %}"
                        "{{ ns.v|tojson }}"),
                 TemplateError);
}

TEST(JinjaLimits, ReasonableNestingWorks) {
    EXPECT_EQ(render(std::string("{{ ") + std::string(30, '(') + "1" + std::string(30, ')') + " }}"), "1");
    std::string ifs;
    std::string ends;
    for (int i = 0; i < 40; ++i) {
        ifs += "{% if true %}";
        ends += "{% endif %}";
    }
    EXPECT_EQ(render(ifs + "deep" + ends), "deep");
    std::string sum = "{{ 0";
    for (int i = 0; i < 500; ++i) {
        sum += " + 1";
    }
    EXPECT_EQ(render(sum + " }}"), "500");
    EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% else %}bottom{% endif %}{% endmacro %}{{ f(100) }}"),
              "bottom");
}

TEST(JinjaMemory, SelfReferencesDoNotLeakOrRecurseForever) {
    // A namespace that contains itself (repr would recurse forever in a naive engine) and a macro stored in a
    // namespace (a reference cycle through the macro's closure). Run under ASan/LSan to check for leaks.
    EXPECT_THROW(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), TemplateError);
    EXPECT_EQ(render("{% macro m() %}x{% endmacro %}{% set ns = namespace(f=m) %}{% set ns.g = ns %}{{ ns.f() }}"), "x");
    EXPECT_EQ(render("{% for i in [1, 2] recursive %}{% set ns = namespace(l=loop) %}{{ i }}{% endfor %}"), "12");
}

TEST(JinjaTemplate, RendersConcurrently) {
    const Template t("{% for m in messages %}{{ m.role }}:{{ m.content|upper }};{% endfor %}", "concurrent");
    const Value ctx = from_json(nlohmann::ordered_json::parse(
        R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})"));
    std::vector<std::thread> threads;
    std::vector<std::string> results(4);
    for (int i = 0; i < 4; ++i) {
        threads.emplace_back([&, i] {
            for (int k = 0; k < 200; ++k) {
                results[static_cast<std::size_t>(i)] = t.render(ctx.as_dict());
            }
        });
    }
    for (auto& th : threads) {
        th.join();
    }
    for (const auto& r : results) {
        EXPECT_EQ(r, "user:HI;assistant:YO;");
    }
}

TEST(JinjaValue, JsonConversionKeepsKeyOrderAndNumberKinds) {
    const auto j = nlohmann::ordered_json::parse(R"({"z": 1, "a": 1.0, "m": [true, null, "s", 18446744073709551615]})");
    EXPECT_EQ(render("{{ d|tojson }}", {{"d", j}}), R"({"z": 1, "a": 1.0, "m": [true, null, "s", 1.8446744073709552e+19]})");
    EXPECT_EQ(render("{% for k in d %}{{ k }}{% endfor %}", {{"d", j}}), "zam");
    // nlohmann::json (not ordered) sorts keys: the conversion works, with its order.
    const Value sorted = from_json(nlohmann::json::parse(R"({"z": 1, "a": 2})"));
    EXPECT_EQ(to_repr(sorted), "{'a': 2, 'z': 1}");
}

TEST(JinjaValue, StrftimeNowUsesTheGivenTime) {
    test::use_utc();
    RenderOptions options;
    options.now_unix_seconds = test::kNowUnix;
    EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %H:%M:%S %A') }}", {}, options), "2025-03-14 15:09:26 Friday");
    EXPECT_FALSE(render("{{ strftime_now('%Y') }}").empty());  // current time without the option
}

}  // namespace
}  // namespace msa::jinja
