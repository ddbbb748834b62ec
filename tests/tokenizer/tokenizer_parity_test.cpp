// Golden parity with Hugging Face tokenizers: for every variant of tests/tokenizer/data/variants.json (the real Qwen3,
// Llama 3 and DeepSeek-V3 tokenizer.json files, edited copies that exercise other pipeline parts, and our tiny
// tokenizer), every selected corpus line must encode to exactly the ids npm `tokenizers` produced, with and without
// add_special_tokens; decoding those ids, and random id sequences, must give the oracle's text; and streaming the ids
// through StreamDecoder must give the same text in valid UTF-8 chunks. Goldens: tools/tokenizer/gen_goldens.mjs.
#include "tokenizer/regex_fast_path.h"
#include "tokenizer_golden_check.h"

namespace msa {
namespace {

class TokenizerParity : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerParity, MatchesHuggingFaceGoldens) { test::check_variant_goldens(GetParam()); }

// The ASCII fast paths must recognise the patterns of the real files (they are matched by exact text).
TEST(RegexFastPath, RecognisesThePatternsOfTheRealTokenizers) {
    const std::vector<std::pair<std::string, std::vector<FastPattern>>> expected = {
        {"qwen3", {FastPattern::kQwen}},
        {"llama3", {FastPattern::kCl100k}},
        {"deepseek_v3", {FastPattern::kDigits3, FastPattern::kNone, FastPattern::kDeepSeek}},
    };
    for (const auto& [name, kinds] : expected) {
        const nlohmann::json variant = test::variant_config(name);
        if (!test::variant_available(variant)) GTEST_SKIP() << "tests/npm/node_modules is missing";
        const nlohmann::json json = test::variant_tokenizer_json(variant);
        std::vector<FastPattern> got;
        for (const auto& pre : json["pre_tokenizer"]["pretokenizers"]) {
            if (pre["type"] == "Split") got.push_back(detect_fast_pattern(pre["pattern"]["Regex"].get<std::string>()));
        }
        EXPECT_EQ(got, kinds) << name;
    }
}

INSTANTIATE_TEST_SUITE_P(Variants, TokenizerParity, ::testing::ValuesIn(test::variant_names()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; });

}  // namespace
}  // namespace msa
