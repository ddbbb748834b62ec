#include "tokenizer/utf8.h"

#include "core/utf8_append.h"

#include <cstring>

namespace msa::utf8 {
namespace {

enum class Status { kValid, kInvalid, kIncomplete };

// Looks at the sequence starting at p (n bytes available). kValid: `length` is the sequence length. kInvalid:
// `length` bytes form one maximal ill-formed subpart (replaced by a single U+FFFD). kIncomplete: all n bytes are a
// proper prefix of some valid sequence.
Status classify(const unsigned char* p, std::size_t n, std::size_t& length) {
    const unsigned char b0 = p[0];
    if (b0 < 0x80) {
        length = 1;
        return Status::kValid;
    }
    std::size_t need = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        length = 1;
        return Status::kInvalid;
    }
    for (std::size_t i = 1; i < need; ++i) {
        if (i >= n) {
            length = n;
            return Status::kIncomplete;
        }
        const unsigned char b = p[i];
        const bool ok = (i == 1) ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
        if (!ok) {
            length = i;
            return Status::kInvalid;
        }
    }
    length = need;
    return Status::kValid;
}

}  // namespace

std::size_t valid_prefix_length(std::string_view bytes) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const std::size_t n = bytes.size();
    std::size_t i = 0;
    while (i < n) {
        // ASCII fast path, 8 bytes at a time.
        while (i + 8 <= n) {
            std::uint64_t word;
            std::memcpy(&word, p + i, 8);
            if (word & 0x8080808080808080ULL) break;
            i += 8;
        }
        if (i >= n) break;
        std::size_t length = 0;
        if (classify(p + i, n - i, length) != Status::kValid) return i;
        i += length;
    }
    return n;
}

void append(std::string& out, char32_t cp) {
    append_utf8(out, cp);
}

std::string decode_lossy(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    LossyDecoder decoder;
    decoder.push(bytes, out);
    decoder.finish(out);
    return out;
}

void LossyDecoder::push(std::string_view bytes, std::string& out) {
    std::size_t i = 0;
    // First complete (or reject) the held-back prefix, one byte at a time.
    while (pending_size_ > 0 && i < bytes.size()) {
        pending_[pending_size_++] = static_cast<unsigned char>(bytes[i++]);
        std::size_t length = 0;
        const Status status = classify(pending_, pending_size_, length);
        if (status == Status::kIncomplete) continue;
        if (status == Status::kValid) {
            out.append(reinterpret_cast<const char*>(pending_), length);
            pending_size_ = 0;
        } else {
            // The held prefix is ill-formed: one U+FFFD for it, then re-read the bytes after the maximal subpart.
            out.append(kReplacementCharacter);
            const std::size_t rest = pending_size_ - length;
            i -= rest;
            pending_size_ = 0;
        }
    }
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const std::size_t n = bytes.size();
    while (i < n) {
        const std::size_t start = i;
        while (i < n && p[i] < 0x80) ++i;
        out.append(bytes.data() + start, i - start);
        if (i >= n) break;
        std::size_t length = 0;
        const Status status = classify(p + i, n - i, length);
        if (status == Status::kValid) {
            out.append(bytes.data() + i, length);
        } else if (status == Status::kInvalid) {
            out.append(kReplacementCharacter);
        } else {
            std::memcpy(pending_, p + i, length);
            pending_size_ = length;
        }
        i += length;
    }
}

void LossyDecoder::finish(std::string& out) {
    if (pending_size_ > 0) out.append(kReplacementCharacter);
    pending_size_ = 0;
}

}  // namespace msa::utf8
