#include "engine/engine.h"

#include "core/log.h"
#include "core/parallel.h"
#include "engine/rejection_sampler.h"
#include "engine/request_error.h"
#include "engine/stop_string_matcher.h"
#include "engine/utf8_assembler.h"

#include <algorithm>
#include <random>

namespace msa {

const char* finish_reason_name(FinishReason reason) {
    switch (reason) {
        case FinishReason::stop:
            return "stop";
        case FinishReason::length:
            return "length";
        case FinishReason::abort:
            return "abort";
        case FinishReason::error:
            return "error";
    }
    return "error";
}

// What submitting threads and the engine thread share, guarded by one mutex. Handles keep a weak reference so
// that cancel() stays safe after the engine is gone.
class EngineShared {
public:
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::unique_ptr<EngineRequestState>> inbox;
    std::vector<std::uint64_t> cancels;
    std::unordered_set<std::uint64_t> live;  // accepted and not yet finished
    std::int64_t unstarted = 0;              // accepted, no sequence admitted yet (the bounded queue)
    std::int64_t rejected = 0;
    std::uint64_t next_id = 1;
    bool stopping = false;
    EngineClock::time_point deadline;

    // Queues a cancel for a live request; false when the request is unknown or already finished.
    bool request_cancel(std::uint64_t id) {
        std::lock_guard lock(mu);
        if (live.count(id) == 0) return false;
        cancels.push_back(id);
        cv.notify_all();
        return true;
    }
};

struct EngineSequenceState {
    Sequence seq;
    TokenHistory history;
    RequestRng rng;
    StopStringMatcher stops;
    Utf8Assembler utf8;
    SampleDelta delta;  // what the next event carries for this sample
    bool dirty = false;
    bool finished = false;
    std::int32_t generated = 0;
    std::optional<EngineClock::time_point> last_token_time;
    std::vector<float> draft_probs;  // the drafter's q rows for seq.draft_tokens (empty: greedy drafts)
};

struct EngineRequestState {
    std::uint64_t id = 0;
    std::string external_id;
    SamplingParams params;
    std::int32_t num_prompt = 0;
    std::int32_t max_tokens = 0;  // resolved: the request's max_tokens or what max_model_len leaves
    std::shared_ptr<RequestHandle> handle;
    std::vector<std::unique_ptr<EngineSequenceState>> seqs;
    std::int32_t num_finished = 0;
    bool started = false;
    bool touched = false;
    std::string error;
    std::optional<Usage> usage;  // set when every sample has finished: the next event is the last
    std::optional<RequestTimings> timings;
    EngineClock::time_point arrival;
    std::optional<EngineClock::time_point> first_scheduled, first_token, last_token;
};

// ---- RequestHandle -----------------------------------------------------------------------------------------------

RequestHandle::RequestHandle(std::uint64_t id, std::weak_ptr<EngineShared> engine, EventCallback callback)
    : id_(id), engine_(std::move(engine)), callback_(std::move(callback)) {}

void RequestHandle::push(RequestEvent&& event) {
    if (callback_) {
        try {
            callback_(std::move(event));
        } catch (const std::exception& e) {
            MSA_LOG_ERROR("request {}: the event callback threw: {}", id_, e.what());
        }
        return;
    }
    {
        std::lock_guard lock(mu_);
        if (event.finished) final_pushed_ = true;
        events_.push_back(std::move(event));
    }
    cv_.notify_all();
}

std::optional<RequestEvent> RequestHandle::next() {
    std::unique_lock lock(mu_);
    if (callback_) return std::nullopt;
    cv_.wait(lock, [&] { return !events_.empty() || final_taken_; });
    if (events_.empty()) return std::nullopt;
    RequestEvent event = std::move(events_.front());
    events_.pop_front();
    if (event.finished) final_taken_ = true;
    return event;
}

std::optional<RequestEvent> RequestHandle::try_next() {
    std::lock_guard lock(mu_);
    if (events_.empty()) return std::nullopt;
    RequestEvent event = std::move(events_.front());
    events_.pop_front();
    if (event.finished) final_taken_ = true;
    return event;
}

bool RequestHandle::wait_for(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return !events_.empty() || final_taken_; });
}

void RequestHandle::cancel() {
    if (auto engine = engine_.lock()) engine->request_cancel(id_);
}

// ---- Engine: setup, submission, shutdown -------------------------------------------------------------------------

namespace {

EngineConfig with_model_defaults(EngineConfig config, const ModelExecutor& model) {
    SchedulerConfig& s = config.scheduler;
    if (s.num_pages == 0) s.num_pages = model.num_kv_pages();
    if (s.page_size == 0) s.page_size = model.page_size();
    const bool max_len_from_model = s.max_model_len == 0;
    if (max_len_from_model) s.max_model_len = model.max_model_len();
    MSA_CHECK(s.page_size == model.page_size(), "The engine's KV page size ({}) differs from the model's ({}).",
              s.page_size, model.page_size());
    MSA_CHECK(s.num_pages <= model.num_kv_pages(), "The engine wants {} KV pages but the model allocated only {}.",
              s.num_pages, model.num_kv_pages());
    MSA_CHECK(s.max_model_len <= model.max_model_len(), "max_model_len {} exceeds what the model supports ({}).",
              s.max_model_len, model.max_model_len());
    // One sequence must fit in the page pool, or it could never finish (it would preempt itself forever).
    const std::int64_t pool_tokens = static_cast<std::int64_t>(s.num_pages) * s.page_size;
    if (s.max_model_len > pool_tokens) {
        MSA_CHECK(max_len_from_model, "max_model_len {} exceeds the {} tokens the KV page pool holds ({} pages).",
                  s.max_model_len, pool_tokens, s.num_pages);
        s.max_model_len = static_cast<std::int32_t>(pool_tokens);
    }
    for (std::int32_t id : config.eos_token_ids) {
        MSA_CHECK(id >= 0 && id < model.vocab_size(), "EOS token id {} is outside the vocabulary [0, {}).", id,
                  model.vocab_size());
    }
    MSA_CHECK(config.num_speculative_tokens >= 0 && config.num_speculative_tokens <= 64,
              "num_speculative_tokens must be in [0, 64], got {}.", config.num_speculative_tokens);
    return config;
}

void init_histograms(EngineStats& s) {
    s.ttft = Histogram(ttft_buckets());
    s.inter_token_latency = Histogram(inter_token_latency_buckets());
    s.e2e_latency = Histogram(request_latency_buckets());
    s.queue_time = Histogram(request_latency_buckets());
    s.prefill_time = Histogram(request_latency_buckets());
    s.decode_time = Histogram(request_latency_buckets());
}

double seconds(EngineClock::duration d) {
    return std::chrono::duration<double>(d).count();
}

bool contains(const std::vector<std::int32_t>& ids, std::int32_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

Engine::Engine(const EngineConfig& config, ModelExecutor& model, const TokenTextSource* text, Drafter* drafter)
    : config_(with_model_defaults(config, model)),
      model_(model),
      text_(text),
      drafter_(drafter),
      shared_(std::make_shared<EngineShared>()),
      scheduler_(std::make_unique<Scheduler>(config_.scheduler)),
      sampler_(SamplerConfig{model.vocab_size(), config_.eos_token_ids, config_.logprobs_mode}),
      seed_base_(std::random_device{}()) {
    seed_base_ = (seed_base_ << 32) ^ std::random_device{}();
    if (drafter_ != nullptr && config_.num_speculative_tokens > 0) forward_options_.tap_layers = drafter_->tap_layers();
    init_histograms(live_);
    live_.spec_accepted_per_position.assign(config_.num_speculative_tokens, 0);
    stats_ = live_;
    thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
    shutdown();
}

void Engine::shutdown(std::chrono::milliseconds grace) {
    std::lock_guard guard(shutdown_mu_);
    {
        std::lock_guard lock(shared_->mu);
        if (!shared_->stopping) {
            shared_->stopping = true;
            shared_->deadline = EngineClock::now() + grace;
        }
    }
    shared_->cv.notify_all();
    if (thread_.joinable()) thread_.join();
}

std::shared_ptr<RequestHandle> Engine::submit(GenerateRequest request) {
    return submit(std::move(request), {});
}

std::shared_ptr<RequestHandle> Engine::submit(GenerateRequest request, EventCallback on_event) {
    auto rs = prepare_request(request);
    std::lock_guard lock(shared_->mu);
    check_accepting(1);
    auto handle = enqueue(std::move(rs), std::move(on_event));
    shared_->cv.notify_all();
    return handle;
}

std::vector<std::shared_ptr<RequestHandle>> Engine::submit_batch(std::vector<GenerateRequest> requests) {
    std::vector<std::unique_ptr<EngineRequestState>> prepared;
    prepared.reserve(requests.size());
    for (const auto& r : requests) prepared.push_back(prepare_request(r));  // any refusal refuses the whole batch
    std::vector<std::shared_ptr<RequestHandle>> handles;
    std::lock_guard lock(shared_->mu);
    check_accepting(static_cast<std::int32_t>(prepared.size()));
    for (auto& rs : prepared) handles.push_back(enqueue(std::move(rs), {}));
    shared_->cv.notify_all();
    return handles;
}

std::unique_ptr<EngineRequestState> Engine::prepare_request(const GenerateRequest& request) const {
    const std::int32_t vocab = model_.vocab_size();
    const SamplingParams& params = request.params;
    const auto num_prompt = static_cast<std::int32_t>(request.prompt.size());
    if (num_prompt == 0) reject_request("prompt", "The prompt is empty: at least one token is needed.");
    for (std::int32_t t : request.prompt) {
        if (t < 0 || t >= vocab) {
            reject_request("prompt", "The prompt contains token id {}, outside the vocabulary [0, {}).", t, vocab);
        }
    }
    validate_sampling_params(params, vocab);
    if (request.n < 1 || request.n > config_.max_n) {
        reject_request("n", "n must be between 1 and {}, got {}.", config_.max_n, request.n);
    }
    if (!params.stop.empty() && text_ == nullptr) {
        reject_request("stop", "Stop strings need a tokenizer and this engine has none; use stop_token_ids.");
    }
    const std::int32_t max_len = config_.scheduler.max_model_len;
    const std::int32_t completion = params.max_tokens.value_or(1);
    if (num_prompt + completion > max_len) {
        throw RequestError(
            RequestErrorKind::context_overflow, num_prompt >= max_len ? "messages" : "max_tokens",
            fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens ({} in "
                        "the messages, {} in the completion). Please reduce the length of the messages or "
                        "completion.",
                        max_len, num_prompt + completion, num_prompt, completion));
    }

    auto rs = std::make_unique<EngineRequestState>();
    rs->params = params;
    rs->external_id = request.external_id;
    rs->num_prompt = num_prompt;
    rs->max_tokens = params.max_tokens.value_or(max_len - num_prompt);
    if (params.min_tokens > rs->max_tokens) {
        reject_request("min_tokens", "min_tokens ({}) exceeds the {} tokens this request can generate.",
                       params.min_tokens, rs->max_tokens);
    }
    rs->arrival = request.arrival_time.value_or(EngineClock::now());
    std::vector<BlockHash> hashes;  // computed here, on the caller's thread, not on the engine thread
    if (config_.scheduler.enable_prefix_caching) {
        extend_block_hashes(request.prompt, config_.scheduler.page_size, request.cache_salt, hashes);
    }
    for (std::int32_t i = 0; i < request.n; ++i) {
        auto ss = std::make_unique<EngineSequenceState>();
        ss->seq.index = i;
        ss->seq.tokens = request.prompt;
        ss->seq.num_prompt = num_prompt;
        ss->seq.cache_salt = request.cache_salt;
        ss->seq.block_hashes = hashes;
        if (i > 0) ss->seq.fork_source = &rs->seqs[0]->seq;
        ss->history = TokenHistory(request.prompt, params.repetition_penalty != 1.0f);
        ss->stops = StopStringMatcher(params.stop, params.include_stop_str_in_output);
        rs->seqs.push_back(std::move(ss));
    }

    return rs;
}

// With shared_->mu held: throws when the engine cannot take `count` more requests now.
void Engine::check_accepting(std::int32_t count) {
    if (shared_->stopping) {
        throw RequestError(RequestErrorKind::shutting_down, "", "The engine is shutting down and accepts no requests.");
    }
    if (shared_->unstarted + count > config_.max_waiting_requests) {
        ++shared_->rejected;
        throw RequestError(
            RequestErrorKind::queue_full, "",
            fmt::format("The server is overloaded: {} requests are already waiting. Retry later.", shared_->unstarted));
    }
}

// With shared_->mu held: gives the request its id and seed and puts it in the engine thread's inbox.
std::shared_ptr<RequestHandle> Engine::enqueue(std::unique_ptr<EngineRequestState> rs, EventCallback on_event) {
    const SamplingParams& params = rs->params;
    rs->id = shared_->next_id++;
    const std::uint64_t seed = params.seed ? *params.seed : RequestRng::mix(seed_base_ ^ rs->id);
    for (auto& ss : rs->seqs) {
        ss->seq.request_id = rs->id;
        ss->seq.arrival = rs->id;
        ss->rng = RequestRng(seed, static_cast<std::uint64_t>(ss->seq.index));
    }
    rs->handle = std::make_shared<RequestHandle>(rs->id, shared_, std::move(on_event));
    auto handle = rs->handle;
    shared_->live.insert(rs->id);
    ++shared_->unstarted;
    shared_->inbox.push_back(std::move(rs));
    return handle;
}

bool Engine::cancel(std::uint64_t request_id) {
    return shared_->request_cancel(request_id);
}

EngineStats Engine::stats() const {
    EngineStats s;
    {
        std::lock_guard lock(stats_mu_);
        s = stats_;
    }
    std::lock_guard lock(shared_->mu);
    for (const auto& rs : shared_->inbox) s.num_waiting += static_cast<std::int32_t>(rs->seqs.size());
    s.num_rejected = shared_->rejected;
    return s;
}

void Engine::refresh_stats() {
    const BlockManager& blocks = scheduler_->block_manager();
    live_.num_running = scheduler_->num_running();
    live_.num_waiting = scheduler_->num_waiting();
    live_.kv_cache_usage = blocks.usage();
    live_.num_pages = blocks.num_pages();
    live_.num_free_pages = blocks.num_free_pages();
    live_.num_cached_pages = blocks.num_registered_pages();
    live_.prefix_cache_queries = blocks.counters().queries;
    live_.prefix_cache_hits = blocks.counters().hits;
    live_.num_preemptions = scheduler_->num_preemptions();
    std::lock_guard lock(stats_mu_);
    stats_ = live_;
}

// ---- Engine thread -----------------------------------------------------------------------------------------------

void Engine::run() {
    for (;;) {
        std::vector<std::unique_ptr<EngineRequestState>> incoming;
        std::vector<std::uint64_t> cancels;
        bool stopping = false;
        EngineClock::time_point deadline;
        {
            std::unique_lock lock(shared_->mu);
            shared_->cv.wait(lock, [&] {
                return !shared_->inbox.empty() || !shared_->cancels.empty() || shared_->stopping ||
                       scheduler_->num_running() + scheduler_->num_waiting() > 0;
            });
            incoming.swap(shared_->inbox);
            cancels.swap(shared_->cancels);
            stopping = shared_->stopping;
            deadline = shared_->deadline;
        }
        for (auto& rs : incoming) {
            for (auto& ss : rs->seqs) scheduler_->add(&ss->seq);
            const std::uint64_t id = rs->id;
            requests_.emplace(id, std::move(rs));
        }
        for (std::uint64_t id : cancels) {
            auto it = requests_.find(id);
            if (it != requests_.end()) abort_request(*it->second, FinishReason::abort, "");
        }
        const bool exit = stopping && (requests_.empty() || EngineClock::now() >= deadline);
        if (exit) {
            abort_all("");
        } else if (scheduler_->num_running() + scheduler_->num_waiting() > 0) {
            try {
                run_step();
            } catch (const std::exception& e) {
                // An internal error leaves the scheduler in an unknown state: fail what is in flight, start afresh.
                MSA_LOG_ERROR("engine step failed: {}", e.what());
                scheduler_ = std::make_unique<Scheduler>(config_.scheduler);
                for (auto& [id, rs] : requests_) {
                    for (auto& ss : rs->seqs) {  // the old scheduler is gone: nothing to release
                        ss->seq.status = SequenceStatus::finished;
                        ss->seq.pages.clear();
                    }
                }
                abort_all(fmt::format("internal error: {}", e.what()));
            }
        }
        // Statistics first, then events: whoever sees a request's final event also sees its effect in stats().
        refresh_stats();
        publish_touched();
        if (exit) return;
    }
}

void Engine::abort_all(const std::string& error) {
    std::vector<std::uint64_t> ids;
    for (const auto& [id, rs] : requests_) ids.push_back(id);
    for (std::uint64_t id : ids) {
        auto it = requests_.find(id);
        if (it != requests_.end()) {
            abort_request(*it->second, error.empty() ? FinishReason::abort : FinishReason::error, error);
        }
    }
}

void Engine::mark_started(RequestState& rs) {
    if (rs.started) return;
    rs.started = true;
    rs.first_scheduled = EngineClock::now();
    std::lock_guard lock(shared_->mu);
    --shared_->unstarted;
}

void Engine::propose_drafts() {
    const std::int32_t vocab = model_.vocab_size();
    for (Sequence* seq : scheduler_->running()) {
        if (seq->num_tokens() - seq->num_computed != 1 || !seq->prefill_done() || !seq->draft_tokens.empty()) continue;
        RequestState& rs = *requests_.at(seq->request_id);
        SeqState& ss = *rs.seqs[seq->index];
        const std::int32_t k = std::min({config_.num_speculative_tokens, rs.max_tokens - ss.generated - 1,
                                         config_.scheduler.max_model_len - seq->num_tokens() - 1});
        if (k <= 0) continue;
        ss.draft_probs.clear();
        try {
            drafter_->propose(rs.id, seq->index, seq->tokens, k, seq->draft_tokens, ss.draft_probs);
            if (static_cast<std::int32_t>(seq->draft_tokens.size()) > k) seq->draft_tokens.resize(k);
            const auto n = seq->draft_tokens.size();
            for (std::int32_t t : seq->draft_tokens) {
                MSA_CHECK(t >= 0 && t < vocab, "the drafter proposed token {}, outside the vocabulary.", t);
            }
            MSA_CHECK(ss.draft_probs.empty() || ss.draft_probs.size() >= n * vocab,
                      "the drafter returned {} draft probabilities for {} drafts.", ss.draft_probs.size(), n);
        } catch (const std::exception& e) {
            // Drafts are only a speed-up: without them the sequence decodes one token, with the same result.
            MSA_LOG_WARN("request {}: speculative drafting failed, decoding without drafts: {}", rs.id, e.what());
            seq->draft_tokens.clear();
            ss.draft_probs.clear();
        }
    }
}

// Hands each sequence's rows of the step's hidden-state taps ([num_taps][step tokens][hidden] from the model) to
// the drafter as [tokens][num_taps * hidden]. A drafter failure only costs speed: it is logged, never fatal.
void Engine::pass_taps_to_drafter(const ScheduledStep& step) {
    const std::size_t num_taps = forward_options_.tap_layers.size();
    const auto total = static_cast<std::size_t>(step.num_tokens);
    if (total == 0) return;
    if (output_.hidden_taps.empty() || output_.hidden_taps.size() % (num_taps * total) != 0) {
        MSA_LOG_WARN("the model returned {} hidden-tap values for {} taps of {} tokens; no drafter context this step",
                     output_.hidden_taps.size(), num_taps, total);
        return;
    }
    const std::size_t hidden = output_.hidden_taps.size() / (num_taps * total);
    std::vector<float> rows;
    std::size_t offset = 0;
    for (std::size_t i = 0; i < step.seqs.size(); ++i) {
        const SequenceStep& b = step.batch.seqs[i];
        const std::size_t n = b.tokens.size();
        rows.resize(n * num_taps * hidden);
        for (std::size_t t = 0; t < n; ++t) {
            for (std::size_t k = 0; k < num_taps; ++k) {
                const float* src = output_.hidden_taps.data() + (k * total + offset + t) * hidden;
                std::copy(src, src + hidden, rows.data() + (t * num_taps + k) * hidden);
            }
        }
        offset += n;
        const Sequence& seq = *step.seqs[i].seq;
        try {
            drafter_->observe(seq.request_id, seq.index, b.past_len, b.tokens, rows);
        } catch (const std::exception& e) {
            MSA_LOG_WARN("request {}: the drafter failed to take the step's hidden states: {}", seq.request_id,
                         e.what());
        }
    }
}

void Engine::run_step() {
    if (drafter_ != nullptr && config_.num_speculative_tokens > 0) propose_drafts();
    ScheduledStep step = scheduler_->schedule();
    for (Sequence* seq : step.admitted) mark_started(*requests_.at(seq->request_id));
    MSA_CHECK(!step.empty(), "the scheduler found no work for {} running and {} waiting sequences.",
              scheduler_->num_running(), scheduler_->num_waiting());

    const std::int32_t vocab = model_.vocab_size();
    output_.logits.clear();
    try {
        model_.forward(step.batch, forward_options_, output_);
        MSA_CHECK(output_.logits.size() == static_cast<std::size_t>(step.num_logits) * vocab,
                  "The model returned {} logits for {} rows of {}.", output_.logits.size(), step.num_logits, vocab);
    } catch (const std::exception& e) {
        // The model failed on this batch: fail its requests, keep serving the others.
        MSA_LOG_ERROR("model forward failed on a batch of {} sequences: {}", step.seqs.size(), e.what());
        const std::string message = fmt::format("The model failed on this request's batch: {}", e.what());
        for (const ScheduledSequence& s : step.seqs) {
            auto it = requests_.find(s.seq->request_id);
            if (it != requests_.end()) abort_request(*it->second, FinishReason::error, message);
        }
        ++live_.num_steps;
        return;
    }
    if (!forward_options_.tap_layers.empty()) pass_taps_to_drafter(step);
    scheduler_->complete_step(step);

    // Collect the rows to sample; plain samples are drawn in parallel across sequences (each sequence's result
    // depends only on its own logits, history and RNG), then everything is applied in batch order.
    struct Work {
        RequestState* rs;
        SeqState* ss;
        std::span<const float> logits;
        std::int32_t num_drafts;
        SampledToken sampled;
    };
    std::vector<Work> work;
    std::size_t row = 0;
    for (const ScheduledSequence& s : step.seqs) {
        if (s.num_logits == 0) continue;
        auto logits = std::span<const float>(output_.logits).subspan(row * vocab, std::size_t(s.num_logits) * vocab);
        row += s.num_logits;
        RequestState& rs = *requests_.at(s.seq->request_id);
        SeqState& ss = *rs.seqs[s.seq->index];
        if (!ss.finished) work.push_back({&rs, &ss, logits, s.num_drafts, {}});
    }
    sample_in_parallel(work.size(), [&](Sampler& sampler, std::size_t i) {
        Work& w = work[i];
        if (w.num_drafts == 0)
            w.sampled = sampler.sample(w.logits, w.rs->params, w.ss->history, w.ss->rng, w.ss->generated);
    });
    const auto now = EngineClock::now();
    for (Work& w : work) {
        if (w.ss->last_token_time) live_.inter_token_latency.observe(seconds(now - *w.ss->last_token_time));
        if (w.num_drafts > 0) {
            process_verify(*w.rs, *w.ss, w.logits, w.num_drafts);
        } else {
            scheduler_->append_token(w.ss->seq, w.sampled.token);
            emit_token(*w.rs, *w.ss, w.sampled.token, w.rs->params.logprobs ? &w.sampled : nullptr);
        }
        touch(*w.rs);
    }
    ++live_.num_steps;
    if (config_.check_invariants_every_step) scheduler_->check_invariants();
}

void Engine::touch(RequestState& rs) {
    if (rs.touched) return;
    rs.touched = true;
    touched_.push_back(&rs);
}

void Engine::sample_in_parallel(std::size_t count, const std::function<void(Sampler&, std::size_t)>& fn) {
    // Threads only pay off when each row is real work (a large vocabulary: ~0.1-3 ms per row at 200k); for small
    // vocabularies the fork/join (and OpenMP's spinning workers) would cost more than the sampling.
    const std::size_t vocab = static_cast<std::size_t>(model_.vocab_size());
    const std::size_t chunks = std::min<std::size_t>(count, static_cast<std::size_t>(num_threads()));
    if (chunks <= 1 || vocab < 16384) {
        for (std::size_t i = 0; i < count; ++i) fn(sampler_, i);
        return;
    }
    while (samplers_.size() < chunks) {
        samplers_.push_back(std::make_unique<Sampler>(sampler_.config()));
    }
    parallel_for(chunks, 1, [&](std::size_t begin, std::size_t end) {
        for (std::size_t c = begin; c < end; ++c) {
            for (std::size_t i = count * c / chunks; i < count * (c + 1) / chunks; ++i) fn(*samplers_[c], i);
        }
    });
}

void Engine::process_verify(RequestState& rs, SeqState& ss, std::span<const float> logits, std::int32_t num_drafts) {
    const std::int32_t vocab = model_.vocab_size();
    const std::vector<std::int32_t> drafts(ss.seq.draft_tokens.begin(), ss.seq.draft_tokens.begin() + num_drafts);
    // Target distribution of row i: the request's sampling distribution given the tokens before it (the drafts
    // before i count as generated for penalties).
    probs_.resize(static_cast<std::size_t>(num_drafts + 1) * vocab);
    for (std::int32_t i = 0; i <= num_drafts; ++i) {
        sampler_.probabilities(logits.subspan(std::size_t(i) * vocab, vocab), rs.params, ss.history, row_probs_);
        std::copy(row_probs_.begin(), row_probs_.end(), probs_.begin() + std::size_t(i) * vocab);
        if (i < num_drafts) ss.history.add_output(drafts[i]);
    }
    ss.history.remove_outputs(drafts);
    std::span<const float> q;
    if (!ss.draft_probs.empty()) q = std::span<const float>(ss.draft_probs).first(std::size_t(num_drafts) * vocab);
    const VerifyResult result = verify_probabilistic(drafts, probs_, q, vocab, ss.rng, ss.generated);

    ++live_.spec_num_drafts;
    live_.spec_num_draft_tokens += num_drafts;
    live_.spec_num_accepted_tokens += result.num_accepted;
    for (std::int32_t j = 0; j < result.num_accepted; ++j) ++live_.spec_accepted_per_position[j];

    scheduler_->accept_drafts(ss.seq, result.num_accepted);
    for (std::size_t j = 0; j < result.tokens.size() && !ss.finished; ++j) {
        const std::int32_t token = result.tokens[j];
        if (j + 1 == result.tokens.size()) scheduler_->append_token(ss.seq, token);
        SampledToken lp;
        if (rs.params.logprobs) {
            lp = sampler_.describe(logits.subspan(j * vocab, vocab), rs.params, ss.history, token);
        }
        emit_token(rs, ss, token, rs.params.logprobs ? &lp : nullptr);
    }
}

void Engine::emit_token(RequestState& rs, SeqState& ss, std::int32_t token, SampledToken* logprobs) {
    const SamplingParams& p = rs.params;
    const auto now = EngineClock::now();
    ss.history.add_output(token);
    ++ss.generated;
    ++live_.generation_tokens;
    ss.delta.token_ids.push_back(token);
    if (logprobs != nullptr) ss.delta.logprobs.push_back(std::move(*logprobs));
    ss.dirty = true;
    ss.last_token_time = now;
    rs.last_token = now;
    if (!rs.first_token) {
        rs.first_token = now;
        live_.ttft.observe(seconds(now - rs.arrival));
        live_.prompt_tokens += rs.num_prompt;
    }

    // Stop checks in vLLM's order: nothing stops before min_tokens; then EOS, stop token ids, stop strings (on
    // the text), and finally the length limits.
    const bool active = ss.generated >= p.min_tokens;
    const bool eos = !p.ignore_eos && contains(config_.eos_token_ids, token);
    const bool stop_token = active && (eos || contains(p.stop_token_ids, token));
    if (text_ != nullptr) {
        std::string piece;
        const bool skip =
            (stop_token && !p.include_stop_str_in_output) || (p.skip_special_tokens && text_->is_special(token));
        if (!skip) ss.utf8.push(text_->token_bytes(token), piece);
        StopStringMatcher::Result r = ss.stops.push(piece, active);
        ss.delta.text += r.text;
        if (r.matched) {
            ss.delta.stop_reason = std::move(*r.matched);
            ss.utf8 = Utf8Assembler();  // bytes after the stop string are dropped with it
            finish_sample(rs, ss, FinishReason::stop);
            return;
        }
    }
    if (stop_token) {
        if (!eos) ss.delta.stop_reason = token;
        finish_sample(rs, ss, FinishReason::stop);
    } else if (ss.generated >= rs.max_tokens || ss.seq.num_tokens() >= config_.scheduler.max_model_len) {
        finish_sample(rs, ss, FinishReason::length);
    }
}

void Engine::finish_sample(RequestState& rs, SeqState& ss, FinishReason reason) {
    if (text_ != nullptr) {
        std::string tail;
        ss.utf8.flush(tail);
        ss.delta.text += ss.stops.flush();  // held-back text was not a stop string after all
        ss.delta.text += tail;
    }
    ss.finished = true;
    ss.delta.finish_reason = reason;
    ss.dirty = true;
    scheduler_->finish(ss.seq);  // pages go back now
    ++rs.num_finished;
    ++live_.finished[static_cast<int>(reason)];
    if (rs.num_finished == static_cast<std::int32_t>(rs.seqs.size())) complete_request(rs);
}

void Engine::abort_request(RequestState& rs, FinishReason reason, const std::string& error) {
    if (rs.usage) return;  // already complete, its final event is pending
    for (auto& ss : rs.seqs) {
        if (ss->finished) continue;
        ss->finished = true;
        ss->delta.finish_reason = reason;
        ss->dirty = true;
        scheduler_->finish(ss->seq);
        ++rs.num_finished;
        ++live_.finished[static_cast<int>(reason)];
    }
    rs.error = error;
    complete_request(rs);
    touch(rs);
}

void Engine::publish_touched() {
    std::vector<RequestState*> touched;
    touched.swap(touched_);
    for (RequestState* rs : touched) {
        rs->touched = false;
        publish(*rs);
    }
}

void Engine::complete_request(RequestState& rs) {
    const auto now = EngineClock::now();
    Usage usage;
    usage.prompt_tokens = rs.num_prompt;
    for (const auto& ss : rs.seqs) usage.completion_tokens += ss->generated;
    usage.cached_tokens = std::max(0, std::min(rs.num_prompt, rs.seqs[0]->seq.num_cached_tokens));
    RequestTimings t;
    t.e2e = seconds(now - rs.arrival);
    live_.e2e_latency.observe(t.e2e);
    if (rs.first_scheduled) {
        t.queue = seconds(*rs.first_scheduled - rs.arrival);
        live_.queue_time.observe(t.queue);
    }
    if (rs.first_token) {
        t.ttft = seconds(*rs.first_token - rs.arrival);
        t.prefill = rs.first_scheduled ? seconds(*rs.first_token - *rs.first_scheduled) : 0.0;
        t.decode = seconds(*rs.last_token - *rs.first_token);
        live_.prefill_time.observe(t.prefill);
        live_.decode_time.observe(t.decode);
    }
    rs.usage = usage;
    rs.timings = t;
}

void Engine::publish(RequestState& rs) {
    RequestEvent event;
    for (auto& ss : rs.seqs) {
        if (!ss->dirty) continue;
        ss->delta.index = ss->seq.index;
        event.samples.push_back(std::move(ss->delta));
        ss->delta = SampleDelta();
        ss->dirty = false;
    }
    if (!rs.usage) {
        if (!event.samples.empty()) rs.handle->push(std::move(event));
        return;
    }
    event.finished = true;
    event.usage = rs.usage;
    event.timings = rs.timings;
    event.error = rs.error;
    {
        std::lock_guard lock(shared_->mu);
        shared_->live.erase(rs.id);
        if (!rs.started) --shared_->unstarted;
    }
    MSA_LOG_DEBUG("request {} {} finished: {} prompt tokens ({} cached), {} generated, {:.3f} s{}{}", rs.id,
                  rs.external_id, rs.usage->prompt_tokens, rs.usage->cached_tokens, rs.usage->completion_tokens,
                  rs.timings->e2e, rs.error.empty() ? "" : ", error: ", rs.error);
    std::shared_ptr<RequestHandle> handle = rs.handle;
    const std::uint64_t id = rs.id;
    requests_.erase(id);  // destroys rs
    if (drafter_ != nullptr) {
        try {
            drafter_->release(id);
        } catch (const std::exception& e) {
            MSA_LOG_WARN("request {}: the drafter failed to release its state: {}", id, e.what());
        }
    }
    handle->push(std::move(event));
}

}  // namespace msa
