// Fuzz target for the safetensors header parser (src/formats/safetensors_reader.cpp): any input must either parse
// into entries that lie inside the input, tile the data region and match their dtype sizes, or throw msa::Error.
// Seed corpus: fuzz/corpus/fuzz_safetensors_header/ (made by tools/fuzz/make_safetensors_corpus.py).
#include "core/error.h"
#include "formats/safetensors_reader.h"

#include <cstdint>
#include <cstdlib>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const msa::SafetensorsHeader header = msa::parse_safetensors(std::span(data, size), "fuzz-input");
        std::uint64_t expected = 0;
        for (const auto& entry : header.entries) {
            std::uint64_t bytes = msa::dtype_size(entry.dtype);
            for (auto d : entry.shape) {
                bytes *= static_cast<std::uint64_t>(d);
            }
            // Invariants the parser promises: sorted, contiguous, in bounds, sized by dtype x shape.
            if (entry.begin != expected || entry.end - entry.begin != bytes || header.data_start + entry.end > size) {
                std::abort();
            }
            expected = entry.end;
        }
        if (header.data_start + expected != size) {
            std::abort();
        }
    } catch (const msa::Error&) {
        // Rejected with a clear error: fine.
    }
    return 0;
}
