#include "core/mapped_file.h"

#include "core/error.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

namespace msa {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kHugePagesMinFileBytes = std::size_t{4} << 20;

// Transparent huge pages usable by madvise (the mode is "always" or "madvise", not "never").
bool transparent_huge_pages_available() {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string mode;
    std::getline(in, mode);
    return in && mode.find("[never]") == std::string::npos;
}

// MemAvailable from /proc/meminfo in bytes, 0 when unknown.
std::size_t available_memory_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::size_t kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit) {
        if (key == "MemAvailable:") return kib * 1024;
    }
    return 0;
}

bool use_huge_pages(std::size_t size) {
    if (size < kHugePagesMinFileBytes) return false;
    if (const char* v = std::getenv("MSA_WEIGHTS_HUGE_PAGES"); v != nullptr && std::strcmp(v, "0") == 0) return false;
    static const bool thp = transparent_huge_pages_available();
    return thp && size <= available_memory_bytes() / 2;
}

}  // namespace

MappedFile::MappedFile(const std::string& path, Load load) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    MSA_CHECK(fd >= 0, "cannot open {}: {}", path, std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        fail("cannot stat {}: {}", path, std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        fail("{} is not a regular file", path);
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ == 0) {
        ::close(fd);
        return;
    }
    if (load == Load::huge_pages || (load == Load::automatic && use_huge_pages(size_))) {
        // Anonymous memory with a 2 MB-aligned start and whole huge pages, the huge-page advice given before the
        // first touch, then the file read into it and the pages made read-only.
        const std::size_t used = (size_ + kHugePage - 1) / kHugePage * kHugePage;
        map_size_ = used + kHugePage;
        void* p = ::mmap(nullptr, map_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            map_size_ = 0;
            fail("cannot allocate {} bytes for {}: {}", size_, path, std::strerror(err));
        }
        map_base_ = p;
        const auto start = (reinterpret_cast<std::uintptr_t>(p) + kHugePage - 1) / kHugePage * kHugePage;
        auto* aligned = reinterpret_cast<std::uint8_t*>(start);
        ::madvise(aligned, used, MADV_HUGEPAGE);  // advice only: without it the copy still works, in 4 KB pages
        std::size_t done = 0;
        while (done < size_) {
            const ssize_t r = ::pread(fd, aligned + done, size_ - done, static_cast<off_t>(done));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                const int err = r < 0 ? errno : EIO;
                ::close(fd);
                release();
                fail("cannot read {}: {}", path, std::strerror(err));
            }
            done += static_cast<std::size_t>(r);
        }
        ::mprotect(aligned, used, PROT_READ);
        data_ = aligned;
        huge_pages_ = true;
    } else {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            fail("cannot map {}: {}", path, std::strerror(err));
        }
        map_base_ = p;
        map_size_ = size_;
        data_ = static_cast<const std::uint8_t*>(p);
    }
    ::close(fd);
}

MappedFile::~MappedFile() {
    release();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      map_base_(std::exchange(other.map_base_, nullptr)),
      map_size_(std::exchange(other.map_size_, 0)),
      huge_pages_(std::exchange(other.huge_pages_, false)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        release();
        path_ = std::move(other.path_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        map_base_ = std::exchange(other.map_base_, nullptr);
        map_size_ = std::exchange(other.map_size_, 0);
        huge_pages_ = std::exchange(other.huge_pages_, false);
    }
    return *this;
}

void MappedFile::release() {
    if (map_base_ != nullptr) ::munmap(map_base_, map_size_);
    map_base_ = nullptr;
    map_size_ = 0;
    data_ = nullptr;
    size_ = 0;
    huge_pages_ = false;
}

}  // namespace msa
