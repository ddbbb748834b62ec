#include "tokenizer/unicode.h"

#include "tokenizer/utf8.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <span>

namespace msa {
namespace {

struct CategoryRun {
    char32_t start;
    std::uint8_t category;
};

struct LowercaseMapping {
    char32_t cp;
    const char* utf8;
};

#include "tokenizer/unicode_tables.inc"

constexpr char32_t kMaxCodePoint = 0x10FFFF;

bool in_ranges(std::span<const CodePointRange> ranges, char32_t cp) {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                               [](char32_t value, const CodePointRange& r) { return value < r.first; });
    if (it == ranges.begin()) return false;
    --it;
    return cp <= it->last;
}

UnicodeCategory category_by_search(char32_t cp) {
    const auto* begin = std::begin(kCategoryRuns);
    const auto* end = std::end(kCategoryRuns);
    const auto* it = std::upper_bound(begin, end, cp, [](char32_t value, const CategoryRun& r) { return value < r.start; });
    return static_cast<UnicodeCategory>((it - 1)->category);
}

// The Basic Multilingual Plane is looked up in a flat table; the rest by binary search.
const std::array<std::uint8_t, 0x10000>& bmp_categories() {
    static const auto table = [] {
        std::array<std::uint8_t, 0x10000> t{};
        const std::size_t runs = std::size(kCategoryRuns);
        for (std::size_t i = 0; i < runs && kCategoryRuns[i].start < 0x10000; ++i) {
            const char32_t end = (i + 1 < runs) ? std::min<char32_t>(kCategoryRuns[i + 1].start, 0x10000) : 0x10000;
            std::fill(t.begin() + kCategoryRuns[i].start, t.begin() + end, kCategoryRuns[i].category);
        }
        return t;
    }();
    return table;
}

bool category_in(UnicodeCategory c, UnicodeCategory first, UnicodeCategory last) {
    return c >= first && c <= last;
}

// Appends the ranges of all code points whose category lies in [first, last].
void category_ranges(UnicodeCategory first, UnicodeCategory last, std::vector<CodePointRange>& out) {
    const std::size_t runs = std::size(kCategoryRuns);
    for (std::size_t i = 0; i < runs; ++i) {
        const auto c = static_cast<UnicodeCategory>(kCategoryRuns[i].category);
        if (!category_in(c, first, last)) continue;
        const char32_t lo = kCategoryRuns[i].start;
        const char32_t hi = (i + 1 < runs) ? kCategoryRuns[i + 1].start - 1 : kMaxCodePoint;
        if (!out.empty() && out.back().last + 1 == lo) {
            out.back().last = hi;
        } else {
            out.push_back({lo, hi});
        }
    }
}

struct ClassName {
    std::string_view name;
    UnicodeCategory first;
    UnicodeCategory last;
};

constexpr ClassName kCategoryClasses[] = {
    {"L", UnicodeCategory::Lu, UnicodeCategory::Lo},  {"M", UnicodeCategory::Mn, UnicodeCategory::Me},
    {"N", UnicodeCategory::Nd, UnicodeCategory::No},  {"P", UnicodeCategory::Pc, UnicodeCategory::Po},
    {"S", UnicodeCategory::Sm, UnicodeCategory::So},  {"Z", UnicodeCategory::Zs, UnicodeCategory::Zp},
    {"C", UnicodeCategory::Cc, UnicodeCategory::Cn},  {"Lu", UnicodeCategory::Lu, UnicodeCategory::Lu},
    {"Ll", UnicodeCategory::Ll, UnicodeCategory::Ll}, {"Lt", UnicodeCategory::Lt, UnicodeCategory::Lt},
    {"Lm", UnicodeCategory::Lm, UnicodeCategory::Lm}, {"Lo", UnicodeCategory::Lo, UnicodeCategory::Lo},
    {"Mn", UnicodeCategory::Mn, UnicodeCategory::Mn}, {"Mc", UnicodeCategory::Mc, UnicodeCategory::Mc},
    {"Me", UnicodeCategory::Me, UnicodeCategory::Me}, {"Nd", UnicodeCategory::Nd, UnicodeCategory::Nd},
    {"Nl", UnicodeCategory::Nl, UnicodeCategory::Nl}, {"No", UnicodeCategory::No, UnicodeCategory::No},
    {"Pc", UnicodeCategory::Pc, UnicodeCategory::Pc}, {"Pd", UnicodeCategory::Pd, UnicodeCategory::Pd},
    {"Ps", UnicodeCategory::Ps, UnicodeCategory::Ps}, {"Pe", UnicodeCategory::Pe, UnicodeCategory::Pe},
    {"Pi", UnicodeCategory::Pi, UnicodeCategory::Pi}, {"Pf", UnicodeCategory::Pf, UnicodeCategory::Pf},
    {"Po", UnicodeCategory::Po, UnicodeCategory::Po}, {"Sm", UnicodeCategory::Sm, UnicodeCategory::Sm},
    {"Sc", UnicodeCategory::Sc, UnicodeCategory::Sc}, {"Sk", UnicodeCategory::Sk, UnicodeCategory::Sk},
    {"So", UnicodeCategory::So, UnicodeCategory::So}, {"Zs", UnicodeCategory::Zs, UnicodeCategory::Zs},
    {"Zl", UnicodeCategory::Zl, UnicodeCategory::Zl}, {"Zp", UnicodeCategory::Zp, UnicodeCategory::Zp},
    {"Cc", UnicodeCategory::Cc, UnicodeCategory::Cc}, {"Cf", UnicodeCategory::Cf, UnicodeCategory::Cf},
    {"Co", UnicodeCategory::Co, UnicodeCategory::Co}, {"Cs", UnicodeCategory::Cs, UnicodeCategory::Cs},
    {"Cn", UnicodeCategory::Cn, UnicodeCategory::Cn}, {"d", UnicodeCategory::Nd, UnicodeCategory::Nd},
};

}  // namespace

UnicodeCategory unicode_category(char32_t cp) {
    if (cp < 0x10000) return static_cast<UnicodeCategory>(bmp_categories()[cp]);
    if (cp > kMaxCodePoint) return UnicodeCategory::Cn;
    return category_by_search(cp);
}

bool is_unicode_white_space(char32_t cp) { return in_ranges(kWhiteSpaceRanges, cp); }

bool is_unicode_word(char32_t cp) { return in_ranges(kWordRanges, cp); }

bool is_unicode_numeric(char32_t cp) { return in_ranges(kNumericRanges, cp); }

bool is_hf_punctuation(char32_t cp) { return in_ranges(kPunctuationRanges, cp); }

void append_lowercase(std::string& out, char32_t cp) {
    const auto* begin = std::begin(kLowercaseMappings);
    const auto* end = std::end(kLowercaseMappings);
    const auto* it = std::lower_bound(begin, end, cp, [](const LowercaseMapping& m, char32_t value) { return m.cp < value; });
    if (it != end && it->cp == cp) {
        out += it->utf8;
    } else {
        utf8::append(out, cp);
    }
}

bool is_assigned_after_unicode9(char32_t cp) { return in_ranges(kAssignedAfterUnicode9Ranges, cp); }

bool unicode_class_ranges(std::string_view name, std::vector<CodePointRange>& out) {
    out.clear();
    if (name == "s") {
        out.assign(std::begin(kWhiteSpaceRanges), std::end(kWhiteSpaceRanges));
        return true;
    }
    if (name == "w") {
        out.assign(std::begin(kWordRanges), std::end(kWordRanges));
        return true;
    }
    for (const ClassName& c : kCategoryClasses) {
        if (c.name == name) {
            category_ranges(c.first, c.last, out);
            return true;
        }
    }
    return false;
}

const char* unicode_tables_oracle() { return kUnicodeTablesOracle; }

}  // namespace msa
