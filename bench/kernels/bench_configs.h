// The model configs the CPU benchmark runs (config.json texts and the weight formats of their random checkpoints).
#pragma once

#include "model/random_checkpoint.h"

#include <string>

namespace msa::bench {

struct BenchModel {
    std::string name;
    RandomCheckpointSpec spec;
    int prefill_tokens = 0;  // prompt length of the prefill measurement, and the decode context
    int decode_tokens = 0;
};

// "tiny": the shape of the embedded default model (issue 6): hidden 256, 4 layers (1 dense + 3 MSA with MoE),
// BF16 weights, NVFP4 KV, top-4 blocks.
// "mid": M3.1-style at reduced width: hidden 2048, 8 layers (1 dense + 7 MSA/MoE, 16 experts of 1024, top-4, shared
// expert), MXFP8 projections, NVFP4 W4A4 experts, NVFP4 KV, top-16 blocks.
BenchModel bench_model(const std::string& name);

}  // namespace msa::bench
