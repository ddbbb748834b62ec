// The engine API the CLI and the server share. An Engine owns one dedicated thread that runs steps (schedule ->
// model forward -> sample -> stream events); callers only submit, wait on their request's events, and cancel.
//
//   msa::Engine engine(config, model, &tokenizer_text);
//   auto handle = engine.submit({.prompt = ids, .params = params});   // throws RequestError when refused
//   while (auto event = handle->next()) { ... event->samples[i].text ... if (event->finished) break; }
//   handle->cancel();                                                   // e.g. client disconnected
//
// Contract (see docs/architecture.md, "Engine contract"):
// - submit() validates synchronously (RequestError: invalid_request / context_overflow -> 400, queue_full -> 429,
//   shutting_down -> 503) and never blocks on the engine thread.
// - Every accepted request gets events until exactly one event with finished == true (also after cancel(), an
//   error in the model, or shutdown), then none.
// - cancel() takes effect at the next step boundary: the request's pages are released before the next step runs.
#pragma once

#include "engine/drafter.h"
#include "engine/engine_types.h"
#include "engine/model_executor.h"
#include "engine/scheduler.h"
#include "engine/token_text.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace msa {

struct EngineConfig {
    // Scheduler limits. num_pages, page_size and max_model_len of 0 are taken from the model executor.
    SchedulerConfig scheduler;
    // Requests accepted but not yet started; submit() beyond this throws RequestError(queue_full).
    std::int32_t max_waiting_requests = 1024;
    std::int32_t max_n = 64;  // largest `n` accepted
    std::vector<std::int32_t> eos_token_ids;
    LogprobsMode logprobs_mode = LogprobsMode::raw;
    // Speculative decoding: drafts per step and sequence (0: off; needs a Drafter).
    std::int32_t num_speculative_tokens = 0;
    // Debugging and tests: check the scheduler's and block manager's invariants after every step (O(pages)); a
    // violation fails every request in flight with an internal error.
    bool check_invariants_every_step = false;
};

using EventCallback = std::function<void(RequestEvent&&)>;

// Internal to engine.cpp.
class EngineShared;
struct EngineRequestState;
struct EngineSequenceState;

// The caller's end of one request: a thread-safe queue of its events (or a callback that receives them on the
// engine thread instead).
class RequestHandle {
public:
    std::uint64_t id() const { return id_; }

    // Blocks until the next event. Returns nullopt once the final event has been taken.
    std::optional<RequestEvent> next();
    // The next event if one is queued.
    std::optional<RequestEvent> try_next();
    // Waits until an event is queued or the stream is over; false on timeout (e.g. to send an SSE keep-alive).
    bool wait_for(std::chrono::milliseconds timeout);
    // Asks the engine to abort the request; its final event (finish_reason abort) follows. Safe to call at any
    // time, also after the engine shut down.
    void cancel();

    // For the engine.
    RequestHandle(std::uint64_t id, std::weak_ptr<EngineShared> engine, EventCallback callback);
    void push(RequestEvent&& event);

private:
    const std::uint64_t id_;
    std::weak_ptr<EngineShared> engine_;
    EventCallback callback_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<RequestEvent> events_;
    bool final_pushed_ = false, final_taken_ = false;
};

class Engine {
public:
    // Starts the engine thread. `model` and `text` must outlive the engine; `text` may be null (then no text and
    // no stop strings); `drafter` may be null (no speculative decoding).
    Engine(const EngineConfig& config, ModelExecutor& model, const TokenTextSource* text = nullptr,
           Drafter* drafter = nullptr);
    ~Engine();  // shutdown() with no grace period
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    std::shared_ptr<RequestHandle> submit(GenerateRequest request);
    std::shared_ptr<RequestHandle> submit(GenerateRequest request, EventCallback on_event);
    // Submits several requests atomically (offline batch generation): all are validated first and none is
    // accepted unless all are; the engine thread sees them together, so its first step can schedule any of them.
    std::vector<std::shared_ptr<RequestHandle>> submit_batch(std::vector<GenerateRequest> requests);
    // Aborts a request; true when it was still live.
    bool cancel(std::uint64_t request_id);

    EngineStats stats() const;
    const EngineConfig& config() const { return config_; }  // with the model's defaults filled in

    // Stops accepting requests, lets running ones finish for up to `grace`, aborts the rest, joins the thread.
    void shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

    // The page pool, for tests: only safe on the engine thread (e.g. inside ModelExecutor::forward).
    const BlockManager& block_manager_on_engine_thread() const { return scheduler_->block_manager(); }

private:
    using RequestState = EngineRequestState;
    using SeqState = EngineSequenceState;
    std::unique_ptr<EngineRequestState> prepare_request(const GenerateRequest& request) const;
    void check_accepting(std::int32_t count);
    std::shared_ptr<RequestHandle> enqueue(std::unique_ptr<EngineRequestState> rs, EventCallback on_event);

    void run();
    void run_step();
    void propose_drafts();
    void pass_taps_to_drafter(const ScheduledStep& step);
    // Calls fn(sampler, i) for i in [0, count), across threads when the work is large enough.
    void sample_in_parallel(std::size_t count, const std::function<void(Sampler&, std::size_t)>& fn);
    void process_verify(RequestState& rs, SeqState& ss, std::span<const float> logits, std::int32_t num_drafts);
    // Records a generated token (already appended to the sequence) and checks stop conditions.
    void emit_token(RequestState& rs, SeqState& ss, std::int32_t token, SampledToken* logprobs);
    void finish_sample(RequestState& rs, SeqState& ss, FinishReason reason);
    void abort_request(RequestState& rs, FinishReason reason, const std::string& error);
    void abort_all(const std::string& error);
    // Every sample has finished: usage and timings are final (histograms observed here).
    void complete_request(RequestState& rs);
    // Marks a request for publish_touched() at the end of the iteration.
    void touch(RequestState& rs);
    // Pushes the request's pending deltas as one event; after its final event the request is destroyed.
    void publish(RequestState& rs);
    void publish_touched();
    void mark_started(RequestState& rs);
    void refresh_stats();

    EngineConfig config_;
    ModelExecutor& model_;
    const TokenTextSource* text_;
    Drafter* drafter_;
    ForwardOptions forward_options_;  // hidden-state taps when the drafter wants them
    std::shared_ptr<EngineShared> shared_;

    // Engine-thread state.
    std::unique_ptr<Scheduler> scheduler_;
    Sampler sampler_;
    std::vector<std::unique_ptr<Sampler>> samplers_;  // one per sampling thread
    std::unordered_map<std::uint64_t, std::unique_ptr<RequestState>> requests_;
    std::vector<RequestState*> touched_;
    ForwardOutput output_;
    std::vector<float> probs_, row_probs_;
    std::uint64_t seed_base_;
    EngineStats live_;  // engine-thread counters, copied into stats_ after each step

    mutable std::mutex stats_mu_;
    EngineStats stats_;

    std::mutex shutdown_mu_;
    std::thread thread_;
};

}  // namespace msa
