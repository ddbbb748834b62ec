// Fuzz target for the config.json parser (src/model/model_config.cpp): any input must parse into a config whose
// per-layer queries and KV sizes are usable, or throw msa::Error.
// Seed corpus: fuzz/corpus/fuzz_model_config/ (the real M3 config, small flat configs, broken variants).
#include "core/error.h"
#include "model/model_config.h"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const msa::ModelConfig config =
            msa::parse_model_config(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz-input");
        for (int layer = 0; layer < config.num_hidden_layers && layer < 4096; ++layer) {
            (void)config.is_msa_layer(layer);
            (void)config.is_moe_layer(layer);
        }
        for (msa::KvCacheDtype dtype : msa::kAllKvCacheDtypes) {
            (void)config.kv_bytes_per_token(dtype);
            (void)config.index_k_bytes_per_token(dtype);
        }
    } catch (const msa::Error&) {
        // Rejected with a clear error: fine.
    }
    return 0;
}
