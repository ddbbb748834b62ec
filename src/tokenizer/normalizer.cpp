#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace msa {
namespace {

namespace jf = json_fields;

bool is_ascii(std::string_view text) {
    for (const char c : text) {
        if (static_cast<unsigned char>(c) >= 0x80) return false;
    }
    return true;
}

void append_utf8proc(std::string& out, std::string_view segment, utf8proc_option_t options) {
    if (segment.empty()) return;
    if (is_ascii(segment)) {
        out.append(segment);  // ASCII is invariant under every normalization form
        return;
    }
    utf8proc_uint8_t* result = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(segment.data()),
                                            static_cast<utf8proc_ssize_t>(segment.size()), &result, options);
    MSA_CHECK(n >= 0, "Unicode normalization failed: {}", utf8proc_errmsg(n));
    out.append(reinterpret_cast<const char*>(result), static_cast<std::size_t>(n));
    std::free(result);
}

class UnicodeNormalizer final : public Normalizer {
public:
    explicit UnicodeNormalizer(UnicodeForm form) : form_(form) {}
    void normalize(std::string& text) const override {
        if (is_ascii(text)) return;
        text = normalize_unicode(text, form_);
    }

private:
    UnicodeForm form_;
};

class SequenceNormalizer final : public Normalizer {
public:
    explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
    void normalize(std::string& text) const override {
        for (const auto& part : parts_) part->normalize(text);
    }

private:
    std::vector<std::unique_ptr<Normalizer>> parts_;
};

class PrependNormalizer final : public Normalizer {
public:
    explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
    void normalize(std::string& text) const override {
        if (!text.empty()) text.insert(0, prefix_);
    }

private:
    std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
public:
    ReplaceNormalizer(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
    void normalize(std::string& text) const override {
        std::string out;
        std::size_t copied = 0;
        bool matched = false;
        pattern_.for_each_match(text, [&](std::size_t begin, std::size_t end) {
            out.append(text, copied, begin - copied);
            out += content_;
            copied = end;
            matched = true;
        });
        if (!matched) return;
        out.append(text, copied, std::string::npos);
        text = std::move(out);
    }

private:
    Regex pattern_;
    std::string content_;
};

class StripNormalizer final : public Normalizer {
public:
    StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
    void normalize(std::string& text) const override {
        std::size_t begin = 0;
        std::size_t end = text.size();
        if (left_) {
            while (begin < end) {
                std::size_t next = begin;
                if (!is_unicode_white_space(utf8::decode(text, next))) break;
                begin = next;
            }
        }
        if (right_) {
            while (end > begin) {
                std::size_t start = end - 1;
                while ((static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
                std::size_t pos = start;
                if (!is_unicode_white_space(utf8::decode(text, pos))) break;
                end = start;
            }
        }
        text = text.substr(begin, end - begin);
    }

private:
    bool left_;
    bool right_;
};

// Rust's char::to_lowercase, character by character (no context-dependent final sigma), from the oracle's table.
class LowercaseNormalizer final : public Normalizer {
public:
    void normalize(std::string& text) const override {
        std::string out;
        out.reserve(text.size());
        std::size_t pos = 0;
        while (pos < text.size()) append_lowercase(out, utf8::decode(text, pos));
        text = std::move(out);
    }
};

}  // namespace

std::string normalize_unicode(std::string_view text, UnicodeForm form) {
    utf8proc_option_t options = UTF8PROC_STABLE;
    switch (form) {
        case UnicodeForm::kNfc: options = utf8proc_option_t(options | UTF8PROC_COMPOSE); break;
        case UnicodeForm::kNfd: options = utf8proc_option_t(options | UTF8PROC_DECOMPOSE); break;
        case UnicodeForm::kNfkc: options = utf8proc_option_t(options | UTF8PROC_COMPOSE | UTF8PROC_COMPAT); break;
        case UnicodeForm::kNfkd: options = utf8proc_option_t(options | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT); break;
    }
    std::string out;
    out.reserve(text.size() + text.size() / 8);
    // A code point unknown to the oracle's Unicode 9.0 normalizer is, to it, an unassigned starter: nothing
    // decomposes, reorders or composes across it. So the text is normalized in segments between such code points,
    // which are copied unchanged.
    std::size_t segment_start = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const std::size_t char_start = pos;
        if (static_cast<unsigned char>(text[pos]) < 0x80) {
            ++pos;
            continue;
        }
        const char32_t cp = utf8::decode(text, pos);
        // U+11A7 (the code point before the first trailing jamo) never composes, but utf8proc 2.8 composes an LV
        // syllable with it; treating it as a barrier keeps it out of utf8proc's reach, which is exact since it is a
        // starter that neither composes nor decomposes.
        if (is_assigned_after_unicode9(cp) || cp == 0x11A7) {
            append_utf8proc(out, text.substr(segment_start, char_start - segment_start), options);
            out.append(text.substr(char_start, pos - char_start));
            segment_start = pos;
        }
    }
    append_utf8proc(out, text.substr(segment_start), options);
    return out;
}

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& config, const std::string& where) {
    if (config.is_null()) return nullptr;
    const std::string type = jf::type_of(config, where);
    if (type == "NFC") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfc);
    if (type == "NFD") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfd);
    if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfkc);
    if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(UnicodeForm::kNfkd);
    if (type == "Sequence") {
        const nlohmann::json& list = jf::require(config, "normalizers", where);
        MSA_CHECK(list.is_array(), "{}.normalizers must be an array", where);
        std::vector<std::unique_ptr<Normalizer>> parts;
        for (std::size_t i = 0; i < list.size(); ++i) {
            auto part = make_normalizer(list[i], jf::element(jf::child(where, "normalizers"), i));
            if (part) parts.push_back(std::move(part));
        }
        if (parts.empty()) return nullptr;  // an empty sequence changes nothing
        if (parts.size() == 1) return std::move(parts.front());
        return std::make_unique<SequenceNormalizer>(std::move(parts));
    }
    if (type == "Prepend") return std::make_unique<PrependNormalizer>(jf::required_string(config, "prepend", where));
    if (type == "Replace") {
        return std::make_unique<ReplaceNormalizer>(
            jf::pattern(jf::require(config, "pattern", where), jf::child(where, "pattern")),
            jf::required_string(config, "content", where));
    }
    if (type == "Strip") {
        return std::make_unique<StripNormalizer>(jf::boolean(config, "strip_left", true, where),
                                                 jf::boolean(config, "strip_right", true, where));
    }
    if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
    fail("{}: normalizer type \"{}\" is not supported (supported: NFC, NFD, NFKC, NFKD, Sequence, Prepend, Replace, "
         "Strip, Lowercase)",
         where, type);
}

}  // namespace msa
