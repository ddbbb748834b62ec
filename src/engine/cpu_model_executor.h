// The engine's ModelExecutor over the CPU model (model/minimax_m3_model.h): loads a checkpoint directory, sizes the
// model's paged KV cache from a page count or a memory budget, and runs the engine's forward batches on it.
//
//   msa::CpuModelExecutorOptions o;
//   o.kv_cache_bytes = 8ull << 30;                       // or o.num_kv_pages = 512
//   auto model = msa::load_cpu_model_executor("models/default", o);
//   msa::Engine engine(msa::EngineConfig{}, *model, &text);
//
// Page ids: the engine's block manager hands out ids in [0, num_kv_pages()); they are the model's KV page ids
// one to one (a page is one 128-token block of every layer, model/forward_batch.h), so a prefix-cached page
// shared by several sequences is read by all of them and written by none (engine contract, "Page ownership").
#pragma once

#include "engine/model_executor.h"
#include "formats/kv_cache_dtype.h"
#include "kernels/kernel_types.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

namespace msa {

class MiniMaxM3Model;

struct CpuModelExecutorOptions {
    // KV cache element type (nvfp4, fp8, bf16); default: the config's quantization_config.kv_cache_quant_algo,
    // else BF16.
    std::optional<KvCacheDtype> kv_cache_dtype;
    // Size of the KV page pool: num_kv_pages when set (> 0), else as many pages as fit in kv_cache_bytes
    // (default 2 GiB; the OS commits the memory only as pages are first written).
    std::int32_t num_kv_pages = 0;
    std::uint64_t kv_cache_bytes = 0;
    // Longest sequence served (prompt + output); 0: the config's max_position_embeddings. Always capped to what the
    // page pool holds, since one sequence must fit in it.
    std::int32_t max_model_len = 0;
    // CPU threads for the kernels (0: MSA_NUM_THREADS, OMP_NUM_THREADS or all cores). Process-wide.
    int threads = 0;
    // Model numerics and MSA switches (model/model_options.h).
    AttentionNumerics attention_numerics = AttentionNumerics::exact;
    TopkMode topk_mode = TopkMode::keyed;
    ActivationMode activations = ActivationMode::int8;
    bool dense_attention = false;  // every layer dense (MSA off)
    int topk_blocks = 0;           // override sparse_topk_blocks (0: the config's)
};

inline constexpr std::uint64_t kDefaultCpuKvCacheBytes = 2ull << 30;

class CpuModelExecutor final : public ModelExecutor {
public:
    CpuModelExecutor(std::unique_ptr<MiniMaxM3Model> model, std::int32_t max_model_len);
    ~CpuModelExecutor() override;

    void forward(const ForwardBatch& batch, const ForwardOptions& options, ForwardOutput& out) override;
    std::int32_t vocab_size() const override;
    std::int32_t num_kv_pages() const override;
    std::int32_t page_size() const override;
    std::int32_t max_model_len() const override { return max_model_len_; }

    // The model underneath (configuration, KV dtype, the cache itself for tests). Not thread-safe against
    // forward(): only the engine thread may touch it while an Engine runs.
    MiniMaxM3Model& model() { return *model_; }
    const MiniMaxM3Model& model() const { return *model_; }

private:
    std::unique_ptr<MiniMaxM3Model> model_;
    std::int32_t max_model_len_;
};

// Loads `model_dir` (config.json + safetensors) on the CPU backend. Throws msa::Error naming what is wrong
// (bad options, a budget too small for one page, or any checkpoint problem).
// The result is a CpuModelExecutor (static_cast to reach model()).
std::unique_ptr<ModelExecutor> load_cpu_model_executor(const std::filesystem::path& model_dir,
                                                       const CpuModelExecutorOptions& options = {});

// Bytes of one KV page (128 tokens, every layer) of the model in `model_dir` with these options; what
// kv_cache_bytes is divided by.
std::uint64_t cpu_kv_page_bytes(const std::filesystem::path& model_dir, const CpuModelExecutorOptions& options = {});

}  // namespace msa
