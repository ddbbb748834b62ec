// `msa generate` and `msa chat` run as binaries on a generated model directory (random weights, the tiny test
// tokenizer, a ChatML template). Expected outputs come from the model's own greedy loop and the tokenizer's
// decode, computed here without the engine.
#include "engine/model_bundle.h"
#include "engine/tiny_model.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

namespace msa {
namespace {

namespace fs = std::filesystem;

constexpr int kNew = 12;

struct RunResult {
    int status = -1;
    std::string out, err;
};

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

class CliTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        root_ = new fs::path(fs::temp_directory_path() / ("msa_cli_test_" + std::to_string(::getpid())));
        fs::remove_all(*root_);
        fs::create_directories(*root_ / "cwd" / "models");
        testing::write_tiny_model_dir(model_dir(), {.vocab = 700, .with_tokenizer = true});
        bundle_ = new ModelBundle(load_model_bundle(model_dir()));
        ModelOptions o;
        o.num_kv_pages = 4;
        model_ = MiniMaxM3Model::load(model_dir().string(), o).release();
    }
    static void TearDownTestSuite() {
        delete model_;
        delete bundle_;
        fs::remove_all(*root_);
        delete root_;
    }
    static fs::path model_dir() { return *root_ / "cwd" / "models" / "tiny"; }

    // Runs `msa ARGS` in `cwd` with `input` on stdin.
    static RunResult run(const std::string& args, const std::string& input, const fs::path& cwd = {}) {
        const fs::path in = *root_ / "stdin", out = *root_ / "stdout", err = *root_ / "stderr";
        std::ofstream(in, std::ios::binary) << input;
        const std::string command =
            fmt::format("cd '{}' && '{}' {} <'{}' >'{}' 2>'{}'", (cwd.empty() ? *root_ : cwd).string(), MSA_BINARY,
                        args, in.string(), out.string(), err.string());
        const int raw = std::system(command.c_str());
        RunResult r;
        r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
        r.out = read_file(out);
        r.err = read_file(err);
        return r;
    }

    // The greedy continuation's text (special tokens skipped, as the engine streams it).
    static std::string greedy_text(const std::vector<std::int32_t>& prompt, int n) {
        return bundle_->tokenizer->decode(testing::direct_greedy(*model_, prompt, n), /*skip_special_tokens=*/true);
    }
    static std::vector<std::int32_t> chat_prompt(const nlohmann::ordered_json& messages) {
        ChatRequest r;
        r.messages = messages;
        return bundle_->tokenizer->encode(bundle_->chat_template->render(r), false);
    }

    static fs::path* root_;
    static ModelBundle* bundle_;
    static MiniMaxM3Model* model_;
};
fs::path* CliTest::root_ = nullptr;
ModelBundle* CliTest::bundle_ = nullptr;
MiniMaxM3Model* CliTest::model_ = nullptr;

const std::string kGreedy = fmt::format("--temperature 0 --ignore-eos --max-tokens {}", kNew);

TEST_F(CliTest, GenerateStreamsTheGreedyContinuationAsText) {
    const std::string prompt = "The quick brown fox";
    const std::string expected = greedy_text(bundle_->tokenizer->encode(prompt, true), kNew) + "\n";
    const RunResult r = run(fmt::format("generate --model '{}' --prompt '{}' {}", model_dir().string(), prompt,
                                        fmt::format("--temperature 0 --ignore-eos --max-tokens {}", kNew)),
                            "");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, expected);
    EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(fmt::format("{} generated", kNew)), std::string::npos) << r.err;

    // The prompt from stdin, and the default model directory (./models/<first with config.json>).
    const RunResult piped = run(fmt::format("generate --temperature 0 --ignore-eos --max-tokens {}", kNew), prompt,
                                *root_ / "cwd");
    ASSERT_EQ(piped.status, 0) << piped.err;
    EXPECT_EQ(piped.out, expected);
}

TEST_F(CliTest, GenerateWithIdsAndChatTemplate) {
    const std::vector<std::int32_t> ids{5, 17, 300, 2, 650};
    const auto expected = testing::direct_greedy(*model_, ids, kNew);
    const RunResult r = run(fmt::format("generate --model '{}' --ids --temperature 0 --ignore-eos --max-tokens {}",
                                        model_dir().string(), kNew),
                            "5 17 300\n2, 650\n");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, fmt::format("{}\n", fmt::join(expected, " ")));
    const RunResult r2 = run(fmt::format("generate --model '{}' --prompt-ids '5 17 300 2 650' --temperature 0 "
                                         "--ignore-eos --max-tokens {}",
                                         model_dir().string(), kNew),
                             "");
    EXPECT_EQ(r2.out, r.out);

    const RunResult chat = run(fmt::format("generate --model '{}' --chat --prompt 'Hello there' {}",
                                           model_dir().string(), kGreedy),
                               "");
    ASSERT_EQ(chat.status, 0) << chat.err;
    EXPECT_EQ(chat.out,
              greedy_text(chat_prompt(nlohmann::ordered_json::parse(
                              R"([{"role": "user", "content": "Hello there"}])")),
                          kNew) +
                  "\n");
}

TEST_F(CliTest, GenerateSeededSamplingIsReproducible) {
    const std::string args = fmt::format("generate --model '{}' --prompt 'Once upon' --temperature 1.0 --top-k 50 "
                                         "--ignore-eos --max-tokens {} --ids",
                                         model_dir().string(), 24);
    // --ids with a text prompt is an error (the prompt must then be ids).
    EXPECT_EQ(run(args + " --seed 7", "").status, 1);
    const std::string text_args = fmt::format("generate --model '{}' --prompt 'Once upon' --temperature 1.0 "
                                              "--top-k 50 --ignore-eos --max-tokens 24",
                                              model_dir().string());
    const RunResult a = run(text_args + " --seed 7", ""), b = run(text_args + " --seed 7", ""),
                    c = run(text_args + " --seed 8", "");
    ASSERT_EQ(a.status, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_NE(a.out, c.out);
    EXPECT_NE(a.out, greedy_text(bundle_->tokenizer->encode("Once upon", true), 24) + "\n");
}

TEST_F(CliTest, GenerateErrorsAreOneLine) {
    const RunResult r = run(fmt::format("generate --model '{}' --prompt hi --temperature -1", model_dir().string()),
                            "");
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("temperature"), std::string::npos) << r.err;
    const RunResult missing = run("generate --model /nonexistent --prompt hi", "");
    EXPECT_EQ(missing.status, 1);
    EXPECT_NE(missing.err.find("config.json"), std::string::npos) << missing.err;
    const RunResult too_long = run(
        fmt::format("generate --model '{}' --kv-pages 1 --prompt hi --max-tokens 500", model_dir().string()), "");
    EXPECT_EQ(too_long.status, 1);
    EXPECT_NE(too_long.err.find("maximum context length is 128 tokens"), std::string::npos) << too_long.err;
}

// Speculative decoding with the shipped default model's DSpark drafter: greedy output identical to plain decoding
// (lossless), the acceptance figures on stderr, and clear one-line errors for bad speculative flags.
TEST_F(CliTest, SpeculativeDecodingWithTheDefaultDrafterIsLossless) {
    const std::string model = (fs::path(MSA_SOURCE_DIR) / "models" / "default").string();
    const std::string args = fmt::format("generate --model '{}' --prompt 'And it came to pass' --threads 1 "
                                         "--temperature 0 --ignore-eos --max-tokens 60",
                                         model);
    const RunResult plain = run(args, "");
    ASSERT_EQ(plain.status, 0) << plain.err;
    for (const std::string spec : {"--num-speculative-tokens 7", "--num-speculative-tokens 2",
                                   R"(--speculative-config '{"method": "dspark", "num_speculative_tokens": 4}')"}) {
        const RunResult r = run(args + " " + spec, "");
        ASSERT_EQ(r.status, 0) << spec << ": " << r.err;
        EXPECT_EQ(r.out, plain.out) << spec;
        EXPECT_NE(r.err.find("acceptance length"), std::string::npos) << r.err;
    }
    EXPECT_EQ(plain.err.find("acceptance length"), std::string::npos) << plain.err;

    const std::vector<std::pair<std::string, std::string>> bad = {
        {"--num-speculative-tokens 8", "drafts 7 per block"},
        {R"(--speculative-config '{"method": "eagle"}')", "method must be \"dspark\""},
        {R"(--speculative-config '{"method": "dspark", "k": 3}')", "unknown key 'k'"},
        {R"(--speculative-config '[1]')", "must be a JSON object"},
        {R"(--speculative-config '{"num_speculative_tokens": 3}')", "needs \"method\""},
        {R"(--speculative-config '{"method": "dspark", "model": "/nonexistent"}')", "no drafter directory"},
    };
    for (const auto& [flags, message] : bad) {
        const RunResult r = run(args + " " + flags, "");
        EXPECT_EQ(r.status, 1) << flags;
        EXPECT_NE(r.err.find(message), std::string::npos) << flags << ": " << r.err;
    }
    // The tiny test model has no drafter/.
    const RunResult none = run(fmt::format("generate --model '{}' --prompt hi --num-speculative-tokens 3",
                                           model_dir().string()),
                               "");
    EXPECT_EQ(none.status, 1);
    EXPECT_NE(none.err.find("no drafter directory"), std::string::npos) << none.err;
}

// A conversation through stdin: the history is rendered with the template each turn, /reset forgets it.
TEST_F(CliTest, ChatStreamsRepliesWithHistoryAndReset) {
    const RunResult r = run(fmt::format("chat --model '{}' -q {}", model_dir().string(), kGreedy),
                            "Hi\n/reset\nHi\nTell me more\n/exit\nnever read\n");
    ASSERT_EQ(r.status, 0) << r.err;
    using J = nlohmann::ordered_json;
    const std::string first = greedy_text(chat_prompt(J::parse(R"([{"role": "user", "content": "Hi"}])")), kNew);
    J history = J::parse(R"([{"role": "user", "content": "Hi"}])");
    history.push_back({{"role", "assistant"}, {"content", first}});
    history.push_back({{"role", "user"}, {"content", "Tell me more"}});
    const std::string third = greedy_text(chat_prompt(history), kNew);
    EXPECT_EQ(r.out, first + "\n" + first + "\n" + third + "\n");
    EXPECT_EQ(r.err, "");  // -q: no figures; not a terminal: no prompts
}

TEST_F(CliTest, ChatKeepsGoingAfterARefusedTurn) {
    // A 128-token context: the second, long turn overflows and is dropped; the third still works on the history.
    std::string long_turn;
    for (int i = 0; i < 200; ++i) long_turn += "q7 ";
    const RunResult r = run(fmt::format("chat --model '{}' --kv-pages 1 -q {}", model_dir().string(), kGreedy),
                            "Hi\n" + long_turn + "\nOk\n");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("maximum context length"), std::string::npos) << r.err;
    using J = nlohmann::ordered_json;
    const std::string first = greedy_text(chat_prompt(J::parse(R"([{"role": "user", "content": "Hi"}])")), kNew);
    J history = J::parse(R"([{"role": "user", "content": "Hi"}])");
    history.push_back({{"role", "assistant"}, {"content", first}});
    history.push_back({{"role", "user"}, {"content", "Ok"}});
    EXPECT_EQ(r.out, first + "\n" + greedy_text(chat_prompt(history), kNew) + "\n");
}

}  // namespace
}  // namespace msa
