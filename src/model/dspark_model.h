// The DSpark block drafter (dspark.md; tools/train/drafter.py is the normative definition of our checkpoints) on the
// CPU: loads a drafter directory (config.json as tools/train/export.py writes it + BF16 model.safetensors) and the
// target's embed_tokens and lm_head, which the drafter shares (`target_model`, ".." = the directory above drafter/).
//
// Math (drafter.py):
//  - context: ctx = hidden_norm(fc(taps)) per context token (taps row = the tap layers' residual streams
//    concatenated in target_layer_ids order); per drafter layer the context key k_norm(k_proj(ctx)) with partial
//    NeoX RoPE at the token's position, and the value v_proj(ctx).
//  - block pass for the anchor token at position n: ids [anchor, mask x (B-1)] at positions n .. n+B-1, embedded
//    with the target's embeddings; per layer Gemma RMSNorm, attention in which every block query sees all B block
//    keys (non-causal) and the context keys at positions [n - sliding_window, n - 1]; Gemma RMSNorm, swigluoai MLP;
//    final norm, target lm_head -> U_j (row j predicts the token at n + j + 1).
//  - Markov head: logits_j = U_j + W2 W1[x_j], x_0 = the anchor, x_j = draft j-1; greedy drafting takes the argmax
//    left to right (the first maximum on ties, as torch.argmax).
// Every product is FP32 with exactly dequantised BF16 weights (cpu::linear exact mode).
#pragma once

#include "formats/safetensors_reader.h"
#include "kernels/weight_view.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace msa {

// drafter/config.json (fields as tools/train/export.py's drafter_config_json writes them).
struct DSparkConfig {
    int hidden_size = 0;
    int num_hidden_layers = 0;
    int num_attention_heads = 0;
    int num_key_value_heads = 0;
    int head_dim = 0;
    int rotary_dim = 0;
    double rope_theta = 0;
    double rms_norm_eps = 0;
    int intermediate_size = 0;
    int vocab_size = 0;
    std::vector<int> target_layer_ids;  // target layers whose output residual stream is a tap, in taps-row order
    int block_size = 0;                 // dspark_block_size: anchor + B-1 masks
    int mask_token_id = 0;
    int sliding_window = 0;           // context keys visible to a block anchored at n: positions [n - window, n - 1]
    int markov_rank = 0;              // markov_head.rank ("vanilla" head)
    std::string target_model = "..";  // the target's directory, relative to the drafter directory

    std::int64_t q_dim() const { return std::int64_t{num_attention_heads} * head_dim; }
    std::int64_t kv_dim() const { return std::int64_t{num_key_value_heads} * head_dim; }
    // Floats of one taps row: num_taps x hidden.
    std::int64_t tap_width() const { return static_cast<std::int64_t>(target_layer_ids.size()) * hidden_size; }
};

// Parses and validates drafter config JSON; `source` names the file in errors. Throws msa::Error naming the field.
DSparkConfig parse_dspark_config(std::string_view json_text, std::string_view source);

// Context keys/values of one drafter layer, laid out for two GEMMs per KV head (scores = Q K^T, out = P V):
// keys head-major by row, k[(h * head_stride + i) * head_dim + d]; values transposed, vt[(h * head_dim + d) *
// head_stride + i] (KV head h, row i, dim d).
struct DSparkLayerContext {
    const float* k = nullptr;
    const float* vt = nullptr;
};

// What a block pass may attend to besides its own block: `count` consecutive positions starting at
// `first_position`, one row per position in every layer; valid[i] == 0 masks row i (a position never observed).
// Rows outside the anchor's window [n - sliding_window, n - 1] are ignored whatever their flag.
struct DSparkContext {
    std::int32_t first_position = 0;
    std::int64_t count = 0;
    std::int64_t head_stride = 0;            // rows between KV heads (>= count)
    std::vector<DSparkLayerContext> layers;  // one per drafter layer
    const std::uint8_t* valid = nullptr;     // [count]
};

struct DSparkLoadOptions {
    // Target checkpoint directory; empty: the config's target_model, relative to the drafter directory.
    std::string target_dir;
    // > 0: replaces the config's sliding_window (tests exercise the window's edge with short sequences).
    int sliding_window = 0;
};

class DSparkModel {
public:
    // Loads `drafter_dir` and the shared target tensors. Throws msa::Error naming the file, field or tensor at fault
    // (malformed config, missing or misshapen tensor, target whose vocabulary/hidden size/layers do not fit).
    static std::unique_ptr<DSparkModel> load(const std::string& drafter_dir, const DSparkLoadOptions& options = {});

    const DSparkConfig& config() const { return config_; }

    // Context keys and values of `count` tokens at positions first_position, first_position + 1, ...:
    // taps [count][tap_width]. Layer l's rows go to k_out[l] and vt_out[l] laid out as in DSparkLayerContext, the
    // pointers addressing row 0 of these tokens (K: row r0 of a buffer is buffer + r0 * head_dim; V^T: buffer + r0).
    void context_kv(const float* taps, std::int64_t count, std::int32_t first_position, std::span<float* const> k_out,
                    std::span<float* const> vt_out, std::int64_t head_stride) const;

    // Block pass for `anchor_token` at `anchor_position` (= n): u [rows][vocab] = U_0 .. U_{rows-1} (without the
    // Markov term), rows in 1 .. block_size.
    void block_logits(std::int32_t anchor_token, std::int32_t anchor_position, const DSparkContext& context, int rows,
                      float* u) const;

    // logits[vocab] += W2 W1[prev_token] (the Markov term).
    void add_markov(std::int32_t prev_token, float* logits) const;

    // Greedy drafting from a block's U (rows >= num_drafts): drafts[j] = argmax(U_j + Markov(x_j)), x_0 = anchor.
    // When `logits` is given it receives the num_drafts rows the drafts were chosen from.
    void greedy_drafts(const float* u, std::int32_t anchor_token, int num_drafts, std::vector<std::int32_t>& drafts,
                       float* logits = nullptr) const;

private:
    struct Layer {
        std::vector<float> input_layernorm, post_attention_layernorm, q_norm, k_norm;
        WeightView q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj;
    };

    DSparkModel() = default;
    void attention(const Layer& layer, const float* x, std::int32_t anchor_position, const DSparkLayerContext& ctx,
                   const DSparkContext& context, float* out) const;

    DSparkConfig config_;
    std::unique_ptr<Checkpoint> drafter_;
    std::unique_ptr<Checkpoint> target_;
    WeightView embed_tokens_;  // target's [vocab][hidden]
    WeightView lm_head_;       // target's [vocab][hidden]
    WeightView fc_;            // [hidden][tap_width]
    std::vector<float> hidden_norm_, final_norm_;
    std::vector<Layer> layers_;
    WeightView markov_w1_;  // [vocab][rank] (an embedding)
    WeightView markov_w2_;  // [vocab][rank]
};

}  // namespace msa
