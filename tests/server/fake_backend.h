// A ServingBackend for tests: bytes are tokens (vocabulary 256), the chat template is a trivial one, and each
// sequence "generates" a scripted text, a few bytes per event, on its own thread. It honours max_tokens, stop
// strings, logprobs (made-up values), cancellation and a bounded number of concurrent sequences, and records
// what it was asked for so that tests can check the server's side of the contract.
#pragma once

#include "server/serving_backend.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace msa::server::testing {

class FakeBackend final : public ServingBackend {
public:
    // Text a sequence generates, from its request and the rendered prompt's text.
    using Script = std::function<std::string(const GenerationRequest&, const std::string& prompt)>;

    struct Options {
        std::string name = "fake-model";
        std::int64_t max_model_len = 4096;
        std::size_t bytes_per_event = 3;
        std::chrono::milliseconds first_event_delay{0};  // "prefill"
        std::chrono::milliseconds event_delay{0};
        std::size_t max_running = 64;                    // more concurrent sequences: 429
        std::int64_t cached_tokens = 0;
        bool thinking_prefill = false;                   // template ends with <mm:think> when thinking_mode enabled
    };

    FakeBackend(Options options, Script script) : options_(std::move(options)), script_(std::move(script)) {}
    ~FakeBackend() override {
        std::map<std::uint64_t, std::thread> threads;
        {
            std::lock_guard lock(mutex_);
            for (auto& [h, s] : sequences_) s.cancel = true;
            threads.swap(threads_);
        }
        for (auto& [h, t] : threads) t.join();
    }

    ModelInfo model_info() const override { return {options_.name, "/models/fake", options_.max_model_len, 1700000000}; }
    bool ready() const override { return ready_; }
    std::vector<std::int32_t> tokenize(std::string_view text, bool) const override {
        std::vector<std::int32_t> ids;
        for (const unsigned char c : text) ids.push_back(c);
        return ids;
    }
    std::string detokenize(std::span<const std::int32_t> tokens) const override {
        std::string s;
        for (const auto t : tokens) s += static_cast<char>(t);
        return s;
    }
    std::string token_text(std::int32_t token) const override { return std::string(1, static_cast<char>(token)); }
    std::int64_t vocab_size() const override { return 256; }

    std::string render_chat(const ChatCompletionRequest& r) const override {
        std::string s;
        if (!r.tools.empty()) s += fmt::format("<|tools|>{} tools\n", r.tools.size());
        for (const auto& m : r.messages) s += fmt::format("<|{}|>{}\n", role_name(m.role), m.content.value_or(""));
        if (r.add_generation_prompt) {
            s += "<|assistant|>";
            const auto mode = r.chat_template_kwargs.value("thinking_mode", std::string());
            if (options_.thinking_prefill && mode == "enabled") s += "<mm:think>\n";
        }
        return s;
    }

    std::uint64_t submit(GenerationRequest request, GenerationCallback on_event) override {
        std::lock_guard lock(mutex_);
        if (running_ >= options_.max_running) throw too_many_requests("The fake backend's queue is full.");
        const std::uint64_t handle = next_handle_++;
        ++running_;
        ++submitted_;
        auto& seq = sequences_[handle];
        const std::string prompt = detokenize(request.prompt_tokens);
        prompts_.push_back(prompt);
        requests_.push_back(request);
        const std::string text = script_(request, prompt);
        threads_[handle] = std::thread([this, request, text, on_event = std::move(on_event), &seq] {
            generate(request, text, on_event, seq);
        });
        return handle;
    }

    void cancel(std::uint64_t handle) override {
        std::lock_guard lock(mutex_);
        if (auto it = sequences_.find(handle); it != sequences_.end() && !it->second.cancel) {
            it->second.cancel = true;
            ++cancelled_;
        }
        cv_.notify_all();
    }

    BackendStats stats() const override {
        BackendStats s;
        std::lock_guard lock(mutex_);
        s.num_running = static_cast<std::int64_t>(running_);
        s.kv_cache_usage = static_cast<double>(running_) / static_cast<double>(options_.max_running);
        s.prefix_cache_queries = 100;
        s.prefix_cache_hits = 25;
        return s;
    }

    void set_ready(bool ready) { ready_ = ready; }
    std::size_t running() const {
        std::lock_guard lock(mutex_);
        return running_;
    }
    std::size_t cancelled() const {
        std::lock_guard lock(mutex_);
        return cancelled_;
    }
    std::size_t submitted() const {
        std::lock_guard lock(mutex_);
        return submitted_;
    }
    std::vector<std::string> prompts() const {
        std::lock_guard lock(mutex_);
        return prompts_;
    }
    std::vector<GenerationRequest> requests() const {
        std::lock_guard lock(mutex_);
        return requests_;
    }
    // Makes the next sequences fail after `after_bytes` bytes with this error.
    void fail_with(std::optional<ApiError> error, std::size_t after_bytes = 0) {
        std::lock_guard lock(mutex_);
        failure_ = std::move(error);
        fail_after_ = after_bytes;
    }

private:
    struct Sequence {
        bool cancel = false;
    };

    // Waits `delay` unless cancelled first; returns true when cancelled.
    bool sleep_or_cancel(std::chrono::milliseconds delay, Sequence& seq) {
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, delay, [&] { return seq.cancel; });
        return seq.cancel;
    }

    TokenLogprob fake_logprob(unsigned char byte, std::size_t position, std::int64_t k) const {
        TokenLogprob lp{std::string(1, static_cast<char>(byte)), -0.25 * static_cast<double>(position % 4), {}};
        for (std::int64_t i = 0; i < k; ++i) {
            lp.top.push_back({std::string(1, static_cast<char>('a' + i)), -1.0 - static_cast<double>(i)});
        }
        return lp;
    }

    void generate(const GenerationRequest& request, std::string text, const GenerationCallback& on_event,
                  Sequence& seq) {
        std::optional<ApiError> failure;
        std::size_t fail_after = 0;
        {
            std::lock_guard lock(mutex_);
            failure = failure_;
            fail_after = fail_after_;
        }
        const auto max_tokens = static_cast<std::size_t>(request.sampling.max_tokens.value_or(1 << 30));
        std::string finish = "stop";
        nlohmann::json stop_reason = nullptr;
        for (const auto& stop : request.sampling.stop) {
            if (const auto at = text.find(stop); at != std::string::npos) {
                text.resize(request.sampling.include_stop_str_in_output ? at + stop.size() : at);
                stop_reason = stop;
            }
        }
        if (text.size() > max_tokens) {
            text.resize(max_tokens);
            finish = "length";
            stop_reason = nullptr;
        }
        bool cancelled = sleep_or_cancel(options_.first_event_delay, seq);
        bool failed = false;
        bool first = true;
        std::size_t pos = 0;
        while (!cancelled) {
            if (failure && (pos >= fail_after || pos == text.size())) {
                failed = true;
                break;
            }
            const std::size_t n = std::min(options_.bytes_per_event, text.size() - pos);
            GenerationEvent e;
            e.text = text.substr(pos, n);
            for (std::size_t i = 0; i < n; ++i) {
                const auto byte = static_cast<unsigned char>(text[pos + i]);
                e.token_ids.push_back(byte);
                if (request.sampling.logprobs) e.logprobs.push_back(fake_logprob(byte, pos + i, *request.sampling.logprobs));
            }
            if (first) {
                e.prompt_tokens = static_cast<std::int64_t>(request.prompt_tokens.size());
                e.cached_tokens = options_.cached_tokens;
                first = false;
            }
            pos += n;
            if (pos == text.size() && !failure) {
                // The last piece goes out together with the finish, as engines do.
                e.finished = true;
                e.finish_reason = finish;
                e.stop_reason = stop_reason;
                e.timings = RequestTimings{0.001, 0.002, 0.003};
                on_event(std::move(e));
                break;
            }
            on_event(std::move(e));
            cancelled = sleep_or_cancel(options_.event_delay, seq);
        }
        if (cancelled || failed) {
            GenerationEvent last;
            last.finished = true;
            last.finish_reason = "abort";
            if (failed) last.error = failure;
            if (first) last.prompt_tokens = static_cast<std::int64_t>(request.prompt_tokens.size());
            on_event(std::move(last));
        }
        std::lock_guard lock(mutex_);
        --running_;
    }

    Options options_;
    Script script_;
    std::atomic<bool> ready_{true};
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::map<std::uint64_t, Sequence> sequences_;
    std::map<std::uint64_t, std::thread> threads_;
    std::uint64_t next_handle_ = 1;
    std::size_t running_ = 0;
    std::size_t cancelled_ = 0;
    std::size_t submitted_ = 0;
    std::vector<std::string> prompts_;
    std::vector<GenerationRequest> requests_;
    std::optional<ApiError> failure_;
    std::size_t fail_after_ = 0;
};

}  // namespace msa::server::testing
