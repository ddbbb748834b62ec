// The CPU implementation of Backend (kernels/backend.h): host memory, the AVX2/scalar kernels of this directory,
// threads from core/parallel.h.
#pragma once

#include "kernels/backend.h"

#include <deque>
#include <vector>

namespace msa::cpu {

class CpuBackend final : public Backend {
public:
    std::string_view name() const override { return "cpu"; }

    std::unique_ptr<BackendBuffer> allocate(std::size_t bytes) override;
    void upload(void* dst, const void* host_src, std::size_t bytes) override;
    void download(void* host_dst, const void* src, std::size_t bytes) override;
    WeightView adopt_weight(const WeightView& host) override;
    const float* adopt_floats(std::span<const float> host) override;

    void embed(const WeightView& table, std::span<const std::int32_t> tokens, float* out) override;
    void rms_norm(const float* x, const float* weight, std::int64_t rows, std::int64_t dim, float eps,
                  float* out) override;
    void linear(const WeightView& w, const float* x, std::int64_t m, float* y, ActivationMode mode) override;
    void linear_group(std::span<const WeightView* const> ws, const float* x, std::int64_t m,
                      std::span<float* const> ys, ActivationMode mode) override;
    void add(float* a, const float* b, std::int64_t n) override;
    void gather_rows(const float* src, std::span<const std::int64_t> rows, std::int64_t dim, float* dst) override;
    void attention(const AttentionLayer& layer, std::span<const AttentionSeq> seqs, float* q, float* k,
                   const float* v, float* index_q, float* index_k, float* out,
                   const AttentionOptions& options) override;
    void mlp(const ExpertWeightsView& weights, const float* x, std::int64_t m, float* out,
             ActivationMode mode) override;
    void moe(const MoeLayer& layer, const float* x, std::int64_t m, float* out, ActivationMode mode) override;

private:
    std::deque<std::vector<float>> adopted_;
    std::deque<std::vector<std::uint64_t>> adopted_flags_;  // MXFP8 weights' WeightView::mxfp8_exponent_zero_blocks
};

}  // namespace msa::cpu
