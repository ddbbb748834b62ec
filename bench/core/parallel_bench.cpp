// Overhead of one parallel_for loop (core/parallel) at several thread counts: back-to-back loops of 1..64 tiny
// items, as a decode step runs dozens of small loops per token. Writes a JSON array of {"figure", "value", "unit",
// "threads", "loops", "date", "machine", "commit", "load_average"} records.
//   parallel_bench --out FILE --commit SHA [--threads 1,2,4,16] [--loops N]
#include "core/parallel.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::vector<int> parse_list(const std::string& s) {
    std::vector<int> v;
    std::stringstream in(s);
    for (std::string item; std::getline(in, item, ',');) v.push_back(std::stoi(item));
    return v;
}

double load_average() {
    std::ifstream in("/proc/loadavg");
    double l = -1;
    in >> l;
    return l;
}

// Microseconds per loop; returns a negative value if some index was not visited exactly once.
double run_loops(int threads, int loops) {
    msa::set_num_threads(threads);
    std::atomic<long> visited{0};
    long expected = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < loops; ++i) {
        const std::size_t n = 1 + static_cast<std::size_t>(i % 64);
        expected += static_cast<long>(n);
        msa::parallel_for(n, 1, [&](std::size_t b, std::size_t e) { visited += static_cast<long>(e - b); });
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return visited.load() == expected ? s * 1e6 / loops : -1.0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string out_path, commit = "unknown", thread_list = "1,2,4,16";
    int loops = 20000;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--out")
            out_path = argv[i + 1];
        else if (a == "--commit")
            commit = argv[i + 1];
        else if (a == "--threads")
            thread_list = argv[i + 1];
        else if (a == "--loops")
            loops = std::stoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "unknown argument %s\n", a.c_str());
            return 2;
        }
    }
    char date[16];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));
    nlohmann::json records = nlohmann::json::array();
    int rc = 0;
    for (int t : parse_list(thread_list)) {
        const double us = run_loops(t, loops);
        if (us < 0) {
            std::fprintf(stderr, "threads %d: an index was not visited exactly once\n", t);
            rc = 1;
            continue;
        }
        std::fprintf(stderr, "parallel_for_loop_overhead threads %2d: %8.2f us per loop\n", t, us);
        records.push_back({{"figure", "parallel_for_loop_overhead"},
                           {"value", us},
                           {"unit", "us/loop"},
                           {"threads", t},
                           {"loops", loops},
                           {"date", date},
                           {"machine", std::to_string(std::thread::hardware_concurrency()) + " CPUs"},
                           {"commit", commit},
                           {"load_average", load_average()}});
    }
    if (!out_path.empty()) std::ofstream(out_path) << records.dump(1) << "\n";
    return rc;
}
