// Added tokens of tokenizer.json ("added_tokens"): special tokens such as <|im_start|> and other tokens added on top
// of the model vocabulary. They are found in the text before anything else happens, exactly as Hugging Face does:
// tokens with normalized=false are matched in the raw text, the others in the normalized text of the remaining
// pieces; the leftmost match wins, and the longest one at that position; single_word, lstrip and rstrip are applied
// to each match as in Hugging Face's AddedVocabulary.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tokenizer/bpe_model.h"
#include "tokenizer/piece_list.h"

namespace msa {

class Normalizer;

struct AddedToken {
    std::string content;
    TokenId id = -1;
    bool special = false;
    bool single_word = false;
    bool lstrip = false;
    bool rstrip = false;
    bool normalized = true;
};

class AddedVocabulary {
public:
    // Registers the tokens in file order, giving each the id Hugging Face would: its id in the model vocabulary or
    // an earlier added token with the same content, else the next free id. `file_ids` are the ids written in the
    // file; a mismatch is logged as a warning. The normalizer (may be null) normalizes normalized tokens' patterns.
    void add(std::vector<AddedToken> tokens, const std::vector<TokenId>& file_ids, const BpeModel& model,
             const Normalizer* normalizer);

    // Cuts the raw `text` into pieces and added tokens, normalizing the pieces in between.
    void extract_and_normalize(std::string_view text, const Normalizer* normalizer, PieceList& out) const;

    const AddedToken* find_by_id(TokenId id) const;
    std::optional<TokenId> find_by_content(std::string_view content) const;
    bool is_special_content(std::string_view content) const {
        return special_contents_.find(std::string(content)) != special_contents_.end();
    }
    const std::vector<AddedToken>& tokens() const { return tokens_; }

private:
    // Matches a set of literal patterns, leftmost first and longest at a position (Aho-Corasick LeftmostLongest).
    class Matcher {
    public:
        void build(std::vector<std::pair<std::string, std::size_t>> patterns);  // (pattern, index into tokens_)
        // The leftmost-longest match starting at or after `from`; false if none.
        bool find(std::string_view text, std::size_t from, std::size_t& begin, std::size_t& end,
                  std::size_t& token_index) const;
        bool empty() const { return patterns_.empty(); }

    private:
        std::vector<std::pair<std::string, std::size_t>> patterns_;  // sorted by first byte, then longest first
        std::array<std::uint32_t, 257> first_byte_start_{};          // patterns_ index range per first byte
    };

    // Appends to `out` the pieces of text[begin, end): unmatched spans as pieces, matches as token pieces.
    void split(const Matcher& matcher, std::string_view text, std::vector<Piece>& out, std::uint32_t offset) const;

    std::vector<AddedToken> tokens_;  // in registration order
    std::unordered_map<TokenId, std::size_t> index_by_id_;
    std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>> id_by_content_;
    std::unordered_set<std::string> special_contents_;
    Matcher raw_matcher_;
    Matcher normalized_matcher_;
};

}  // namespace msa
