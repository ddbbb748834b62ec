#include "server/serving_metrics.h"

#include <fmt/format.h>

namespace msa::server {

namespace {

const std::vector<std::string> kModel = {"model_name"};

// Seconds: from sub-millisecond steps of a fast engine to multi-minute long-context requests.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,  0.75,
                                          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160., 640., 2560.};
const std::vector<double> kItlBuckets = {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075,
                                         0.1,   0.15,   0.2,   0.3,    0.4,  0.5,   0.75, 1.0,  2.5,  5.0,  10.0};
const std::vector<double> kRequestBuckets = {0.1,  0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,   5.0,  10.0, 15.0,
                                             20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kTokenBuckets = {1,     2,     5,      10,     20,     50,     100,     200,    500,
                                           1000,  2000,  5000,   10000,  20000,  50000,  100000,  200000, 500000,
                                           1000000};

}  // namespace

ServingMetrics::ServingMetrics(std::string model_name, std::function<BackendStats()> stats)
    : model_(std::move(model_name)),
      prompt_tokens_(registry_.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", kModel)
                         .counter({model_})),
      generation_tokens_(
          registry_.counter("vllm:generation_tokens_total", "Number of generation tokens processed.", kModel)
              .counter({model_})),
      ttft_(registry_
                .histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", kModel,
                           kTtftBuckets)
                .histogram({model_})),
      itl_(registry_
               .histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", kModel,
                          kItlBuckets)
               .histogram({model_})),
      request_success_(registry_.counter("vllm:request_success_total", "Count of successfully processed requests.",
                                         {"model_name", "finished_reason"})),
      e2e_(registry_
               .histogram("vllm:e2e_request_latency_seconds", "Histogram of end-to-end request latency in seconds.",
                          kModel, kRequestBuckets)
               .histogram({model_})),
      queue_time_(registry_
                      .histogram("vllm:request_queue_time_seconds",
                                 "Histogram of time spent waiting in the queue in seconds.", kModel, kRequestBuckets)
                      .histogram({model_})),
      prefill_time_(registry_
                        .histogram("vllm:request_prefill_time_seconds",
                                   "Histogram of time spent in the prefill phase in seconds.", kModel, kRequestBuckets)
                        .histogram({model_})),
      decode_time_(registry_
                       .histogram("vllm:request_decode_time_seconds",
                                  "Histogram of time spent in the decode phase in seconds.", kModel, kRequestBuckets)
                       .histogram({model_})),
      request_prompt_tokens_(registry_
                                 .histogram("vllm:request_prompt_tokens", "Number of prefill tokens per request.",
                                            kModel, kTokenBuckets)
                                 .histogram({model_})),
      request_generation_tokens_(registry_
                                     .histogram("vllm:request_generation_tokens",
                                                "Number of generation tokens per request.", kModel, kTokenBuckets)
                                     .histogram({model_})),
      http_requests_(registry_.counter("msa:http_requests_total", "HTTP requests answered, by route and status.",
                                       {"model_name", "route", "status"})) {
    auto& running = registry_.gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                                    kModel).gauge({model_});
    auto& waiting = registry_.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", kModel)
                        .gauge({model_});
    auto& kv = registry_.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kModel)
                   .gauge({model_});
    auto& preemptions = registry_.counter("vllm:num_preemptions_total", "Cumulative number of preemptions.", kModel)
                            .counter({model_});
    auto& engine_tokens = registry_.counter("msa:engine_generation_tokens_total",
                                            "Tokens the engine generated, cancelled requests' included.", kModel)
                              .counter({model_});
    auto& prefix_queries = registry_.counter("vllm:prefix_cache_queries_total",
                                             "Prefix cache queries, in terms of number of queried tokens.", kModel)
                               .counter({model_});
    auto& prefix_hits = registry_.counter("vllm:prefix_cache_hits_total",
                                          "Prefix cache hits, in terms of number of cached tokens.", kModel)
                            .counter({model_});
    auto& drafts = registry_.counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", kModel)
                       .counter({model_});
    auto& draft_tokens = registry_.counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.",
                                           kModel).counter({model_});
    auto& accepted = registry_.counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.",
                                       kModel).counter({model_});
    auto& per_pos = registry_.counter("vllm:spec_decode_num_accepted_tokens_per_pos_total",
                                      "Accepted tokens per draft position.", {"model_name", "position"});
    // Finish reasons always present, so that rate() works from the first scrape.
    for (const char* reason : {"stop", "length", "abort"}) request_success_.counter({model_, reason});

    registry_.on_collect([=, this, &running, &waiting, &kv, &preemptions, &engine_tokens, &prefix_queries,
                          &prefix_hits, &drafts, &draft_tokens, &accepted, &per_pos] {
        if (!stats) return;
        const BackendStats s = stats();
        running.set(static_cast<double>(s.num_running));
        waiting.set(static_cast<double>(s.num_waiting));
        kv.set(s.kv_cache_usage);
        preemptions.set_total(static_cast<double>(s.num_preemptions));
        engine_tokens.set_total(static_cast<double>(s.engine_generation_tokens));
        prefix_queries.set_total(static_cast<double>(s.prefix_cache_queries));
        prefix_hits.set_total(static_cast<double>(s.prefix_cache_hits));
        drafts.set_total(static_cast<double>(s.spec_decode_num_drafts));
        draft_tokens.set_total(static_cast<double>(s.spec_decode_num_draft_tokens));
        accepted.set_total(static_cast<double>(s.spec_decode_num_accepted_tokens));
        for (std::size_t i = 0; i < s.spec_decode_accepted_per_pos.size(); ++i) {
            per_pos.counter({model_, std::to_string(i)})
                .set_total(static_cast<double>(s.spec_decode_accepted_per_pos[i]));
        }
    });
}

void ServingMetrics::record_finished(const FinishedRequest& r) {
    request_success_.counter({model_, r.finish_reason}).inc();
    e2e_.observe(r.e2e_seconds);
    request_prompt_tokens_.observe(static_cast<double>(r.prompt_tokens));
    request_generation_tokens_.observe(static_cast<double>(r.generation_tokens));
    if (r.timings) {
        queue_time_.observe(r.timings->queue);
        prefill_time_.observe(r.timings->prefill);
        decode_time_.observe(r.timings->decode);
    }
}

void ServingMetrics::record_http(const std::string& route, int status) {
    http_requests_.counter({model_, route, std::to_string(status)}).inc();
}

}  // namespace msa::server
