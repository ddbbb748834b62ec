#include "server/generation_session.h"

#include "core/log.h"

namespace msa::server {

GenerationSession::GenerationSession(ServingBackend& backend, ServingMetrics& metrics, Clock::time_point arrival)
    : backend_(backend), metrics_(metrics), arrival_(arrival) {}

GenerationSession::~GenerationSession() {
    if (!all_finished()) cancel_all();
}

void GenerationSession::start(std::vector<GenerationRequest> sequences, std::size_t choices_per_prompt) {
    const std::size_t n = sequences.size();
    choices_per_prompt_ = std::max<std::size_t>(1, choices_per_prompt);
    prompt_counted_.assign((n + choices_per_prompt_ - 1) / choices_per_prompt_, false);
    done_.assign(n, false);
    prompt_tokens_.assign(n, 0);
    cached_tokens_.assign(n, 0);
    last_token_at_.assign(n, arrival_);
    for (std::size_t i = 0; i < n; ++i) prompt_tokens_[i] = static_cast<std::int64_t>(sequences[i].prompt_tokens.size());
    for (std::size_t i = 0; i < n; ++i) {
        std::weak_ptr<Channel> channel = channel_;
        const int choice = static_cast<int>(i);
        try {
            const auto handle = backend_.submit(std::move(sequences[i]), [channel, choice](GenerationEvent&& e) {
                // The request may be gone already (client disconnected): then the event has nowhere to go.
                if (auto c = channel.lock()) {
                    {
                        std::lock_guard lock(c->mutex);
                        c->events.push_back({choice, std::move(e)});
                    }
                    c->cv.notify_one();
                }
            });
            std::lock_guard lock(cancel_mutex_);
            handles_.push_back(handle);
        } catch (...) {
            cancel_all();
            // Nothing of the cancelled sequences matters any more.
            done_.assign(n, true);
            finished_ = handles_.size();
            throw;
        }
    }
}

std::vector<ChoiceEvent> GenerationSession::wait(std::chrono::milliseconds timeout) {
    std::vector<ChoiceEvent> out;
    {
        std::unique_lock lock(channel_->mutex);
        channel_->cv.wait_for(lock, timeout, [&] { return !channel_->events.empty(); });
        while (!channel_->events.empty()) {
            out.push_back(std::move(channel_->events.front()));
            channel_->events.pop_front();
        }
    }
    const auto now = Clock::now();
    for (auto& [choice, e] : out) {
        if (choice < 0 || static_cast<std::size_t>(choice) >= done_.size() || done_[choice]) continue;
        if (e.prompt_tokens > 0) prompt_tokens_[choice] = e.prompt_tokens;
        if (e.cached_tokens > 0) cached_tokens_[choice] = e.cached_tokens;
        if (const std::size_t group = static_cast<std::size_t>(choice) / choices_per_prompt_; !prompt_counted_[group]) {
            prompt_counted_[group] = true;
            metrics_.add_prompt_tokens(prompt_tokens_[choice]);
        }
        if (!e.token_ids.empty()) {
            const auto n = static_cast<std::int64_t>(e.token_ids.size());
            generated_ += n;
            metrics_.add_generation_tokens(n);
            if (!first_token_seen_) {
                first_token_seen_ = true;
                metrics_.observe_time_to_first_token(std::chrono::duration<double>(now - arrival_).count());
            } else if (last_token_at_[choice] != arrival_) {
                metrics_.observe_inter_token_latency(std::chrono::duration<double>(now - last_token_at_[choice]).count());
            }
            last_token_at_[choice] = now;
        }
        if (e.finished) {
            done_[choice] = true;
            ++finished_;
            if (e.timings && !timings_) timings_ = e.timings;
        }
    }
    return out;
}

void GenerationSession::cancel_all() {
    std::lock_guard lock(cancel_mutex_);
    for (std::size_t i = 0; i < handles_.size(); ++i) {
        if (i < done_.size() && done_[i]) continue;
        try {
            backend_.cancel(handles_[i]);
        } catch (const std::exception& e) {
            MSA_LOG_WARN("cancelling a sequence failed: {}", e.what());
        }
    }
}

void GenerationSession::record(const std::string& finish_reason) {
    if (recorded_) return;
    recorded_ = true;
    std::int64_t prompt = 0;
    for (const auto p : prompt_tokens_) prompt = std::max(prompt, p);
    metrics_.record_finished({finish_reason, std::chrono::duration<double>(Clock::now() - arrival_).count(), prompt,
                              generated_, timings_});
}

}  // namespace msa::server
