// Golden parity with Hugging Face tokenizers: for every variant of tests/tokenizer/data/variants.json (the real Qwen3,
// Llama 3 and DeepSeek-V3 tokenizer.json files, edited copies that exercise other pipeline parts, and our tiny
// tokenizer), every selected corpus line must encode to exactly the ids npm `tokenizers` produced, with and without
// add_special_tokens; decoding those ids, and random id sequences, must give the oracle's text; and streaming the ids
// through StreamDecoder must give the same text in valid UTF-8 chunks. Goldens: tools/tokenizer/gen_goldens.mjs.
#include "tokenizer_golden_check.h"

namespace msa {
namespace {

class TokenizerParity : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerParity, MatchesHuggingFaceGoldens) { test::check_variant_goldens(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Variants, TokenizerParity, ::testing::ValuesIn(test::variant_names()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; });

}  // namespace
}  // namespace msa
