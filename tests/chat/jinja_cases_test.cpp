// Every case of tests/chat/data/jinja_cases.json: a construct of the template language with the output jinja2
// documents for it. tools/chat/check_jinja_cases.py (also run by gen_template_goldens.py) checks each expected
// string against Python's jinja2, so these are jinja2's answers.
#include "chat/jinja_template.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <map>

namespace msa::jinja {
namespace {

struct CaseResult {
    bool ok = false;
    std::string text;
};

CaseResult run_case(const nlohmann::ordered_json& c) {
    CaseResult r;
    try {
        RenderOptions options;
        options.now_unix_seconds = test::kNowUnix;
        const Template t(c.at("template").get<std::string>(), c.at("name").get<std::string>());
        const Value context = from_json(c.value("context", nlohmann::ordered_json::object()));
        r.text = t.render(context.as_dict(), options);
        r.ok = true;
    } catch (const Error& e) {
        r.text = e.what();
    }
    return r;
}

TEST(JinjaCases, EveryCaseMatchesJinja2) {
    test::use_utc();
    const auto cases = test::read_json(test::chat_data_dir() / "jinja_cases.json");
    ASSERT_GT(cases.size(), 200u);
    std::map<std::string, int> per_group;
    for (const auto& c : cases) {
        const std::string name = c.at("name").get<std::string>();
        SCOPED_TRACE(name + ": " + c.at("template").get<std::string>());
        const CaseResult r = run_case(c);
        if (c.value("error", false)) {
            EXPECT_FALSE(r.ok) << "expected an error, rendered: " << r.text;
        } else {
            EXPECT_TRUE(r.ok) << r.text;
            EXPECT_EQ(r.text, c.at("expected").get<std::string>());
        }
        ++per_group[name.substr(0, name.find('.'))];
    }
    // Every part of the language is covered.
    for (const char* group : {"ws", "lit", "op", "access", "test", "filter", "str", "dict", "list", "stmt", "global",
                              "undef", "syntax"}) {
        EXPECT_GT(per_group[group], 0) << group;
    }
}

}  // namespace
}  // namespace msa::jinja
