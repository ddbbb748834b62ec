#include "model/minimax_m3_model.h"

#include "core/error.h"
#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <limits>

namespace msa {
namespace {

std::vector<bool> msa_layer_mask(const ModelConfig& config, const ModelOptions& options) {
    std::vector<bool> mask(static_cast<std::size_t>(config.num_hidden_layers));
    for (int l = 0; l < config.num_hidden_layers; ++l) mask[l] = !options.dense_attention && config.is_msa_layer(l);
    return mask;
}

// What the kernels assume beyond what ModelConfig already validates.
void check_supported(const ModelConfig& c, const std::vector<bool>& msa_layers) {
    MSA_CHECK(c.head_dim % 16 == 0, "config.json: head_dim {} is not a multiple of 16, which the kernels need",
              c.head_dim);
    MSA_CHECK(c.rotary_dim > 0 && c.rotary_dim <= c.head_dim && c.rotary_dim % 2 == 0,
              "config.json: rotary_dim {} must be even and at most head_dim {}", c.rotary_dim, c.head_dim);
    MSA_CHECK(c.swiglu_alpha == 1.702 && c.swiglu_limit == 7.0,
              "config.json: swiglu_alpha {} / swiglu_limit {} differ from swigluoai's 1.702 / 7 (model.md section 1)",
              c.swiglu_alpha, c.swiglu_limit);
    const bool any_msa = std::find(msa_layers.begin(), msa_layers.end(), true) != msa_layers.end();
    if (any_msa) {
        MSA_CHECK(c.sparse.block_size == kKvPageTokens,
                  "config.json: sparse_block_size {} is not supported: MSA blocks are the {}-token KV pages",
                  c.sparse.block_size, kKvPageTokens);
        MSA_CHECK(c.sparse.index_dim == c.head_dim && c.sparse.num_index_heads == c.num_key_value_heads,
                  "config.json: MSA needs sparse_index_dim == head_dim and one index head per KV head");
    }
}

}  // namespace

std::unique_ptr<MiniMaxM3Model> MiniMaxM3Model::load(const std::string& dir, const ModelOptions& options,
                                                     std::unique_ptr<Backend> backend) {
    ModelConfig config = load_model_config(dir);
    // The weights in huge pages (unless MSA_WEIGHTS_HUGE_PAGES=0 or they do not fit): decode streams all of them
    // every step, and with 4 KB pages the page walks slowed the experts' GEMVs most (core/mapped_file.h).
    Checkpoint checkpoint = Checkpoint::open(dir, MappedFile::Load::automatic);
    if (!backend) backend = std::make_unique<cpu::CpuBackend>();
    return std::unique_ptr<MiniMaxM3Model>(
        new MiniMaxM3Model(std::move(config), std::move(checkpoint), options, std::move(backend)));
}

MiniMaxM3Model::MiniMaxM3Model(ModelConfig config, Checkpoint checkpoint, const ModelOptions& options,
                               std::unique_ptr<Backend> backend)
    : config_(std::move(config)), options_(options), checkpoint_(std::move(checkpoint)), backend_(std::move(backend)) {
    MSA_CHECK(options_.num_kv_pages > 0, "the KV cache needs at least one page, got {}", options_.num_kv_pages);
    const std::vector<bool> msa_layers = msa_layer_mask(config_, options_);
    const KvCacheDtype dtype = options_.kv_cache_dtype.value_or(config_.default_kv_cache_dtype());
    check_supported(config_, msa_layers);
    const int topk = options_.topk_blocks > 0 ? options_.topk_blocks : config_.sparse.topk_blocks;

    bound_ = bind_checkpoint_weights(config_, checkpoint_);
    weights_ = make_model_weights(config_, bound_, *backend_, msa_layers, topk);

    KvCacheConfig kv;
    kv.dtype = dtype;
    kv.num_kv_heads = config_.num_key_value_heads;
    kv.head_dim = config_.head_dim;
    kv.index_dim = config_.sparse.index_dim;
    kv.layer_has_index = msa_layers;
    kv.num_pages = options_.num_kv_pages;
    kv_storage_ = backend_->allocate(kv.page_bytes() * static_cast<std::size_t>(kv.num_pages));
    kv_ = std::make_unique<KvCache>(kv, static_cast<std::uint8_t*>(kv_storage_->data()));
    for (int l = 0; l < config_.num_hidden_layers; ++l) weights_.layers[l].attention.kv = kv_->layer(l);
}

std::int32_t MiniMaxM3Model::max_model_len() const {
    return static_cast<std::int32_t>(
        std::min<std::int64_t>(config_.max_position_embeddings, std::numeric_limits<std::int32_t>::max()));
}

std::uint64_t MiniMaxM3Model::weight_bytes_per_token() const {
    std::uint64_t total = weights_.lm_head.bytes();
    for (const auto& l : weights_.layers) {
        total += l.q_proj.bytes() + l.k_proj.bytes() + l.v_proj.bytes() + l.o_proj.bytes();
        total += l.index_q_proj.bytes() + l.index_k_proj.bytes();
        auto expert_bytes = [](const ExpertWeightsView& e) { return e.w1.bytes() + e.w3.bytes() + e.w2.bytes(); };
        if (!l.moe) {
            total += expert_bytes(l.mlp);
            continue;
        }
        total += l.router.bytes();
        if (!l.experts.empty()) total += static_cast<std::uint64_t>(l.top_k) * expert_bytes(l.experts[0]);
        if (l.has_shared_expert) total += expert_bytes(l.shared_expert);
    }
    return total;
}

void MiniMaxM3Model::forward(const ForwardBatch& batch, const ForwardOptions& options, ForwardOutput& out,
                             ForwardTrace* trace) {
    const ModelConfig& c = config_;
    const std::int64_t hidden = c.hidden_size;
    const int Hkv = c.num_key_value_heads;

    // ---- validate and lay out the batch ----
    std::vector<std::int32_t> tokens;
    std::vector<AttentionSeq> seqs;
    std::vector<std::int64_t> logit_rows;
    for (std::size_t si = 0; si < batch.seqs.size(); ++si) {
        const SequenceStep& s = batch.seqs[si];
        const auto n = static_cast<std::int64_t>(s.tokens.size());
        MSA_CHECK(s.past_len >= 0, "sequence {} of the batch has a negative past_len {}", si, s.past_len);
        const std::int64_t kv_len = s.past_len + n;
        MSA_CHECK(kv_len <= max_model_len(), "sequence {} would reach {} tokens, more than the model's {}", si, kv_len,
                  max_model_len());
        const std::int64_t blocks = (kv_len + kKvPageTokens - 1) / kKvPageTokens;
        MSA_CHECK(static_cast<std::int64_t>(s.pages.size()) >= blocks,
                  "sequence {} has {} pages for {} tokens ({} pages needed)", si, s.pages.size(), kv_len, blocks);
        for (std::int64_t b = 0; b < blocks; ++b) {
            MSA_CHECK(s.pages[b] >= 0 && s.pages[b] < num_kv_pages(), "sequence {} uses KV page {} of {}", si,
                      s.pages[b], num_kv_pages());
        }
        MSA_CHECK(s.num_logits >= 0 && s.num_logits <= n, "sequence {} asks for {} logits from {} new tokens", si,
                  s.num_logits, n);
        for (const std::int32_t t : s.tokens) {
            MSA_CHECK(t >= 0 && t < c.vocab_size, "sequence {} has token id {} outside the vocabulary of {}", si, t,
                      c.vocab_size);
        }
        if (n == 0) continue;
        AttentionSeq a;
        a.q_offset = static_cast<std::int64_t>(tokens.size());
        a.q_len = static_cast<std::int32_t>(n);
        a.kv_len = static_cast<std::int32_t>(kv_len);
        a.pages = s.pages.data();
        for (std::int64_t i = n - s.num_logits; i < n; ++i) logit_rows.push_back(a.q_offset + i);
        tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
        seqs.push_back(a);
    }
    for (const int tap : options.tap_layers) {
        MSA_CHECK(tap >= 0 && tap < c.num_hidden_layers, "hidden-state tap layer {} is outside 0..{}", tap,
                  c.num_hidden_layers - 1);
    }
    const auto T = static_cast<std::int64_t>(tokens.size());
    const auto R = static_cast<std::int64_t>(logit_rows.size());
    out.logits.assign(static_cast<std::size_t>(R * c.vocab_size), 0.0f);
    out.hidden_taps.assign(static_cast<std::size_t>(options.tap_layers.size() * T * hidden), 0.0f);
    if (trace != nullptr) {
        trace->selected_blocks.assign(static_cast<std::size_t>(c.num_hidden_layers), {});
        trace->num_kv_heads = Hkv;
        trace->topk = 0;
    }
    if (T == 0) return;

    // ---- buffers ----
    Backend& be = *backend_;
    auto buffer = [&](std::int64_t floats) { return be.allocate(static_cast<std::size_t>(floats) * sizeof(float)); };
    const std::int64_t qd = c.q_dim(), kvd = c.kv_dim(), di = c.sparse.index_dim;
    auto h = buffer(T * hidden), normed = buffer(T * hidden), tmp = buffer(T * hidden);
    auto q = buffer(T * qd), k = buffer(T * kvd), v = buffer(T * kvd), attn = buffer(T * qd);
    auto iq = buffer(T * Hkv * std::max<std::int64_t>(di, 1)), ik = buffer(T * std::max<std::int64_t>(di, 1));
    const float eps = static_cast<float>(c.rms_norm_eps);
    const ActivationMode mode = options_.activations;

    be.embed(weights_.embed_tokens, tokens, h->floats());
    for (int l = 0; l < c.num_hidden_layers; ++l) {
        const DecoderLayerWeights& lw = weights_.layers[static_cast<std::size_t>(l)];
        be.rms_norm(h->floats(), lw.input_layernorm, T, hidden, eps, normed->floats());
        // The q/k/v (and index) projections of the same input together (one parallel region on the CPU).
        const WeightView* proj[] = {&lw.q_proj, &lw.k_proj, &lw.v_proj, &lw.index_q_proj, &lw.index_k_proj};
        float* proj_out[] = {q->floats(), k->floats(), v->floats(), iq->floats(), ik->floats()};
        const std::size_t projections = lw.attention.msa ? 5 : 3;
        be.linear_group(std::span(proj, projections), normed->floats(), T, std::span(proj_out, projections), mode);
        AttentionOptions ao;
        ao.numerics = options_.attention_numerics;
        ao.topk_mode = options_.topk_mode;
        if (lw.attention.msa) {
            if (trace != nullptr && trace->record_selected_blocks) {
                auto& sel = trace->selected_blocks[static_cast<std::size_t>(l)];
                sel.assign(static_cast<std::size_t>(T * Hkv * lw.attention.topk_blocks), -1);
                ao.selected_blocks = sel.data();
                trace->topk = lw.attention.topk_blocks;
            }
        }
        be.attention(lw.attention, seqs, q->floats(), k->floats(), v->floats(), iq->floats(), ik->floats(),
                     attn->floats(), ao);
        be.linear(lw.o_proj, attn->floats(), T, tmp->floats(), mode);
        be.add(h->floats(), tmp->floats(), T * hidden);

        be.rms_norm(h->floats(), lw.post_attention_layernorm, T, hidden, eps, normed->floats());
        if (lw.moe) {
            be.moe(lw.moe_layer(), normed->floats(), T, tmp->floats(), mode);
        } else {
            be.mlp(lw.mlp, normed->floats(), T, tmp->floats(), mode);
        }
        be.add(h->floats(), tmp->floats(), T * hidden);

        for (std::size_t t = 0; t < options.tap_layers.size(); ++t) {
            if (options.tap_layers[t] == l) {
                be.download(out.hidden_taps.data() + t * static_cast<std::size_t>(T * hidden), h->floats(),
                            static_cast<std::size_t>(T * hidden) * sizeof(float));
            }
        }
    }
    if (R == 0) return;
    auto last = buffer(R * hidden);
    auto logits = buffer(R * c.vocab_size);
    be.gather_rows(h->floats(), logit_rows, hidden, last->floats());
    be.rms_norm(last->floats(), weights_.final_norm, R, hidden, eps, last->floats());
    be.linear(weights_.lm_head, last->floats(), R, logits->floats(), mode);
    be.download(out.logits.data(), logits->floats(), out.logits.size() * sizeof(float));
}

}  // namespace msa
