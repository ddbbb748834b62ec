// Python str semantics over UTF-8: exact float/int repr, str repr quoting, whitespace, split/strip/splitlines,
// int()/float() parsing. Expected strings are CPython 3.11's; properties check round trips on random input.
#include "chat/py_text.h"
#include "core/error.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace msa::pytext {
namespace {

TEST(PyText, FloatReprMatchesPython) {
    const std::pair<double, const char*> cases[] = {
        {0.1, "0.1"},
        {1e22, "1e+22"},
        {1.5e-10, "1.5e-10"},
        {123456789.0, "123456789.0"},
        {1e16, "1e+16"},
        {1e15, "1000000000000000.0"},
        {9007199254740993.0, "9007199254740992.0"},
        {5e-324, "5e-324"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {0.5, "0.5"},
        {100.0, "100.0"},
        {12345678901234567.0, "1.2345678901234568e+16"},
        {-2.5e-5, "-2.5e-05"},
        {1e-4, "0.0001"},
        {0.001234, "0.001234"},
        {0.0, "0.0"},
        {-0.0, "-0.0"},
        {std::numeric_limits<double>::infinity(), "inf"},
        {-std::numeric_limits<double>::infinity(), "-inf"},
        {std::numeric_limits<double>::quiet_NaN(), "nan"},
    };
    for (const auto& [value, text] : cases) {
        EXPECT_EQ(float_repr(value), text);
    }
}

RC_GTEST_PROP(PyText, FloatReprRoundTrips, (double value)) {
    RC_PRE(std::isfinite(value));
    const std::string text = float_repr(value);
    const auto parsed = parse_float(text);
    RC_ASSERT(parsed.has_value());
    RC_ASSERT(std::memcmp(&*parsed, &value, sizeof(double)) == 0);  // same bits, -0.0 included
    RC_ASSERT(text.find_first_of(".en") != std::string::npos);      // always looks like a float
}

TEST(PyText, ReprQuotesAndEscapesLikePython) {
    EXPECT_EQ(repr("abc"), "'abc'");
    EXPECT_EQ(repr("it's"), "\"it's\"");
    EXPECT_EQ(repr("it's \"x\""), "'it\\'s \"x\"'");
    EXPECT_EQ(repr("a\\b\n\t\r"), "'a\\\\b\\n\\t\\r'");
    EXPECT_EQ(repr("a\xC2\x85" "b\xC2\xAD" "c\xF0\x9F\x98\x80\xE3\x80\x80" "d\x7F"),
              "'a\\x85b\\xadc\xF0\x9F\x98\x80\\u3000d\\x7f'");
    EXPECT_EQ(repr("caf\xC3\xA9"), "'caf\xC3\xA9'");
}

TEST(PyText, IntAndFloatParsingFollowsPython) {
    EXPECT_EQ(parse_int("  -0x_1f ", 0), -31);
    EXPECT_EQ(parse_int("1_000", 10), 1000);
    EXPECT_EQ(parse_int("ff", 16), 255);
    EXPECT_EQ(parse_int("0x1f", 16), 31);
    EXPECT_FALSE(parse_int("010", 0).has_value());
    EXPECT_FALSE(parse_int("1__0", 10).has_value());
    EXPECT_FALSE(parse_int("_1", 10).has_value());
    EXPECT_FALSE(parse_int("1.5", 10).has_value());
    EXPECT_FALSE(parse_int("99999999999999999999", 10).has_value());
    EXPECT_EQ(parse_int("-9223372036854775808", 10), std::numeric_limits<std::int64_t>::min());
    EXPECT_EQ(parse_float(" 1_0.5e1_0 "), 105000000000.0);
    EXPECT_EQ(parse_float("-inf"), -std::numeric_limits<double>::infinity());
    EXPECT_EQ(parse_float(".5"), 0.5);
    EXPECT_EQ(parse_float("5."), 5.0);
    EXPECT_TRUE(std::isnan(*parse_float("NaN")));
    EXPECT_EQ(parse_float("1e999"), std::numeric_limits<double>::infinity());
    EXPECT_FALSE(parse_float("0x10").has_value());
    EXPECT_FALSE(parse_float("1e").has_value());
    EXPECT_FALSE(parse_float("").has_value());
}

TEST(PyText, SplitStripSplitlines) {
    using V = std::vector<std::string>;
    EXPECT_EQ(split("a b  c", std::string(" "), -1), (V{"a", "b", "", "c"}));
    EXPECT_EQ(rsplit("  x y ", std::nullopt, 1), (V{"  x", "y"}));
    EXPECT_EQ(split("  x y ", std::nullopt, -1), (V{"x", "y"}));
    EXPECT_EQ(split("", std::nullopt, -1), V{});
    EXPECT_EQ(split("", std::string(","), -1), V{""});
    EXPECT_EQ(splitlines("a\x1c" "b\xE2\x80\xA9" "c\r\n", false), (V{"a", "b", "c"}));
    EXPECT_EQ(splitlines("a\r\nb", true), (V{"a\r\n", "b"}));
    EXPECT_EQ(strip("\xE3\x80\x80 x \xC2\xA0", std::nullopt, StripSide::kBoth), "x");
    EXPECT_EQ(strip("xxhixx", std::string("x"), StripSide::kLeft), "hixx");
    EXPECT_THROW(split("a", std::string(""), -1), Error);
}

TEST(PyText, CaseMapping) {
    EXPECT_EQ(title("hello wORLD-x 1a"), "Hello World-X 1A");
    EXPECT_EQ(capitalize("\xC7\x86" "x"), "\xC7\x85" "x");  // dz digraph: title case first
    EXPECT_EQ(upper("stra\xC3\x9F" "e \xC3\xA9 \xEF\xAC\x81"), "STRASSE \xC3\x89 FI");  // full mappings
    EXPECT_EQ(title("\xC3\x9F" "x"), "Ssx");
    EXPECT_EQ(lower("\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3 \xCE\xA3"), "\xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82 \xCF\x83");
    EXPECT_TRUE(str_islower("abc1"));
    EXPECT_FALSE(str_islower("123"));
    EXPECT_TRUE(str_istitle("Hello World"));
}

RC_GTEST_PROP(PyText, SplitThenJoinGivesBackTheString, (const std::string& raw)) {
    // Build valid UTF-8 from the random bytes; split on a separator and join again.
    std::string s;
    for (char c : raw) {
        append_utf8(s, static_cast<unsigned char>(c) % 3 == 0 ? U',' : static_cast<char32_t>(0x60 + (c & 0x1F)));
    }
    const auto parts = split(s, std::string(","), -1);
    std::string joined;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        joined += (i ? "," : "") + parts[i];
    }
    RC_ASSERT(joined == s);
    RC_ASSERT(rsplit(s, std::string(","), -1) == parts);
}

RC_GTEST_PROP(PyText, StripRemovesExactlyTheOuterWhitespace, (const std::vector<bool>& pattern)) {
    std::string s;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        append_utf8(s, pattern[i] ? (i % 2 ? U'\u3000' : U' ') : U'a' + static_cast<char32_t>(i % 26));
    }
    const std::string stripped = strip(s, std::nullopt, StripSide::kBoth);
    RC_ASSERT(strip(stripped, std::nullopt, StripSide::kBoth) == stripped);
    RC_ASSERT(s.find(stripped) != std::string::npos);
    if (!stripped.empty()) {
        const std::u32string cps = decode(stripped);
        RC_ASSERT(!is_space(cps.front()));
        RC_ASSERT(!is_space(cps.back()));
    }
    RC_ASSERT(length(s) == decode(s).size());
}

}  // namespace
}  // namespace msa::pytext
