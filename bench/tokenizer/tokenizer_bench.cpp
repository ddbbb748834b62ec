// Tokenizer throughput: loads a tokenizer.json, then encodes a text file line by line ("lines", like chat messages)
// and as one document ("document"), decodes and stream-decodes the ids, and prints one JSON object with the figures.
// Times are per-thread CPU time (what the tokenizer costs, immune to other processes on a shared machine) and wall
// time; each pass is repeated and the best and median repetitions are reported. The first "lines" pass runs with
// a cold piece cache and is reported separately. bench/tokenizer/run_tokenizer_bench.sh drives it.
//
// Usage: tokenizer_bench TOKENIZER_JSON TEXT_FILE [REPETITIONS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace {

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double wall_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Timing {
    double cpu;
    double wall;
};

Timing measure(const std::function<void()>& body) {
    const double c0 = thread_cpu_seconds();
    const double w0 = wall_seconds();
    body();
    return {thread_cpu_seconds() - c0, wall_seconds() - w0};
}

// Best and median of repeated timings, as throughput (amount / second).
nlohmann::json throughput(std::vector<Timing> timings, double amount, const char* unit) {
    std::vector<double> cpu, wall;
    for (const Timing& t : timings) {
        cpu.push_back(amount / t.cpu);
        wall.push_back(amount / t.wall);
    }
    std::sort(cpu.begin(), cpu.end());
    std::sort(wall.begin(), wall.end());
    return {{"unit", unit},
            {"cpu_best", cpu.back()},
            {"cpu_median", cpu[cpu.size() / 2]},
            {"wall_best", wall.back()},
            {"wall_median", wall[wall.size() / 2]},
            {"repetitions", timings.size()}};
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s TOKENIZER_JSON TEXT_FILE [REPETITIONS]\n", argv[0]);
        return 2;
    }
    const int repetitions = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
    try {
        std::ifstream in(argv[2], std::ios::binary);
        MSA_CHECK(in.good(), "cannot read {}", argv[2]);
        std::stringstream contents;
        contents << in.rdbuf();
        const std::string text = contents.str();
        std::vector<std::string> lines;
        {
            std::istringstream stream(text);
            std::string line;
            while (std::getline(stream, line)) lines.push_back(line + "\n");
        }
        const double megabytes = static_cast<double>(text.size()) / 1e6;

        msa::Tokenizer* tokenizer = nullptr;
        std::optional<msa::Tokenizer> holder;
        const Timing load = measure([&] { holder.emplace(msa::Tokenizer::from_file(argv[1])); });
        tokenizer = &*holder;

        std::vector<msa::TokenId> ids;
        std::size_t line_tokens = 0;
        const auto encode_lines = [&] {
            line_tokens = 0;
            for (const std::string& line : lines) {
                ids.clear();
                tokenizer->encode(line, false, ids);
                line_tokens += ids.size();
            }
        };
        const Timing cold = measure(encode_lines);
        std::vector<Timing> warm;
        for (int r = 0; r < repetitions; ++r) warm.push_back(measure(encode_lines));

        std::vector<msa::TokenId> document_ids;
        std::vector<Timing> document;
        for (int r = 0; r < repetitions; ++r) {
            document.push_back(measure([&] {
                document_ids.clear();
                tokenizer->encode(text, false, document_ids);
            }));
        }

        std::string decoded;
        std::vector<Timing> decode;
        for (int r = 0; r < repetitions; ++r) decode.push_back(measure([&] { decoded = tokenizer->decode(document_ids); }));
        std::vector<Timing> stream;
        for (int r = 0; r < repetitions; ++r) {
            stream.push_back(measure([&] {
                msa::StreamDecoder decoder(*tokenizer);
                std::string out;
                for (const msa::TokenId id : document_ids) decoder.push(id, out);
                decoder.flush(out);
            }));
        }

        const nlohmann::json result = {
            {"tokenizer", argv[1]},
            {"text", argv[2]},
            {"bytes", text.size()},
            {"lines", lines.size()},
            {"tokens_lines", line_tokens},
            {"tokens_document", document_ids.size()},
            {"round_trip_exact", decoded == text},
            {"load_seconds", {{"cpu", load.cpu}, {"wall", load.wall}}},
            {"encode_lines_cold_MBps", {{"cpu", megabytes / cold.cpu}, {"wall", megabytes / cold.wall}}},
            {"encode_lines", throughput(warm, megabytes, "MB/s")},
            {"encode_document", throughput(document, megabytes, "MB/s")},
            {"decode_document", throughput(decode, megabytes, "MB/s")},
            {"stream_decode_tokens", throughput(stream, static_cast<double>(document_ids.size()) / 1e6, "Mtokens/s")},
        };
        std::printf("%s\n", result.dump().c_str());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
        return 1;
    }
}
