// Cost of DSpark drafting on the CPU against the target's own steps, on the shipped default model and its drafter
// (models/default, models/default/drafter): one propose of 7 greedy drafts, one observe of a verify step's 8 taps
// rows, one target decode step (1 token) and one verify step (8 tokens), at several context lengths. CPU time of
// the calling thread, median and minimum of many repetitions, with `--threads` kernel threads (default 1; with more,
// the figures count the calling thread only, so they are meaningful as they stand for one thread).
//
//   build/bench/engine/dspark_bench --out bench/results/dspark_$(date +%F).json
#include "core/parallel.h"
#include "engine/dspark_drafter.h"
#include "model/minimax_m3_model.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bench_host.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <time.h>

namespace {

using msa::bench::process_cpu_us;
using msa::bench::run_command;
using msa::bench::thread_cpu_us;

struct Timing {
    double median = 0, min = 0;
};

// Thread CPU time of f(): median and minimum over `reps` runs (the minimum is the least disturbed by other jobs
// sharing the core on a busy machine).
template <typename F>
Timing time_us(int reps, F&& f) {
    std::vector<double> t;
    f();  // warm-up
    for (int i = 0; i < reps; ++i) {
        const double t0 = thread_cpu_us();
        f();
        t.push_back(thread_cpu_us() - t0);
    }
    std::sort(t.begin(), t.end());
    return {t[t.size() / 2], t.front()};
}

}  // namespace

int main(int argc, char** argv) {
    std::string out_path, model_dir = std::string(MSA_SOURCE_DIR) + "/models/default";
    int threads = 1, reps = 40;
    bool target_steps = true;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--out") out_path = argv[i + 1];
        if (a == "--model") model_dir = argv[i + 1];
        if (a == "--threads") threads = std::stoi(argv[i + 1]);
        if (a == "--reps") reps = std::stoi(argv[i + 1]);
        if (a == "--only" && std::string(argv[i + 1]) == "drafter") target_steps = false;  // for profiling
    }
    msa::set_num_threads(threads);
    const auto drafter = msa::load_dspark_drafter(model_dir + "/drafter");
    const msa::DSparkConfig& dc = drafter->model().config();
    msa::ModelOptions options;  // serving defaults (int8 activations for NVFP4 weights, exact attention)
    options.num_kv_pages = 16;
    auto target = msa::MiniMaxM3Model::load(model_dir, options);
    std::vector<std::int32_t> pages(16);
    for (int i = 0; i < 16; ++i) pages[i] = i;

    const std::string date = run_command("date -u +%Y-%m-%d");
    const std::string commit = msa::bench::measured_commit();
    const std::string host = msa::bench::machine_description();
    nlohmann::json results = nlohmann::json::array();
    auto add = [&](const std::string& figure, Timing value, const std::string& unit, const std::string& note) {
        results.push_back({{"figure", "dspark/" + figure},
                           {"value", value.median},
                           {"min", value.min},
                           {"unit", unit},
                           {"date", date},
                           {"machine", host},
                           {"commit", commit},
                           {"threads", threads},
                           {"statistic", fmt::format("median (and min) thread CPU time of {} runs", reps)},
                           {"load_average", run_command("cut -d' ' -f1-3 /proc/loadavg")},
                           {"note", note}});
        std::cout << fmt::format("{:<40} {:>10.1f} {} (min {:.1f})\n", figure, value.median, unit, value.min);
    };

    const int drafts = std::min(7, dc.block_size);
    for (const int context : {128, 1000}) {
        // The context: ordinary token ids; the target's prefill gives the taps the drafter observes.
        std::vector<std::int32_t> tokens(static_cast<std::size_t>(context) + 8);
        for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>(1 + (i * 37) % 3900);
        msa::ForwardBatch batch;
        batch.seqs.push_back({std::span(tokens).first(context), 0, pages, 1});
        msa::ForwardOptions fo;
        fo.tap_layers = drafter->tap_layers();
        msa::ForwardOutput out;
        target->forward(batch, fo, out);
        const std::size_t H = static_cast<std::size_t>(dc.hidden_size), ntaps = fo.tap_layers.size();
        std::vector<float> taps(static_cast<std::size_t>(context) * ntaps * H);
        for (std::size_t t = 0; t < ntaps; ++t) {
            for (int i = 0; i < context; ++i) {
                std::copy_n(out.hidden_taps.data() + (t * context + i) * H, H, taps.data() + (i * ntaps + t) * H);
            }
        }
        drafter->observe(1, 0, 0, std::span(tokens).first(context), taps);

        std::vector<std::int32_t> d;
        std::vector<float> probs;
        const auto anchor_span = std::span(tokens).first(static_cast<std::size_t>(context) + 1);
        add(fmt::format("propose_{}_drafts_ctx{}", drafts, context),
            time_us(reps, [&] { drafter->propose(1, 0, anchor_span, drafts, d, probs); }), "us/propose",
            "one propose: block pass (2 layers over 7 positions + context window) and lm_head + Markov head for "
            "each draft");
        const std::vector<float> step_taps(8 * ntaps * H, 0.25f);
        add(fmt::format("observe_8_ctx{}", context),
            time_us(reps, [&] { drafter->observe(2, 0, context, std::span(tokens).subspan(context, 8), step_taps); }),
            "us/observe", "context K/V of a verify step's 8 positions (fc + hidden_norm + k/v per layer)");
        for (const int q : {1, 8}) {
            if (!target_steps) break;
            msa::ForwardBatch step;
            step.seqs.push_back({std::span(tokens).subspan(context, q), context, pages, q});
            msa::ForwardOptions none;
            msa::ForwardOptions with_taps;
            with_taps.tap_layers = fo.tap_layers;
            msa::ForwardOutput o;
            add(fmt::format("target_step_{}tok_ctx{}", q, context),
                time_us(reps, [&] { target->forward(step, q == 1 ? none : with_taps, o); }), "us/step",
                q == 1 ? "target decode step (1 token, logits)"
                       : "target verify step (8 tokens, logits for all, taps for the drafter)");
        }
    }
    if (!out_path.empty()) {
        std::ofstream f(out_path);
        f << results.dump(1) << "\n";
        std::cout << "wrote " << out_path << "\n";
    }
    return 0;
}
