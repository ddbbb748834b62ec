#include "engine/cpu_model_executor.h"

#include "core/error.h"
#include "core/log.h"
#include "core/parallel.h"
#include "kv/kv_cache.h"
#include "model/minimax_m3_model.h"
#include "model/model_config.h"

#include <algorithm>
#include <limits>

namespace msa {
namespace {

ModelOptions model_options(const CpuModelExecutorOptions& o) {
    ModelOptions m;
    m.kv_cache_dtype = o.kv_cache_dtype;
    m.attention_numerics = o.attention_numerics;
    m.topk_mode = o.topk_mode;
    m.activations = o.activations;
    m.dense_attention = o.dense_attention;
    m.topk_blocks = o.topk_blocks;
    return m;
}

// The page layout MiniMaxM3Model will allocate for this config and these options (index keys on MSA layers only).
std::uint64_t page_bytes_of(const ModelConfig& config, const CpuModelExecutorOptions& o) {
    KvCacheConfig kv;
    kv.dtype = o.kv_cache_dtype.value_or(config.default_kv_cache_dtype());
    kv.num_kv_heads = config.num_key_value_heads;
    kv.head_dim = config.head_dim;
    kv.index_dim = config.sparse.index_dim;
    for (int l = 0; l < config.num_hidden_layers; ++l) {
        kv.layer_has_index.push_back(!o.dense_attention && config.is_msa_layer(l));
    }
    return kv.page_bytes();
}

void check_options(const CpuModelExecutorOptions& o) {
    MSA_CHECK(o.num_kv_pages >= 0, "the number of KV pages must not be negative, got {}", o.num_kv_pages);
    MSA_CHECK(o.max_model_len >= 0, "max_model_len must not be negative, got {}", o.max_model_len);
    MSA_CHECK(o.threads >= 0, "the thread count must not be negative, got {}", o.threads);
    MSA_CHECK(o.topk_blocks >= 0, "topk_blocks must not be negative, got {}", o.topk_blocks);
}

}  // namespace

CpuModelExecutor::CpuModelExecutor(std::unique_ptr<MiniMaxM3Model> model, std::int32_t max_model_len)
    : model_(std::move(model)), max_model_len_(max_model_len) {
    MSA_CHECK(model_ != nullptr, "CpuModelExecutor needs a model");
    MSA_CHECK(max_model_len_ > 0 && max_model_len_ <= model_->max_model_len(),
              "max_model_len {} must be in [1, {}] (the model's limit)", max_model_len_, model_->max_model_len());
}

CpuModelExecutor::~CpuModelExecutor() = default;

void CpuModelExecutor::forward(const ForwardBatch& batch, const ForwardOptions& options, ForwardOutput& out) {
    model_->forward(batch, options, out);
}

std::int32_t CpuModelExecutor::vocab_size() const { return model_->vocab_size(); }
std::int32_t CpuModelExecutor::num_kv_pages() const { return model_->num_kv_pages(); }
std::int32_t CpuModelExecutor::page_size() const { return model_->page_size(); }

std::uint64_t cpu_kv_page_bytes(const std::filesystem::path& model_dir, const CpuModelExecutorOptions& options) {
    return page_bytes_of(load_model_config(model_dir.string()), options);
}

std::unique_ptr<ModelExecutor> load_cpu_model_executor(const std::filesystem::path& model_dir,
                                                       const CpuModelExecutorOptions& options) {
    check_options(options);
    if (options.threads > 0) set_num_threads(options.threads);
    const ModelConfig config = load_model_config(model_dir.string());
    ModelOptions mo = model_options(options);
    if (options.num_kv_pages > 0) {
        mo.num_kv_pages = options.num_kv_pages;
    } else {
        const std::uint64_t budget = options.kv_cache_bytes > 0 ? options.kv_cache_bytes : kDefaultCpuKvCacheBytes;
        const std::uint64_t page = page_bytes_of(config, options);
        const std::uint64_t pages = std::min<std::uint64_t>(budget / page, std::numeric_limits<std::int32_t>::max());
        MSA_CHECK(pages >= 1, "a KV cache budget of {} bytes holds no page: one page (128 tokens, all layers) of {} "
                  "takes {} bytes", budget, model_dir.string(), page);
        mo.num_kv_pages = static_cast<std::int32_t>(pages);
    }
    auto model = MiniMaxM3Model::load(model_dir.string(), mo);

    // One sequence must fit in the pool, or the scheduler could never finish it.
    const std::int64_t pool_tokens = static_cast<std::int64_t>(model->num_kv_pages()) * model->page_size();
    std::int64_t max_len = model->max_model_len();
    if (options.max_model_len > 0) {
        MSA_CHECK(options.max_model_len <= max_len, "max_model_len {} exceeds the model's max_position_embeddings {}",
                  options.max_model_len, max_len);
        max_len = options.max_model_len;
    }
    if (max_len > pool_tokens) {
        MSA_LOG_INFO("max_model_len {} capped to the {} tokens the KV cache holds ({} pages)", max_len, pool_tokens,
                 model->num_kv_pages());
        max_len = pool_tokens;
    }
    return std::make_unique<CpuModelExecutor>(std::move(model), static_cast<std::int32_t>(max_len));
}

}  // namespace msa
