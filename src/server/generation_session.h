// The sequences of one OpenAI request (n choices, or prompts x n for completions) while they generate: submits
// them to the backend, queues the backend's events for the HTTP thread that owns the request, cancels what is
// still running when the request ends early (client gone, error, shutdown), and keeps the request's timing and
// token accounting for /metrics.
#pragma once

#include "server/serving_backend.h"
#include "server/serving_metrics.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace msa::server {

struct ChoiceEvent {
    int choice = 0;
    GenerationEvent event;
};

class GenerationSession {
public:
    using Clock = std::chrono::steady_clock;

    // `arrival`: when the HTTP request arrived (TTFT and e2e latency are measured from it).
    GenerationSession(ServingBackend& backend, ServingMetrics& metrics, Clock::time_point arrival);
    ~GenerationSession();
    GenerationSession(const GenerationSession&) = delete;
    GenerationSession& operator=(const GenerationSession&) = delete;

    // Submits every sequence; if one is refused, cancels those already submitted and rethrows its ApiError.
    // Consecutive groups of `choices_per_prompt` sequences share one prompt (n > 1), counted once in metrics.
    void start(std::vector<GenerationRequest> sequences, std::size_t choices_per_prompt = 1);
    // Waits up to `timeout` for events and returns all that are queued (possibly none). Updates token counts and
    // latency metrics as events pass.
    std::vector<ChoiceEvent> wait(std::chrono::milliseconds timeout);
    // Cancels every sequence not finished yet (idempotent, any thread).
    void cancel_all();

    bool all_finished() const { return finished_ == handles_.size(); }
    std::size_t size() const { return handles_.size(); }
    // Records the request in the metrics (once; call when the response is complete).
    void record(const std::string& finish_reason);

    std::int64_t prompt_tokens(int choice) const { return prompt_tokens_.at(choice); }
    std::int64_t cached_tokens(int choice) const { return cached_tokens_.at(choice); }
    std::int64_t generated_tokens() const { return generated_; }

private:
    struct Channel {
        std::mutex mutex;
        std::condition_variable cv;
        std::deque<ChoiceEvent> events;
    };

    ServingBackend& backend_;
    ServingMetrics& metrics_;
    Clock::time_point arrival_;
    std::shared_ptr<Channel> channel_ = std::make_shared<Channel>();
    std::vector<std::uint64_t> handles_;
    std::vector<bool> done_;
    std::vector<std::int64_t> prompt_tokens_;
    std::vector<std::int64_t> cached_tokens_;
    std::vector<Clock::time_point> last_token_at_;
    std::vector<bool> prompt_counted_;      // per prompt group
    std::size_t choices_per_prompt_ = 1;
    std::size_t finished_ = 0;
    std::int64_t generated_ = 0;
    bool first_token_seen_ = false;
    bool recorded_ = false;
    std::mutex cancel_mutex_;
    std::optional<RequestTimings> timings_;
};

}  // namespace msa::server
