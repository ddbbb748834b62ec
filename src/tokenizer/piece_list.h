// The text of one encode call on its way through the pipeline, cut into pieces: what Hugging Face calls a
// PreTokenizedString. Pieces are byte spans of one buffer; a piece with token >= 0 is an added token that was matched
// before normalization and is passed through untouched.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace msa {

struct Piece {
    std::uint32_t begin = 0;
    std::uint32_t end = 0;
    std::int32_t token = -1;  // >= 0: an added token's id
};

struct PieceList {
    std::string text;
    std::vector<Piece> pieces;
    // When true, the content of every non-token piece is, logically, the ByteLevel mapping of its bytes (each byte
    // shown as one printable character). We keep the raw bytes and let the BPE model map them; materialize() writes
    // the mapped characters out when a later stage needs to look at them.
    bool byte_level = false;

    std::string_view view(const Piece& piece) const {
        return std::string_view(text).substr(piece.begin, piece.end - piece.begin);
    }
    // Replaces the raw bytes of every non-token piece by their ByteLevel characters and clears byte_level.
    void materialize();
};

}  // namespace msa
