// A read-only view of a whole file in memory (checkpoints): mapped from the page cache, or copied once into
// anonymous memory backed by transparent huge pages (see MappedFile::Load).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace msa {

class MappedFile {
public:
    // How the bytes are brought into memory.
    //  - map: mmap of the file (4 KB page-cache pages; the first touch of each page faults it in).
    //  - huge_pages: the file read into anonymous memory aligned to 2 MB with madvise(MADV_HUGEPAGE), then made
    //    read-only. A decode step streams every weight once; in 4 KB pages (page-cache or anonymous) the MoE experts'
    //    many short matrices streamed far below the other weights, in huge pages about 1.6x faster (address
    //    translation; session 21 in docs/performance.md).
    //  - automatic: huge_pages for files of at least 4 MiB when transparent huge pages are not "never", the file
    //    fits in half of MemAvailable and MSA_WEIGHTS_HUGE_PAGES is not "0"; map otherwise. The CPU model's loader
    //    asks for this (MiniMaxM3Model::load); readers of headers only (`msa info`) map.
    enum class Load { automatic, map, huge_pages };

    MappedFile() = default;
    // Throws msa::Error naming the file when it cannot be opened, mapped or read.
    explicit MappedFile(const std::string& path, Load load = Load::map);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::uint8_t* data() const { return data_; }
    std::size_t size() const { return size_; }
    std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
    const std::string& path() const { return path_; }
    // Whether the bytes were copied into huge-page memory (Load::huge_pages, or automatic choosing it).
    bool in_huge_pages() const { return huge_pages_; }

private:
    void release();

    std::string path_;
    const std::uint8_t* data_ = nullptr;
    std::size_t size_ = 0;
    void* map_base_ = nullptr;  // what release() unmaps
    std::size_t map_size_ = 0;
    bool huge_pages_ = false;
};

}  // namespace msa
