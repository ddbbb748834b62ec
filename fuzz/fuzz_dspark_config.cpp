// Fuzz target for the DSpark drafter's config.json parser (src/model/dspark_model.cpp): any input must parse into a
// config whose derived sizes are usable, or throw msa::Error.
// Seed corpus: fuzz/corpus/fuzz_dspark_config/ (the shipped drafter config and broken variants).
#include "core/error.h"
#include "model/dspark_model.h"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const msa::DSparkConfig c =
            msa::parse_dspark_config(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz-input");
        if (c.q_dim() <= 0 || c.kv_dim() <= 0 || c.tap_width() <= 0 ||
            c.num_attention_heads % c.num_key_value_heads != 0 || c.rotary_dim > c.head_dim ||
            c.mask_token_id >= c.vocab_size) {
            __builtin_trap();  // accepted a config the drafter cannot run
        }
    } catch (const msa::Error&) {
        // Rejected with a clear error: fine.
    }
    return 0;
}
