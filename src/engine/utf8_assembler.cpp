#include "engine/utf8_assembler.h"

namespace msa {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length of the sequence a lead byte starts (0: not a lead byte) and the allowed range of its second byte
// (Unicode Table 3-7, well-formed UTF-8 byte sequences).
struct Lead {
    int length;
    unsigned char lo, hi;
};

Lead classify(unsigned char b) {
    if (b < 0x80) return {1, 0, 0};
    if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
    if (b == 0xE0) return {3, 0xA0, 0xBF};
    if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, 0x80, 0xBF};
    if (b == 0xED) return {3, 0x80, 0x9F};
    if (b == 0xF0) return {4, 0x90, 0xBF};
    if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
    if (b == 0xF4) return {4, 0x80, 0x8F};
    return {0, 0, 0};
}

}  // namespace

void Utf8Assembler::push(std::string_view bytes, std::string& out) {
    std::string buf = std::move(pending_);
    buf.append(bytes);
    pending_.clear();
    std::size_t i = 0;
    const std::size_t n = buf.size();
    while (i < n) {
        const auto b = static_cast<unsigned char>(buf[i]);
        const Lead lead = classify(b);
        if (lead.length == 0) {
            out.append(kReplacement);
            ++i;
            continue;
        }
        int j = 1;
        bool ill_formed = false;
        for (; j < lead.length; ++j) {
            if (i + j >= n) break;
            const auto c = static_cast<unsigned char>(buf[i + j]);
            const unsigned char lo = j == 1 ? lead.lo : 0x80, hi = j == 1 ? lead.hi : 0xBF;
            if (c < lo || c > hi) {
                ill_formed = true;
                break;
            }
        }
        if (ill_formed) {
            out.append(kReplacement);  // the maximal subpart buf[i, i + j) becomes one U+FFFD
            i += j;
        } else if (j < lead.length) {
            pending_.assign(buf, i, n - i);  // incomplete but valid so far: wait for more bytes
            return;
        } else {
            out.append(buf, i, lead.length);
            i += lead.length;
        }
    }
}

void Utf8Assembler::flush(std::string& out) {
    if (!pending_.empty()) out.append(kReplacement);
    pending_.clear();
}

}  // namespace msa
