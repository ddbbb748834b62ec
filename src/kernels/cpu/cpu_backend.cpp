#include "kernels/cpu/cpu_backend.h"

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/attention_layer.h"
#include "kernels/cpu/ffn.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/weight_dequant.h"

#include <cstdlib>
#include <cstring>

namespace msa::cpu {
namespace {

class HostBuffer final : public BackendBuffer {
public:
    explicit HostBuffer(std::size_t bytes) : size_(bytes) {
        const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
        data_ = std::aligned_alloc(64, rounded);
        MSA_CHECK(data_ != nullptr, "cannot allocate {} bytes of host memory", bytes);
    }
    ~HostBuffer() override { std::free(data_); }
    HostBuffer(const HostBuffer&) = delete;
    HostBuffer& operator=(const HostBuffer&) = delete;
    void* data() override { return data_; }
    std::size_t size() const override { return size_; }

private:
    void* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace

std::unique_ptr<BackendBuffer> CpuBackend::allocate(std::size_t bytes) { return std::make_unique<HostBuffer>(bytes); }

void CpuBackend::upload(void* dst, const void* host_src, std::size_t bytes) { std::memcpy(dst, host_src, bytes); }

void CpuBackend::download(void* host_dst, const void* src, std::size_t bytes) { std::memcpy(host_dst, src, bytes); }

WeightView CpuBackend::adopt_weight(const WeightView& host) {
    WeightView w = host;
    if (w.format == LinearFormat::mxfp8 && w.data != nullptr && w.scales != nullptr && w.cols % 32 == 0) {
        adopted_flags_.push_back(mxfp8_exponent_zero_blocks(w));
        w.mxfp8_exponent_zero_blocks = adopted_flags_.back().data();
    }
    return w;
}

const float* CpuBackend::adopt_floats(std::span<const float> host) {
    adopted_.emplace_back(host.begin(), host.end());
    return adopted_.back().data();
}

void CpuBackend::embed(const WeightView& table, std::span<const std::int32_t> tokens, float* out) {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        MSA_CHECK(tokens[i] >= 0 && tokens[i] < table.rows, "token id {} is outside the vocabulary of {} tokens",
                  tokens[i], table.rows);
    }
    parallel_for(tokens.size(), 16, [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) weight_row(table, tokens[i], out + i * static_cast<std::size_t>(table.cols));
    });
}

void CpuBackend::rms_norm(const float* x, const float* weight, std::int64_t rows, std::int64_t dim, float eps,
                          float* out) {
    gemma_rms_norm(x, weight, rows, dim, eps, out);
}

void CpuBackend::linear(const WeightView& w, const float* x, std::int64_t m, float* y, ActivationMode mode) {
    cpu::linear(w, x, m, y, mode);
}

void CpuBackend::linear_group(std::span<const WeightView* const> ws, const float* x, std::int64_t m,
                              std::span<float* const> ys, ActivationMode mode) {
    MSA_CHECK(ws.size() == ys.size(), "linear_group: {} weights but {} outputs", ws.size(), ys.size());
    std::vector<LinearTask> tasks(ws.size());
    for (std::size_t i = 0; i < ws.size(); ++i) tasks[i] = LinearTask{ws[i], x, nullptr, m, ys[i], mode};
    linear_many(tasks);
}

void CpuBackend::add(float* a, const float* b, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) a[i] += b[i];
}

void CpuBackend::gather_rows(const float* src, std::span<const std::int64_t> rows, std::int64_t dim, float* dst) {
    for (std::size_t i = 0; i < rows.size(); ++i)
        std::memcpy(dst + i * static_cast<std::size_t>(dim), src + rows[i] * dim, sizeof(float) * dim);
}

void CpuBackend::attention(const AttentionLayer& layer, std::span<const AttentionSeq> seqs, float* q, float* k,
                           const float* v, float* index_q, float* index_k, float* out,
                           const AttentionOptions& options) {
    attention_layer(layer, seqs, q, k, v, index_q, index_k, out, options);
}

void CpuBackend::mlp(const ExpertWeightsView& weights, const float* x, std::int64_t m, float* out,
                     ActivationMode mode) {
    expert_forward(weights, x, m, out, mode);
}

void CpuBackend::moe(const MoeLayer& layer, const float* x, std::int64_t m, float* out, ActivationMode mode) {
    moe_forward(layer, x, m, out, mode);
}

}  // namespace msa::cpu
