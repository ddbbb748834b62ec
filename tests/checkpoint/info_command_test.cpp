// `msa info`: runs the real binary on model directories (the real M3 config, M3.1's all-sparse layout, a config
// with a weight index but no shards, small generated checkpoints) and checks its figures; corrupt inputs must give
// exactly one error line on stderr and exit status 1, never a crash.
#include "test_checkpoint.h"
#include "test_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>

namespace msa {
namespace {

using nlohmann::json;
using test::TempDir;
using ::testing::HasSubstr;

const std::string kExampleDir = std::string(MSA_SOURCE_DIR) + "/examples/minimax-m3";

struct RunResult {
    int status = -1;  // exit status; -1 when killed by a signal
    std::string out;
    std::string err;
};

RunResult run_info(const std::string& args) {
    TempDir scratch;
    const std::string out = scratch.file("stdout");
    const std::string err = scratch.file("stderr");
    const std::string command = fmt::format("'{}' info {} >'{}' 2>'{}'", MSA_BINARY, args, out, err);
    const int raw = std::system(command.c_str());
    RunResult result;
    result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    result.out = test::read_file(out);
    result.err = test::read_file(err);
    return result;
}

json run_info_json(const std::string& args) {
    const RunResult r = run_info(args + " --json");
    EXPECT_EQ(r.status, 0) << r.err;
    return json::parse(r.out);
}

// Exactly one line on stderr, "error: ...", status 1, nothing on stdout.
void expect_one_error_line(const RunResult& r, const std::string& expected) {
    EXPECT_EQ(r.status, 1) << "stderr: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
    EXPECT_TRUE(r.err.starts_with("error: ")) << r.err;
    EXPECT_THAT(r.err, HasSubstr(expected));
}

json m3_config() {
    return json::parse(test::read_file(kExampleDir + "/config.json"));
}

std::string shell_arg(const std::filesystem::path& path) {
    return fmt::format("'{}'", path.string());
}

const json* kv_row(const json& doc, const std::string& dtype) {
    for (const auto& row : doc["kv_cache"]["per_token"]) {
        if (row["dtype"] == dtype) {
            return &row;
        }
    }
    return nullptr;
}

// ---- the real config ----------------------------------------------------------------------------------------

TEST(InfoCommand, RealM3ConfigWithM31AllSparseLayers) {
    TempDir dir;
    json config = m3_config();
    config["text_config"]["sparse_attention_config"]["sparse_attention_freq"] = std::vector<int>(60, 1);
    test::write_file(dir.file("config.json"), config.dump());

    const RunResult text = run_info(shell_arg(dir.path()));
    ASSERT_EQ(text.status, 0) << text.err;
    // model.md section 5: K+V 34,560 B NVFP4, 61,440 B FP8; index keys 4,320 B NVFP4.
    EXPECT_THAT(text.out, ::testing::ContainsRegex("NVFP4 +34,560 B +4,320 B +38,880 B"));
    EXPECT_THAT(text.out, ::testing::ContainsRegex("FP8 +61,440 B +7,680 B +69,120 B"));
    EXPECT_THAT(text.out, ::testing::ContainsRegex("BF16 +122,880 B +15,360 B +138,240 B"));
    EXPECT_THAT(text.out, ::testing::ContainsRegex("MSA attention +60 +0-59"));
    EXPECT_THAT(text.out, ::testing::ContainsRegex("dense attention +0 +none"));
    EXPECT_THAT(text.out, HasSubstr("estimated from config.json: no weight files present"));

    const json doc = run_info_json(shell_arg(dir.path()));
    EXPECT_EQ((*kv_row(doc, "NVFP4"))["kv_bytes"], 34'560);
    EXPECT_EQ((*kv_row(doc, "NVFP4"))["index_k_bytes"], 4'320);
    EXPECT_EQ((*kv_row(doc, "FP8"))["kv_bytes"], 61'440);
    EXPECT_EQ(doc["layers"]["msa_attention"]["count"], 60);
    EXPECT_EQ(doc["weights"]["source"], "config_estimate");
}

TEST(InfoCommand, ExampleM3DirectoryLayersAndShape) {
    const RunResult r = run_info(shell_arg(kExampleDir));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.out, ::testing::ContainsRegex("dense attention +3 +0-2"));
    EXPECT_THAT(r.out, ::testing::ContainsRegex("MSA attention +57 +3-59"));
    EXPECT_THAT(r.out, ::testing::ContainsRegex("dense MLP +3 +0-2"));
    EXPECT_THAT(r.out, ::testing::ContainsRegex("MoE +57 +3-59"));
    EXPECT_THAT(r.out, HasSubstr("64 query heads, 4 KV heads x 128 (GQA 16), RoPE on 64 of 128 dims"));
    EXPECT_THAT(r.out, HasSubstr("128 experts x 3072, top-4"));
    // M3 itself: index keys in 57 layers.
    EXPECT_THAT(r.out, ::testing::ContainsRegex("NVFP4 +34,560 B +4,104 B"));

    const json doc = run_info_json(shell_arg(kExampleDir));
    EXPECT_EQ(doc["shape"]["hidden_size"], 6144);
    EXPECT_EQ(doc["layers"]["dense_attention"]["layers"], json({0, 1, 2}));
    EXPECT_EQ(doc["layers"]["moe"]["count"], 57);
    // model.md section 1: "about 428B total" for the text model; the estimate counts every tensor of section 3.
    const double params = doc["weights"]["total"]["params"].get<double>();
    EXPECT_NEAR(params / 1e9, 428, 428 * 0.01);
    // A config.json path works as well as its directory.
    EXPECT_EQ(run_info(shell_arg(kExampleDir + "/config.json")).status, 0);
}

TEST(InfoCommand, CapacityFiguresFollowFromWeightsAndKvBytes) {
    const json doc = run_info_json(shell_arg(kExampleDir) + " --context 131072 --gpu-memory-gib 141 --tp 4");
    const json& cap = doc["capacity"];
    const std::uint64_t weights = doc["weights"]["total"]["bytes"];
    const auto usable = static_cast<std::uint64_t>(141.0 * 0.9 * 1024 * 1024 * 1024);
    EXPECT_EQ(cap["usable_bytes_per_gpu"], usable);
    EXPECT_EQ(cap["weight_bytes_per_gpu"], (weights + 3) / 4);
    for (const auto& row : cap["per_dtype"]) {
        // TP 4: one of the 4 KV heads per GPU; the single index-key head on every GPU (57 MSA layers).
        const std::uint64_t per_token = row["kv_bytes_per_token_per_gpu"].get<std::uint64_t>() +
                                        row["index_k_bytes_per_token_per_gpu"].get<std::uint64_t>();
        const std::uint64_t expected_per_token = row["dtype"] == "NVFP4" ? 34'560 / 4 + 57 * 72
                                                 : row["dtype"] == "FP8" ? 61'440 / 4 + 57 * 128
                                                                         : 122'880 / 4 + 57 * 256;
        EXPECT_EQ(per_token, expected_per_token) << row["dtype"];
        const std::uint64_t free = usable - (weights + 3) / 4;
        EXPECT_EQ(row["max_sequences"], free / (131072 * per_token)) << row["dtype"];
    }
    EXPECT_GT(cap["per_dtype"][0]["max_sequences"].get<int>(), 0);

    // TP 1: 400+ GiB of weights do not fit in one 141 GiB GPU.
    const json one = run_info_json(shell_arg(kExampleDir));
    EXPECT_FALSE(one["capacity"]["weights_fit"].get<bool>());
    EXPECT_EQ(one["capacity"]["per_dtype"][0]["max_sequences"], 0);
}

// ---- config + index, no shards ------------------------------------------------------------------------------

TEST(InfoCommand, IndexWithoutShardsIsEstimatedFromConfig) {
    TempDir dir;
    const json config = m3_config();
    test::write_file(dir.file("config.json"), config.dump());
    // The real checkpoint's tensor names (MXFP8 projections), generated from model.md section 3.
    test::GeneratorOptions options;
    options.projections = test::StoredFormat::mxfp8;
    options.experts = test::StoredFormat::mxfp8;
    const auto tensors = test::checkpoint_tensors(config["text_config"], options);
    json weight_map = json::object();
    std::size_t i = 0;
    for (const auto& [name, tensor] : tensors) {
        weight_map[name] = fmt::format("model-{:05d}-of-00010.safetensors", 1 + (i++ % 10));
    }
    test::write_file(dir.file("model.safetensors.index.json"),
                     json{{"metadata", {{"total_size", 451'500'000'000ull}}}, {"weight_map", weight_map}}.dump());

    const RunResult r = run_info(shell_arg(dir.path()));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.out,
                ::testing::ContainsRegex("model.safetensors.index.json lists [0-9,]+ tensors in 10 shard\\(s\\), "
                                         "none present"));
    const json listed = run_info_json(shell_arg(dir.path()));
    EXPECT_EQ(listed["weights"]["index"]["tensors"], tensors.size());
    EXPECT_THAT(r.out, HasSubstr("skipped: 3 vision tensors listed in the index"));
    EXPECT_THAT(r.out, HasSubstr("index metadata.total_size 451,500,000,000"));
    const json doc = run_info_json(shell_arg(dir.path()));
    EXPECT_EQ(doc["weights"]["source"], "config_estimate");
    EXPECT_EQ(doc["weights"]["index_total_size"], 451'500'000'000ull);

    // An index that lacks a tensor the config calls for is an error naming it.
    weight_map.erase("language_model.model.layers.17.self_attn.index_q_proj.weight");
    test::write_file(dir.file("model.safetensors.index.json"), json{{"weight_map", weight_map}}.dump());
    expect_one_error_line(run_info(shell_arg(dir.path())),
                          "tensor \"language_model.model.layers.17.self_attn.index_q_proj.weight\", which config.json "
                          "calls for, is not listed");
}

// ---- generated checkpoints ----------------------------------------------------------------------------------

std::uint64_t text_bytes(const test::TensorMap& tensors) {
    std::uint64_t total = 0;
    for (const auto& [name, tensor] : tensors) {
        if (name.starts_with("vision_tower.") || name.starts_with("multi_modal_projector.") ||
            name.starts_with("patch_merge_mlp.")) {
            continue;
        }
        std::uint64_t n = dtype_size(tensor.dtype);
        for (auto d : tensor.shape) {
            n *= static_cast<std::uint64_t>(d);
        }
        total += n;
    }
    return total;
}

TEST(InfoCommand, GeneratedShardedCheckpointIsCountedFromHeaders) {
    TempDir dir;
    const json config = test::small_config();
    test::GeneratorOptions options;
    options.projections = test::StoredFormat::mxfp8;
    const auto tensors = test::checkpoint_tensors(config, options);
    test::write_checkpoint(dir.path(), config, tensors, 30'000);

    const RunResult r = run_info(shell_arg(dir.path()) + " --context 4096 --gpu-memory-gib 1");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("Weights (from the safetensors headers)"));
    EXPECT_THAT(r.out, HasSubstr("skipped: 3 vision tensors"));
    EXPECT_THAT(r.out, ::testing::ContainsRegex("MXFP8 +"));
    EXPECT_THAT(r.out, ::testing::ContainsRegex("NVFP4 +"));

    const json doc = run_info_json(shell_arg(dir.path()) + " --context 4096 --gpu-memory-gib 1");
    EXPECT_EQ(doc["weights"]["source"], "safetensors_headers");
    EXPECT_EQ(doc["weights"]["total"]["bytes"], text_bytes(tensors));
    EXPECT_EQ(doc["weights"]["vision_skipped"]["tensors"], 3);
    // Stored dtypes: the generator's own tally.
    std::map<std::string, std::uint64_t> per_dtype;
    for (const auto& [name, tensor] : tensors) {
        per_dtype[std::string(dtype_name(tensor.dtype))] += 1;
    }
    for (const auto& [dtype, count] : per_dtype) {
        EXPECT_EQ(doc["weights"]["by_stored_dtype"][dtype]["tensors"], count) << dtype;
    }
    // Small config, head_dim 32, 2 KV heads, 4 layers, 2 MSA layers: NVFP4 K+V = 4 x 2 x 2 x 18 = 288 B.
    EXPECT_EQ((*kv_row(doc, "NVFP4"))["kv_bytes"], 288);
    EXPECT_EQ((*kv_row(doc, "NVFP4"))["index_k_bytes"], 36);
    // 1 GiB x 0.9 minus the weights, over 4096 tokens x (288 + 36) B.
    const std::uint64_t free = static_cast<std::uint64_t>(0.9 * (1ull << 30)) - text_bytes(tensors);
    EXPECT_EQ(doc["capacity"]["per_dtype"][0]["max_sequences"], free / (4096 * 324));
    // Without --context the plan uses the model's maximum (8192 here) when it is below 131072.
    EXPECT_EQ(run_info_json(shell_arg(dir.path()))["capacity"]["context_tokens"], 8192);
}

TEST(InfoCommand, TextOnlySingleFileCheckpoint) {
    TempDir dir;
    const json config = test::small_config();
    test::GeneratorOptions options;
    options.vl_prefix = false;
    options.vision_tensors = false;
    test::write_checkpoint(dir.path(), config, test::checkpoint_tensors(config, options));
    const json doc = run_info_json(shell_arg(dir.path()));
    EXPECT_EQ(doc["config_layout"], "flat");
    EXPECT_EQ(doc["weights"]["source"], "safetensors_headers");
    EXPECT_EQ(doc["weights"]["vision_skipped"]["tensors"], 0);
}

// ---- corrupt inputs: one error line, status 1 ---------------------------------------------------------------

class InfoCorruption : public ::testing::Test {
protected:
    void SetUp() override {
        tensors = test::checkpoint_tensors(test::small_config(), {});
        test::write_checkpoint(dir.path(), test::small_config(), tensors, 60'000);
        for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
            if (entry.path().extension() == ".safetensors") {
                shards.push_back(entry.path().filename().string());
            }
        }
        std::sort(shards.begin(), shards.end());
        ASSERT_GE(shards.size(), 3u);
        ASSERT_EQ(run_info(shell_arg(dir.path())).status, 0);
    }
    RunResult run() { return run_info(shell_arg(dir.path())); }
    TempDir dir;
    test::TensorMap tensors;
    std::vector<std::string> shards;
};

TEST_F(InfoCorruption, TruncatedShard) {
    const std::string shard = dir.file(shards[1]);
    std::filesystem::resize_file(shard, std::filesystem::file_size(shard) - 100);
    expect_one_error_line(run(), shards[1]);
}

TEST_F(InfoCorruption, ShardWithGarbageHeader) {
    const std::string shard = dir.file(shards[0]);
    std::string bytes = test::read_file(shard);
    bytes[12] = '\n';
    bytes[13] = '\x01';
    test::write_file(shard, bytes);
    expect_one_error_line(run(), shards[0] + ": the header is not valid JSON");
}

TEST_F(InfoCorruption, MissingShard) {
    std::filesystem::remove(dir.file(shards.back()));
    expect_one_error_line(run(),
                          fmt::format("shard \"{}\" listed in model.safetensors.index.json is missing", shards.back()));
}

TEST_F(InfoCorruption, ConfigErrors) {
    test::write_file(dir.file("config.json"), "{\"hidden_size\": 64,");
    expect_one_error_line(run(), "config.json: not valid JSON");
    json config = test::small_config();
    config.erase("num_key_value_heads");
    test::write_file(dir.file("config.json"), config.dump());
    expect_one_error_line(run(), "config.json: num_key_value_heads is missing");
    config = test::small_config();
    config["sparse_attention_config"]["sparse_index_dim"] = 16;
    test::write_file(dir.file("config.json"), config.dump());
    expect_one_error_line(run(), "sparse_attention_config.sparse_index_dim (16) must equal head_dim (32)");
    // A config whose shapes disagree with the stored tensors.
    config = test::small_config();
    config["hidden_size"] = 32;
    test::write_file(dir.file("config.json"), config.dump());
    expect_one_error_line(run(), "expected [");
}

TEST_F(InfoCorruption, BadArguments) {
    expect_one_error_line(run_info(shell_arg(dir.path() / "nowhere")), "no such model directory");
    expect_one_error_line(run_info(shell_arg(dir.path()) + " --tp 3"), "tensor parallel size 3");
    expect_one_error_line(run_info(shell_arg(dir.path()) + " --context 100000"), "max_position_embeddings");
    const RunResult help = run_info("--help");
    EXPECT_EQ(help.status, 0);
    EXPECT_THAT(help.out, HasSubstr("--gpu-memory-gib"));
}

// Random byte damage to a shard: always status 0 (damage inside tensor data) or 1 with one error line.
TEST_F(InfoCorruption, RandomDamageNeverCrashes) {
    const std::string shard = dir.file(shards[0]);
    const std::string original = test::read_file(shard);
    std::uint32_t state = 12345;
    auto next = [&state] {
        state = state * 1664525u + 1013904223u;
        return state >> 8;
    };
    int rejected = 0;
    for (int round = 0; round < 12; ++round) {
        std::string bytes = original;
        for (int k = 0; k < 4; ++k) {
            // Mostly within the header, where damage matters.
            const std::size_t at = next() % std::min<std::size_t>(bytes.size(), 600);
            bytes[at] = static_cast<char>(next() & 0xFF);
        }
        if (round % 3 == 0) {
            bytes.resize(next() % bytes.size());
        }
        test::write_file(shard, bytes);
        const RunResult r = run();
        ASSERT_TRUE(r.status == 0 || r.status == 1) << "round " << round << ": status " << r.status << " " << r.err;
        if (r.status == 1) {
            ++rejected;
            EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
            EXPECT_TRUE(r.err.starts_with("error: ")) << r.err;
        }
    }
    EXPECT_GT(rejected, 6);  // damage in the header is caught
}

}  // namespace
}  // namespace msa
