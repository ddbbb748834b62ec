#include "cli/model_cli.h"

#include "core/error.h"
#include "core/parallel.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace msa::cli {

void add_model_flags(CLI::App& cmd, ModelFlags& flags) {
    cmd.add_option("--model", flags.model_dir, "model directory (config.json + safetensors)")->required();
    add_model_option_flags(cmd, flags);
}

void add_model_option_flags(CLI::App& cmd, ModelFlags& flags) {
    cmd.add_option("--kv-cache-dtype", flags.kv_cache_dtype, "nvfp4, fp8 or bf16 (default: the model config's)");
    cmd.add_option("--numerics", flags.numerics, "attention numerics: exact (FP32) or q8kv4 (MiniMax's quantised)")
        ->capture_default_str();
    cmd.add_option("--topk-mode", flags.topk_mode, "MSA top-k ranking: keyed (16-bit, default) or exact")
        ->capture_default_str();
    cmd.add_option("--activations", flags.activations,
                   "GEMM activations: int8 (fast, NVFP4 weights) or exact (FP32 everywhere)")
        ->capture_default_str();
    cmd.add_flag("--dense-attention", flags.dense_attention, "run every layer with dense attention");
    cmd.add_option("--topk-blocks", flags.topk_blocks, "override sparse_topk_blocks (0: the config's)");
    cmd.add_option("--threads", flags.threads, "CPU threads (default: MSA_NUM_THREADS, OMP_NUM_THREADS or all)");
}

ModelOptions model_options(const ModelFlags& flags) {
    ModelOptions o;
    if (!flags.kv_cache_dtype.empty()) {
        o.kv_cache_dtype = parse_kv_cache_dtype(flags.kv_cache_dtype);
        MSA_CHECK(o.kv_cache_dtype.has_value(), "--kv-cache-dtype must be nvfp4, fp8 or bf16, got '{}'",
                  flags.kv_cache_dtype);
    }
    MSA_CHECK(flags.numerics == "exact" || flags.numerics == "q8kv4", "--numerics must be exact or q8kv4, got '{}'",
              flags.numerics);
    o.attention_numerics = flags.numerics == "exact" ? AttentionNumerics::exact : AttentionNumerics::q8kv4;
    MSA_CHECK(flags.topk_mode == "keyed" || flags.topk_mode == "exact", "--topk-mode must be keyed or exact, got '{}'",
              flags.topk_mode);
    o.topk_mode = flags.topk_mode == "keyed" ? TopkMode::keyed : TopkMode::exact;
    MSA_CHECK(flags.activations == "int8" || flags.activations == "exact",
              "--activations must be int8 or exact, got '{}'", flags.activations);
    o.activations = flags.activations == "int8" ? ActivationMode::int8 : ActivationMode::exact;
    o.dense_attention = flags.dense_attention;
    o.topk_blocks = flags.topk_blocks;
    return o;
}

std::unique_ptr<MiniMaxM3Model> load_model(const ModelFlags& flags, std::int64_t max_tokens) {
    if (flags.threads > 0) set_num_threads(flags.threads);
    ModelOptions o = model_options(flags);
    o.num_kv_pages = static_cast<std::int32_t>(std::max<std::int64_t>(1, (max_tokens + kKvPageTokens - 1) / kKvPageTokens));
    return MiniMaxM3Model::load(flags.model_dir, o);
}

std::vector<std::int32_t> parse_token_ids(const std::string& text, const std::string& source) {
    std::vector<std::int32_t> ids;
    std::string cleaned = text;
    std::replace(cleaned.begin(), cleaned.end(), ',', ' ');
    std::istringstream in(cleaned);
    std::string word;
    while (in >> word) {
        std::size_t used = 0;
        long long v = -1;
        try {
            v = std::stoll(word, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        MSA_CHECK(used == word.size() && v >= 0 && v <= 0x7FFFFFFF,
                  "{}: '{}' is not a token id (expected non-negative integers separated by spaces or commas)", source,
                  word);
        ids.push_back(static_cast<std::int32_t>(v));
    }
    return ids;
}

std::string read_all(const std::string& path) {
    if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
    std::ifstream in(path, std::ios::binary);
    MSA_CHECK(in.good(), "cannot open '{}'", path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

SingleSequence::SingleSequence(MiniMaxM3Model& model) : model_(model) {
    pages_.resize(static_cast<std::size_t>(model.num_kv_pages()));
    for (std::size_t i = 0; i < pages_.size(); ++i) pages_[i] = static_cast<std::int32_t>(i);
}

std::vector<float> SingleSequence::append(const std::vector<std::int32_t>& tokens, std::int32_t num_logits,
                                          std::int32_t chunk) {
    const auto n = static_cast<std::int32_t>(tokens.size());
    MSA_CHECK(static_cast<std::int64_t>(length_) + n <= static_cast<std::int64_t>(pages_.size()) * kKvPageTokens,
              "the sequence would reach {} tokens, more than the {} reserved", length_ + n,
              pages_.size() * kKvPageTokens);
    std::vector<float> logits;
    for (std::int32_t begin = 0; begin < n; begin += chunk) {
        const std::int32_t len = std::min(chunk, n - begin);
        // Logits wanted from this chunk: those of the last num_logits tokens of the whole call that fall in it.
        const std::int32_t first_wanted = n - num_logits;
        const std::int32_t wanted = std::max(0, begin + len - std::max(first_wanted, begin));
        ForwardBatch batch;
        SequenceStep s;
        s.tokens = std::span<const std::int32_t>(tokens.data() + begin, static_cast<std::size_t>(len));
        s.past_len = length_;
        s.pages = pages_;
        s.num_logits = wanted;
        batch.seqs.push_back(s);
        ForwardOutput out;
        model_.forward(batch, {}, out);
        logits.insert(logits.end(), out.logits.begin(), out.logits.end());
        length_ += len;
    }
    return logits;
}

}  // namespace msa::cli
