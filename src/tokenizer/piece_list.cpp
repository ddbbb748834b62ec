#include "tokenizer/piece_list.h"

#include "tokenizer/byte_level.h"

namespace msa {

void PieceList::materialize() {
    if (!byte_level) return;
    thread_local std::string mapped;
    mapped.clear();
    for (Piece& piece : pieces) {
        const std::string_view content = view(piece);
        const auto begin = static_cast<std::uint32_t>(mapped.size());
        if (piece.token >= 0) {
            mapped.append(content);
        } else {
            byte_level::append_mapped(mapped, content);
        }
        piece.begin = begin;
        piece.end = static_cast<std::uint32_t>(mapped.size());
    }
    text.swap(mapped);
    byte_level = false;
}

}  // namespace msa
