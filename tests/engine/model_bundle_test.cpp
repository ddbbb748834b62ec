// The model-directory bundle: which files are read, generation_config.json defaults, the EOS union, clear errors,
// and the default model directory lookup.
#include "core/error.h"
#include "engine/model_bundle.h"
#include "engine/tiny_model.h"

#include <gtest/gtest.h>

#include <fstream>

#include <unistd.h>

namespace msa {
namespace {

namespace fs = std::filesystem;

void write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

class ModelBundleTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("msa_bundle_test_" + std::to_string(::getpid()));
        testing::write_tiny_model_dir(dir_, {.vocab = 700, .with_tokenizer = true});
    }
    void TearDown() override { fs::remove_all(dir_); }
    fs::path dir_;
};

TEST_F(ModelBundleTest, LoadsTokenizerTemplateDefaultsAndEos) {
    const ModelBundle b = load_model_bundle(dir_);
    EXPECT_EQ(b.name, dir_.filename().string());
    EXPECT_EQ(b.config.vocab_size, 700);
    ASSERT_NE(b.tokenizer, nullptr);
    ASSERT_NE(b.text, nullptr);
    ASSERT_NE(b.chat_template, nullptr);
    // generation_config.json's 656 (<|endoftext|>) first, then tokenizer_config.json's eos_token <|im_end|> (658).
    EXPECT_EQ(b.eos_token_ids, (std::vector<std::int32_t>{656, 658}));
    const SamplingParams p = b.generation.sampling_params();
    EXPECT_FLOAT_EQ(p.temperature, 0.7f);
    EXPECT_EQ(p.top_k, 20);
    EXPECT_FLOAT_EQ(p.top_p, 1.0f);  // not in the file: SamplingParams' default
    EXPECT_FALSE(p.max_tokens.has_value());

    ChatRequest r;
    r.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "Hi"}])");
    EXPECT_EQ(b.chat_template->render(r), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    // The engine's text source gives each token's bytes: their concatenation is the decoded text.
    const auto ids = b.tokenizer->encode("hello world", false);
    std::string bytes;
    for (const auto id : ids) bytes += b.text->token_bytes(id);
    EXPECT_EQ(bytes, "hello world");
    EXPECT_TRUE(b.text->is_special(658));
    EXPECT_FALSE(b.text->is_special(ids[0]));
}

TEST_F(ModelBundleTest, OptionalFilesMayBeMissing) {
    fs::remove(dir_ / "tokenizer.json");
    fs::remove(dir_ / "chat_template.jinja");
    fs::remove(dir_ / "tokenizer_config.json");
    fs::remove(dir_ / "generation_config.json");
    const ModelBundle b = load_model_bundle(dir_);
    EXPECT_EQ(b.tokenizer, nullptr);
    EXPECT_EQ(b.text, nullptr);
    EXPECT_EQ(b.chat_template, nullptr);
    EXPECT_TRUE(b.eos_token_ids.empty());
    EXPECT_FLOAT_EQ(b.generation.sampling_params().temperature, 1.0f);
}

TEST_F(ModelBundleTest, EosFromConfigAndOutOfVocabularyIdsDropped) {
    write_text(dir_ / "generation_config.json", R"({"eos_token_id": 5000, "max_new_tokens": 77})");
    // config.json's eos_token_id joins the list (a VL-style text_config one too).
    std::ifstream in(dir_ / "config.json");
    auto config = nlohmann::json::parse(in);
    in.close();
    config["eos_token_id"] = 3;
    write_text(dir_ / "config.json", config.dump());
    const ModelBundle b = load_model_bundle(dir_);
    EXPECT_EQ(b.eos_token_ids, (std::vector<std::int32_t>{3, 658}));  // 5000 is outside the vocabulary of 700
    EXPECT_EQ(b.generation.sampling_params().max_tokens, 77);
}

TEST_F(ModelBundleTest, BadFilesGiveErrorsNamingThem) {
    write_text(dir_ / "generation_config.json", "{not json");
    try {
        load_model_bundle(dir_);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("generation_config.json"), std::string::npos) << e.what();
    }
    write_text(dir_ / "generation_config.json", R"({"eos_token_id": "x"})");
    EXPECT_THROW(load_model_bundle(dir_), Error);
    write_text(dir_ / "generation_config.json", R"({"temperature": "hot"})");
    EXPECT_THROW(load_model_bundle(dir_), Error);
    write_text(dir_ / "generation_config.json", "{}");
    write_text(dir_ / "tokenizer.json", "{}");
    EXPECT_THROW(load_model_bundle(dir_), Error);
    EXPECT_THROW(load_model_bundle(dir_ / "nothing"), Error);
}

TEST(DefaultModelDirTest, FirstDirectoryWithConfigUnderTheFirstRootThatHasOne) {
    const fs::path root = fs::temp_directory_path() / ("msa_default_model_" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::create_directories(root / "empty" / "models");
    fs::create_directories(root / "one" / "models" / "a_no_config");
    fs::create_directories(root / "one" / "models" / "c_model");
    fs::create_directories(root / "one" / "models" / "b_model");
    write_text(root / "one" / "models" / "c_model" / "config.json", "{}");
    write_text(root / "one" / "models" / "b_model" / "config.json", "{}");
    fs::create_directories(root / "two" / "models" / "a_model");
    write_text(root / "two" / "models" / "a_model" / "config.json", "{}");

    EXPECT_EQ(find_default_model_dir({root / "missing", root / "empty" / "models", root / "one" / "models",
                                      root / "two" / "models"}),
              root / "one" / "models" / "b_model");
    EXPECT_EQ(find_default_model_dir({root / "empty" / "models"}), std::nullopt);
    EXPECT_EQ(resolve_model_dir((root / "two" / "models" / "a_model").string()), root / "two" / "models" / "a_model");
    EXPECT_THROW(resolve_model_dir((root / "one" / "models" / "a_no_config").string()), Error);
    const auto roots = default_model_roots();
    ASSERT_GE(roots.size(), 2u);
    EXPECT_EQ(roots[0], fs::current_path() / "models");
    fs::remove_all(root);
}

}  // namespace
}  // namespace msa
