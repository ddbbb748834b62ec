// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): vocabulary, ranked merges, and the encoding of
// one pre-tokenized piece into token ids, identical to Hugging Face's BPE (lowest merge rank first, leftmost first
// among equal ranks). Supports merges as ["a", "b"] pairs or legacy "a b" strings, ignore_merges, byte_fallback,
// unk_token with fuse_unk, continuing_subword_prefix and end_of_word_suffix. Results of short pieces are cached per
// thread (piece_cache.h).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace msa {

using TokenId = std::int32_t;

// Heterogeneous string hashing so that maps keyed by std::string can be searched with a std::string_view.
struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using Vocabulary = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

class BpeModel {
public:
    // Builds the model from a tokenizer.json "model" object. `where` names it in error messages.
    static std::unique_ptr<BpeModel> from_json(const nlohmann::json& config, const std::string& where);

    // Appends the ids of one piece. With `byte_level`, the piece holds raw bytes and its symbols are their
    // ByteLevel characters (see byte_level.h); otherwise the piece's own characters are the symbols.
    void tokenize(std::string_view piece, bool byte_level, std::vector<TokenId>& out) const;

    std::optional<TokenId> token_to_id(std::string_view token) const;
    // The token string of an id, or nullptr if the vocabulary has no such id.
    const std::string* id_to_token(TokenId id) const;
    // Number of vocabulary entries (what Hugging Face calls the model's vocab size).
    std::size_t vocab_size() const { return vocab_.size(); }
    // One more than the largest id in the vocabulary.
    std::size_t id_limit() const { return tokens_.size(); }
    const Vocabulary& vocabulary() const { return vocab_; }

    // The merge algorithms, exposed for tests: both must give the same result for any symbol sequence.
    void merge_by_scan(std::vector<TokenId>& symbols) const;
    void merge_by_queue(std::vector<TokenId>& symbols) const;

private:
    struct Merge {
        std::uint32_t rank;
        TokenId result;
    };
    // Open-addressing map from a (left, right) id pair to its merge.
    class MergeTable {
    public:
        void build(const std::vector<std::pair<std::uint64_t, Merge>>& entries);
        const Merge* find(TokenId left, TokenId right) const {
            const std::uint64_t key = pack(left, right);
            std::size_t slot = static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift_);
            while (true) {
                const Slot& s = slots_[slot];
                if (s.key == key) return &s.merge;
                if (s.key == kEmpty) return nullptr;
                slot = (slot + 1) & mask_;
            }
        }
        static std::uint64_t pack(TokenId left, TokenId right) {
            return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
                   static_cast<std::uint32_t>(right);
        }

    private:
        static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
        struct Slot {
            std::uint64_t key = kEmpty;
            Merge merge{};
        };
        std::vector<Slot> slots_;
        std::size_t mask_ = 0;
        unsigned shift_ = 63;
    };

    void initial_symbols(std::string_view piece, bool byte_level, std::vector<TokenId>& symbols) const;
    void merge(std::vector<TokenId>& symbols) const;

    Vocabulary vocab_;
    std::vector<std::string> tokens_;  // by id; empty string for ids the vocabulary does not have
    std::vector<bool> has_id_;
    MergeTable merges_;
    std::array<TokenId, 256> byte_symbol_{};  // id of each byte's ByteLevel character, -1 if not in the vocabulary
    bool byte_fast_path_ = false;             // every byte has a symbol and there is no prefix/suffix
    std::optional<std::string> unk_token_;
    bool fuse_unk_ = false;
    bool byte_fallback_ = false;
    bool ignore_merges_ = false;
    std::string continuing_subword_prefix_;
    std::string end_of_word_suffix_;
    std::uint64_t serial_ = 0;  // identifies this model to the per-thread piece caches (piece_cache.h)
};

}  // namespace msa
