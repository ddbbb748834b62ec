// Throughput of the bulk format conversions and the NVFP4/MXFP8 block quantisers, once on the scalar reference path
// and once on the AVX2 path (when the CPU has it). Each benchmark converts kElements values that stay in L2, so
// the figures are compute throughput, not memory bandwidth. Names: <operation>/<path>.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "formats/convert.h"
#include "formats/mxfp8.h"
#include "formats/nvfp4.h"

namespace msa {
namespace {

constexpr std::size_t kElements = 1 << 15;

// Inputs shaped like activations: Gaussian values of varied magnitude (a few in the FP8 subnormal range).
struct Inputs {
    std::vector<float> floats;
    std::vector<std::uint16_t> bf16, fp16;
    std::vector<std::uint8_t> e4m3, e5m2, nvfp4_packed, nvfp4_scales, mxfp8_values, mxfp8_scales;

    Inputs() : floats(kElements), bf16(kElements), fp16(kElements), e4m3(kElements), e5m2(kElements) {
        std::mt19937 rng(1);
        std::normal_distribution<float> normal;
        std::uniform_real_distribution<float> log_scale(-8.0f, 8.0f);
        for (std::size_t i = 0; i < kElements; i += 16) {
            const float scale = std::exp(log_scale(rng));
            for (std::size_t j = i; j < i + 16; ++j) floats[j] = normal(rng) * scale;
        }
        float_to_bf16(floats.data(), bf16.data(), kElements);
        float_to_fp16(floats.data(), fp16.data(), kElements);
        float_to_e4m3(floats.data(), e4m3.data(), kElements);
        float_to_e5m2(floats.data(), e5m2.data(), kElements);
        nvfp4_packed.resize(kElements / 2);
        nvfp4_scales.resize(kElements / kNvfp4BlockSize);
        nvfp4_quantize(floats.data(), kElements, nvfp4_packed.data(), nvfp4_scales.data());
        mxfp8_values.resize(kElements);
        mxfp8_scales.resize(kElements / kMxfp8BlockSize);
        mxfp8_quantize(floats.data(), kElements, mxfp8_values.data(), mxfp8_scales.data());
    }
};

struct Outputs {
    std::vector<float> floats = std::vector<float>(kElements);
    std::vector<std::uint16_t> u16 = std::vector<std::uint16_t>(kElements);
    std::vector<std::uint8_t> u8 = std::vector<std::uint8_t>(kElements);
    std::vector<std::uint8_t> scales = std::vector<std::uint8_t>(kElements / kNvfp4BlockSize);
};

struct Operation {
    const char* name;
    std::size_t bytes_per_element;  // bytes read + written per element
    std::function<void(const Inputs&, Outputs&)> run;
};

std::vector<Operation> operations() {
    const std::size_t n = kElements;
    return {
        {"bf16_to_float", 6,
         [n](const Inputs& in, Outputs& out) { bf16_to_float(in.bf16.data(), out.floats.data(), n); }},
        {"float_to_bf16", 6,
         [n](const Inputs& in, Outputs& out) { float_to_bf16(in.floats.data(), out.u16.data(), n); }},
        {"fp16_to_float", 6,
         [n](const Inputs& in, Outputs& out) { fp16_to_float(in.fp16.data(), out.floats.data(), n); }},
        {"float_to_fp16", 6,
         [n](const Inputs& in, Outputs& out) { float_to_fp16(in.floats.data(), out.u16.data(), n); }},
        {"e4m3_to_float", 5,
         [n](const Inputs& in, Outputs& out) { e4m3_to_float(in.e4m3.data(), out.floats.data(), n); }},
        {"float_to_e4m3", 5,
         [n](const Inputs& in, Outputs& out) { float_to_e4m3(in.floats.data(), out.u8.data(), n); }},
        {"e5m2_to_float", 5,
         [n](const Inputs& in, Outputs& out) { e5m2_to_float(in.e5m2.data(), out.floats.data(), n); }},
        {"float_to_e5m2", 5,
         [n](const Inputs& in, Outputs& out) { float_to_e5m2(in.floats.data(), out.u8.data(), n); }},
        {"bf16_to_e4m3", 3, [n](const Inputs& in, Outputs& out) { bf16_to_e4m3(in.bf16.data(), out.u8.data(), n); }},
        {"nvfp4_quantize", 5,
         [n](const Inputs& in, Outputs& out) {
             nvfp4_quantize(in.floats.data(), n, out.u8.data(), out.scales.data());
         }},
        {"nvfp4_dequantize", 5,
         [n](const Inputs& in, Outputs& out) {
             nvfp4_dequantize(in.nvfp4_packed.data(), in.nvfp4_scales.data(), n, 1.0f, out.floats.data());
         }},
        {"nvfp4_dequantize_to_e4m3", 2,
         [n](const Inputs& in, Outputs& out) {
             nvfp4_dequantize_to_e4m3(in.nvfp4_packed.data(), in.nvfp4_scales.data(), n, out.u8.data());
         }},
        {"mxfp8_quantize", 5,
         [n](const Inputs& in, Outputs& out) {
             mxfp8_quantize(in.floats.data(), n, out.u8.data(), out.scales.data());
         }},
        {"mxfp8_dequantize", 5,
         [n](const Inputs& in, Outputs& out) {
             mxfp8_dequantize(in.mxfp8_values.data(), in.mxfp8_scales.data(), n, out.floats.data());
         }},
    };
}

void run(benchmark::State& state, const Operation& op, const CpuFeatures& features) {
    static const Inputs inputs;
    Outputs outputs;
    const CpuFeatures saved = cpu_features();
    set_cpu_features_for_testing(features);
    for (auto _ : state) {
        op.run(inputs, outputs);
        benchmark::ClobberMemory();
    }
    set_cpu_features_for_testing(saved);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kElements));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kElements * op.bytes_per_element));
}

}  // namespace
}  // namespace msa

int main(int argc, char** argv) {
    const msa::CpuFeatures detected = msa::cpu_features();
    for (const msa::Operation& op : msa::operations()) {
        benchmark::RegisterBenchmark((std::string(op.name) + "/scalar").c_str(), msa::run, op, msa::CpuFeatures{});
        if (detected.avx2) {
            benchmark::RegisterBenchmark((std::string(op.name) + "/avx2").c_str(), msa::run, op, detected);
        }
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
