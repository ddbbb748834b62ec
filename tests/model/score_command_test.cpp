// `msa score`: runs the real binary on a random tiny checkpoint with a small byte-level BPE tokenizer.json. The
// text path must give the ids the tokenizer gives and the same log-probabilities as `--ids` with those ids; both
// must equal log-softmax of the model's own logits computed here, and the perplexity exp(-mean).
#include "model/minimax_m3_model.h"
#include "model/random_checkpoint.h"
#include "support/test_configs.h"
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <sstream>

namespace msa {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Result {
    int status = -1;
    std::string out, err;
};

std::string fmt_ids(const std::vector<std::int32_t>& ids) {
    std::string s;
    for (std::int32_t id : ids) s.append(std::to_string(id)).append(" ");
    return s;
}

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

class ScoreCommand : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new fs::path(fs::temp_directory_path() / ("msa_score_test_" + std::to_string(::getpid())));
        fs::remove_all(*dir_);
        test::TinyConfig cfg;
        cfg.vocab = 700;  // the tokenizer's 656 tokens and its added tokens
        RandomCheckpointSpec spec;
        spec.config_json = test::tiny_config_json(cfg);
        spec.seed = 5;
        write_random_checkpoint(*dir_ / "model", spec);
        fs::create_directories(*dir_ / "model-no-tokenizer");
        for (const auto& e : fs::directory_iterator(*dir_ / "model"))
            fs::copy(e.path(), *dir_ / "model-no-tokenizer" / e.path().filename());
        fs::copy(fs::path(MSA_SOURCE_DIR) / "tests/tokenizer/data/tiny_tokenizer.json", *dir_ / "model/tokenizer.json");
        // Long enough for several blocks, so that MSA's top-3 of 128-token blocks is really sparse.
        std::string text;
        for (int i = 0; text.size() < 3000; ++i)
            text.append("The quick brown fox ").append(std::to_string(i * 37 % 101)).append(" jumps over the lazy dog; ");
        std::ofstream(*dir_ / "text.txt") << text;
    }
    static void TearDownTestSuite() {
        fs::remove_all(*dir_);
        delete dir_;
    }
    static Result run(const std::string& args) {
        const fs::path out = *dir_ / "stdout", err = *dir_ / "stderr";
        std::ostringstream cmd;
        cmd << "'" << MSA_BINARY << "' score " << args << " --threads 1 >'" << out.string() << "' 2>'"
            << err.string() << "'";
        const int raw = std::system(cmd.str().c_str());
        return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
    }
    static fs::path* dir_;
};
fs::path* ScoreCommand::dir_ = nullptr;

TEST_F(ScoreCommand, TextEqualsIdsEqualsTheModel) {
    const fs::path model = *dir_ / "model";
    const Result rt = run("--model '" + model.string() + "' --text '" + (*dir_ / "text.txt").string() +
                          "' --activations exact");
    ASSERT_EQ(rt.status, 0) << rt.err;
    const json jt = json::parse(rt.out);
    EXPECT_EQ(jt["input"], "text");

    // The ids are the tokenizer's (with its template).
    const Tokenizer tok = Tokenizer::from_file((model / "tokenizer.json").string());
    const auto expected_ids = tok.encode(slurp(*dir_ / "text.txt"), true);
    const auto ids = jt["token_ids"].get<std::vector<std::int32_t>>();
    ASSERT_EQ(ids, std::vector<std::int32_t>(expected_ids.begin(), expected_ids.end()));
    ASSERT_GT(ids.size(), 400u);
    EXPECT_EQ(jt["tokens"].get<std::size_t>(), ids.size());
    ASSERT_EQ(jt["token_texts"].size(), ids.size());
    std::string joined;
    for (const auto& t : jt["token_texts"]) joined += t.get<std::string>();
    EXPECT_EQ(joined, tok.decode(expected_ids));

    // --ids with the same ids (from stdin) gives the same numbers.
    std::ofstream(*dir_ / "ids.txt") << fmt_ids(ids);
    const Result ri = run("--model '" + model.string() + "' --ids - --activations exact <'" +
                          (*dir_ / "ids.txt").string() + "'");
    ASSERT_EQ(ri.status, 0) << ri.err;
    const json ji = json::parse(ri.out);
    EXPECT_EQ(ji["input"], "ids");
    EXPECT_EQ(ji["logprobs"], jt["logprobs"]);
    EXPECT_EQ(ji["perplexity"], jt["perplexity"]);

    // Against the model run here: log-softmax of each position's logits at the next token.
    ModelOptions o;
    o.activations = ActivationMode::exact;
    o.num_kv_pages = static_cast<std::int32_t>((ids.size() + 127) / 128);
    auto m = MiniMaxM3Model::load(model.string(), o);
    std::vector<std::int32_t> pages(static_cast<std::size_t>(o.num_kv_pages));
    std::iota(pages.begin(), pages.end(), 0);
    ForwardBatch batch;
    const std::int32_t n = static_cast<std::int32_t>(ids.size()) - 1;
    batch.seqs.push_back({std::span<const std::int32_t>(ids.data(), static_cast<std::size_t>(n)), 0, pages, n});
    ForwardOutput out;
    m->forward(batch, {}, out);
    const auto lps = jt["logprobs"].get<std::vector<double>>();
    ASSERT_EQ(lps.size(), static_cast<std::size_t>(n));
    const int V = m->vocab_size();
    double nll = 0;
    for (int i = 0; i < n; ++i) {
        const float* row = out.logits.data() + static_cast<std::size_t>(i) * V;
        long double mx = row[0], sum = 0;
        for (int v = 1; v < V; ++v) mx = std::max<long double>(mx, row[v]);
        for (int v = 0; v < V; ++v) sum += std::exp(static_cast<long double>(row[v]) - mx);
        const double want = static_cast<double>(row[ids[static_cast<std::size_t>(i) + 1]] - mx - std::log(sum));
        ASSERT_NEAR(lps[static_cast<std::size_t>(i)], want, 1e-5) << "position " << i;
        nll -= lps[static_cast<std::size_t>(i)];
    }
    EXPECT_NEAR(jt["perplexity"].get<double>(), std::exp(nll / n), 1e-9 * std::exp(nll / n));
    EXPECT_EQ(jt["scored_tokens"].get<int>(), n);
}

TEST_F(ScoreCommand, ClearErrors) {
    const std::string text = (*dir_ / "text.txt").string();
    Result r = run("--model '" + (*dir_ / "model-no-tokenizer").string() + "' --text '" + text + "'");
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(r.out.empty());
    EXPECT_NE(r.err.find("tokenizer.json' does not exist"), std::string::npos) << r.err;
    r = run("--model '" + (*dir_ / "model").string() + "' --text '" + text + "' --ids '" + text + "'");
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("either --text or --ids"), std::string::npos) << r.err;
    r = run("--model '" + (*dir_ / "model").string() + "' --ids '" + text + "'");  // text is not ids
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("is not a token id"), std::string::npos) << r.err;
    std::ofstream(*dir_ / "big.txt") << "1 2 5000";
    r = run("--model '" + (*dir_ / "model").string() + "' --ids '" + (*dir_ / "big.txt").string() + "'");
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("5000"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace msa
