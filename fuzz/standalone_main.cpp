// Runs a libFuzzer target over files without libFuzzer: every file given on the command line (or every file inside
// a given directory) is passed once to LLVMFuzzerTestOneInput. This is how CI replays the committed seed corpora as
// regression tests with GCC and the sanitizers; `make fuzz` builds the real libFuzzer binaries with clang.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

int run_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "cannot read %s\n", path.c_str());
        return 1;
    }
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    int failures = 0;
    std::size_t count = 0;
    for (int i = 1; i < argc; ++i) {
        const std::filesystem::path arg(argv[i]);
        if (std::filesystem::is_directory(arg)) {
            for (const auto& entry : std::filesystem::recursive_directory_iterator(arg)) {
                if (entry.is_regular_file()) {
                    failures += run_file(entry.path());
                    ++count;
                }
            }
        } else {
            failures += run_file(arg);
            ++count;
        }
    }
    std::printf("replayed %zu inputs\n", count);
    return (failures == 0 && count > 0) ? 0 : 1;
}
