// Writes a checkpoint with random weights for any config.json of the family, in the real layout (config.json +
// sharded safetensors with the real tensor names, each linear weight in the chosen format). For tests and
// benchmarks: the weights are random, so only shapes, formats and numerics are meaningful.
#pragma once

#include "kernels/weight_view.h"

#include <cstdint>
#include <filesystem>
#include <string>

namespace msa {

struct RandomCheckpointSpec {
    std::string config_json;                        // written verbatim as config.json; decides every shape
    LinearFormat attention_format = LinearFormat::bf16;  // q/k/v/o and index projections
    LinearFormat mlp_format = LinearFormat::bf16;        // dense MLP and shared expert
    LinearFormat expert_format = LinearFormat::bf16;     // routed experts
    std::uint32_t seed = 1;
    std::uint64_t max_shard_bytes = 64ull << 20;
};

// Creates `dir` (if needed) and writes the checkpoint. Linear weights are uniform with standard deviation
// 1/sqrt(fan_in), embeddings uniform in [-1, 1], norm weights and router biases small.
void write_random_checkpoint(const std::filesystem::path& dir, const RandomCheckpointSpec& spec);

}  // namespace msa
