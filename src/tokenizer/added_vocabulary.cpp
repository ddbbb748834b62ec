#include "tokenizer/added_vocabulary.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace msa {
namespace {

char32_t last_char(std::string_view text) {
    std::size_t start = text.size() - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    return utf8::decode(text, start);
}

char32_t first_char(std::string_view text) {
    std::size_t pos = 0;
    return utf8::decode(text, pos);
}

// Start of the run of whitespace that ends `text` (text.size() if there is none).
std::size_t trailing_space_start(std::string_view text) {
    std::size_t end = text.size();
    while (end > 0) {
        std::size_t start = end - 1;
        while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        std::size_t pos = start;
        if (!is_unicode_white_space(utf8::decode(text, pos))) break;
        end = start;
    }
    return end;
}

// Length of the run of whitespace that starts `text`.
std::size_t leading_space_length(std::string_view text) {
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t next = pos;
        if (!is_unicode_white_space(utf8::decode(text, next))) break;
        pos = next;
    }
    return pos;
}

}  // namespace

void AddedVocabulary::Matcher::build(std::vector<std::pair<std::string, std::size_t>> patterns) {
    // Stable sort keeps registration order among equal patterns, like the pattern order of an Aho-Corasick build.
    std::stable_sort(patterns.begin(), patterns.end(), [](const auto& a, const auto& b) {
        const auto fa = static_cast<unsigned char>(a.first[0]);
        const auto fb = static_cast<unsigned char>(b.first[0]);
        if (fa != fb) return fa < fb;
        return a.first.size() > b.first.size();
    });
    patterns_ = std::move(patterns);
    std::size_t index = 0;
    for (unsigned b = 0; b < 256; ++b) {
        first_byte_start_[b] = static_cast<std::uint32_t>(index);
        while (index < patterns_.size() && static_cast<unsigned char>(patterns_[index].first[0]) == b) ++index;
    }
    first_byte_start_[256] = static_cast<std::uint32_t>(patterns_.size());
}

bool AddedVocabulary::Matcher::find(std::string_view text, std::size_t from, std::size_t& begin, std::size_t& end,
                                    std::size_t& token_index) const {
    if (patterns_.empty()) return false;
    for (std::size_t p = from; p < text.size(); ++p) {
        const auto b = static_cast<unsigned char>(text[p]);
        const std::uint32_t first = first_byte_start_[b];
        const std::uint32_t last = first_byte_start_[b + 1];
        for (std::uint32_t i = first; i < last; ++i) {
            const std::string& pattern = patterns_[i].first;
            if (pattern.size() <= text.size() - p && std::memcmp(pattern.data(), text.data() + p, pattern.size()) == 0) {
                begin = p;
                end = p + pattern.size();
                token_index = patterns_[i].second;
                return true;
            }
        }
    }
    return false;
}

void AddedVocabulary::add(std::vector<AddedToken> tokens, const std::vector<TokenId>& file_ids, const BpeModel& model,
                          const Normalizer* normalizer) {
    const auto equal = [](const AddedToken& a, const AddedToken& b) {
        return a.content == b.content && a.special == b.special && a.single_word == b.single_word &&
               a.lstrip == b.lstrip && a.rstrip == b.rstrip && a.normalized == b.normalized;
    };
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        AddedToken& token = tokens[i];
        if (token.content.empty()) continue;
        if (token.special) special_contents_.insert(token.content);
        bool already = false;
        for (const auto& [id, index] : index_by_id_) {
            if (equal(tokens_[index], token)) already = true;
        }
        if (already) continue;
        TokenId id = -1;
        if (const auto it = id_by_content_.find(token.content); it != id_by_content_.end()) {
            id = it->second;
        } else if (const auto model_id = model.token_to_id(token.content)) {
            id = *model_id;
        } else {
            const auto vocab_size = static_cast<TokenId>(model.vocab_size());
            TokenId max_added = -1;
            for (const auto& [content, added_id] : id_by_content_) max_added = std::max(max_added, added_id);
            if (max_added < 0) {
                id = vocab_size;
            } else {
                id = (max_added >= vocab_size || vocab_size == 0) ? max_added + 1 : vocab_size;
            }
        }
        if (i < file_ids.size() && file_ids[i] != id) {
            MSA_LOG_WARN("tokenizer.json: added token \"{}\" is listed with id {} but gets id {} (as in Hugging Face "
                         "tokenizers)",
                         token.content, file_ids[i], id);
        }
        token.id = id;
        id_by_content_[token.content] = id;
        tokens_.push_back(token);
        index_by_id_[id] = tokens_.size() - 1;
    }

    // Matching patterns: special tokens first, then the others (Hugging Face's order), each with the flags of the
    // token its id resolves to. Normalized tokens are matched by their normalized form.
    std::vector<std::pair<std::string, std::size_t>> raw, normalized;
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
        if (tokens_[i].special) order.push_back(i);
    }
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
        if (!tokens_[i].special) order.push_back(i);
    }
    for (const std::size_t i : order) {
        const AddedToken& token = tokens_[i];
        const std::size_t target = index_by_id_.at(token.id);
        if (token.normalized) {
            std::string pattern = token.content;
            if (normalizer != nullptr) normalizer->normalize(pattern);
            if (!pattern.empty()) normalized.emplace_back(std::move(pattern), target);
        } else {
            raw.emplace_back(token.content, target);
        }
    }
    raw_matcher_.build(std::move(raw));
    normalized_matcher_.build(std::move(normalized));
}

void AddedVocabulary::split(const Matcher& matcher, std::string_view text, std::vector<Piece>& out,
                            std::uint32_t offset) const {
    std::size_t start_offset = 0;
    std::size_t search_from = 0;
    std::size_t match_begin = 0, match_end = 0, index = 0;
    while (matcher.find(text, search_from, match_begin, match_end, index)) {
        search_from = match_end;
        const AddedToken& token = tokens_[index];
        std::size_t start = match_begin;
        std::size_t stop = match_end;
        if (token.single_word) {
            const bool space_before = start == 0 || !is_unicode_word(last_char(text.substr(0, start)));
            const bool space_after = stop == text.size() || !is_unicode_word(first_char(text.substr(stop)));
            if (!space_before || !space_after) continue;
        }
        if (token.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
        if (token.rstrip) stop += leading_space_length(text.substr(stop));
        if (start_offset < start) {
            out.push_back({offset + static_cast<std::uint32_t>(start_offset), offset + static_cast<std::uint32_t>(start), -1});
        }
        out.push_back({offset + static_cast<std::uint32_t>(start), offset + static_cast<std::uint32_t>(stop), token.id});
        start_offset = stop;
    }
    if (start_offset < text.size()) {
        out.push_back({offset + static_cast<std::uint32_t>(start_offset), offset + static_cast<std::uint32_t>(text.size()), -1});
    }
}

void AddedVocabulary::extract_and_normalize(std::string_view text, const Normalizer* normalizer,
                                            PieceList& out) const {
    out.text.assign(text);
    out.pieces.clear();
    out.byte_level = false;
    if (raw_matcher_.empty()) {
        if (!text.empty()) out.pieces.push_back({0, static_cast<std::uint32_t>(text.size()), -1});
    } else {
        split(raw_matcher_, out.text, out.pieces, 0);
    }
    if (normalizer == nullptr && normalized_matcher_.empty()) return;

    thread_local std::string buffer;
    thread_local std::vector<Piece> pieces;
    thread_local std::string normalized;
    buffer.clear();
    pieces.clear();
    for (const Piece& piece : out.pieces) {
        const auto offset = static_cast<std::uint32_t>(buffer.size());
        if (piece.token >= 0) {
            buffer.append(out.view(piece));
            pieces.push_back({offset, static_cast<std::uint32_t>(buffer.size()), piece.token});
            continue;
        }
        normalized.assign(out.view(piece));
        if (normalizer != nullptr) normalizer->normalize(normalized);
        buffer += normalized;
        MSA_CHECK(buffer.size() < (std::size_t{1} << 32), "the normalized text is too large to tokenize ({} bytes)",
                  buffer.size());
        split(normalized_matcher_, normalized, pieces, offset);
    }
    out.text.swap(buffer);
    out.pieces.swap(pieces);
}

const AddedToken* AddedVocabulary::find_by_id(TokenId id) const {
    const auto it = index_by_id_.find(id);
    return it == index_by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<TokenId> AddedVocabulary::find_by_content(std::string_view content) const {
    const auto it = id_by_content_.find(content);
    if (it == id_by_content_.end()) return std::nullopt;
    return it->second;
}

}  // namespace msa
