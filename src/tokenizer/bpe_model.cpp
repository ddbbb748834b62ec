#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <queue>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/piece_cache.h"
#include "tokenizer/utf8.h"

namespace msa {
namespace {

namespace jf = json_fields;

constexpr std::uint32_t kNoMerge = std::numeric_limits<std::uint32_t>::max();
// Below this many symbols a linear scan for the best merge beats a priority queue.
constexpr std::size_t kScanMergeLimit = 48;

// Reads the "merges" array in either format into (left, right) string pairs.
std::vector<std::pair<std::string, std::string>> read_merges(const nlohmann::json& merges, const std::string& where) {
    MSA_CHECK(merges.is_array(), "{} must be an array, not {}", where, merges.type_name());
    std::vector<std::pair<std::string, std::string>> out;
    out.reserve(merges.size());
    std::size_t legacy_rank = 0;
    for (std::size_t i = 0; i < merges.size(); ++i) {
        const nlohmann::json& m = merges[i];
        if (m.is_array()) {
            MSA_CHECK(m.size() == 2 && m[0].is_string() && m[1].is_string(),
                      "{} must be a pair of strings like [\"a\", \"b\"], not {}", jf::element(where, i), m.dump());
            out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
        } else if (m.is_string()) {
            // Legacy "a b" lines, as written before tokenizers 0.20; "#version" header lines are skipped.
            const std::string& line = m.get_ref<const std::string&>();
            if (line.rfind("#version", 0) == 0) continue;
            ++legacy_rank;
            const std::size_t space = line.find(' ');
            MSA_CHECK(space != std::string::npos && line.find(' ', space + 1) == std::string::npos,
                      "{}: legacy merge \"{}\" (merge number {}) must be two tokens separated by one space",
                      jf::element(where, i), line, legacy_rank);
            out.emplace_back(line.substr(0, space), line.substr(space + 1));
        } else {
            fail("{} must be a [\"a\", \"b\"] pair or an \"a b\" string, not {}", jf::element(where, i), m.dump());
        }
    }
    return out;
}

}  // namespace

void BpeModel::MergeTable::build(const std::vector<std::pair<std::uint64_t, Merge>>& entries) {
    std::size_t size = 16;
    while (size * 7 < entries.size() * 10) size *= 2;  // load factor <= 0.7
    slots_.assign(size, Slot{});
    mask_ = size - 1;
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(size));
    for (const auto& [key, merge] : entries) {
        std::size_t slot = static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift_);
        while (slots_[slot].key != kEmpty && slots_[slot].key != key) slot = (slot + 1) & mask_;
        // A pair listed twice keeps its last rank, as in Hugging Face (later map inserts win).
        slots_[slot].key = key;
        slots_[slot].merge = merge;
    }
}

std::unique_ptr<BpeModel> BpeModel::from_json(const nlohmann::json& config, const std::string& where) {
    MSA_CHECK(config.is_object(), "{} must be a JSON object, not {}", where, config.type_name());
    const std::string type = jf::string(config, "type", "BPE", where);
    MSA_CHECK(type == "BPE",
              "{}: model type \"{}\" is not supported (this engine implements BPE tokenizers, such as the byte-level "
              "BPE of Qwen, Llama 3, DeepSeek and MiniMax)",
              where, type);
    const auto dropout = config.find("dropout");
    if (dropout != config.end() && !dropout->is_null()) {
        MSA_CHECK(dropout->is_number() && dropout->get<double>() == 0.0,
                  "{}.dropout is {}: BPE dropout randomizes encoding and is not supported (inference tokenizers use "
                  "null)",
                  where, dropout->dump());
    }

    auto model = std::unique_ptr<BpeModel>(new BpeModel());
    model->serial_ = PieceCache::next_model_serial();
    const nlohmann::json& vocab = jf::require(config, "vocab", where);
    MSA_CHECK(vocab.is_object(), "{}.vocab must be an object mapping token strings to ids, not {}", where,
              vocab.type_name());
    model->vocab_.reserve(vocab.size());
    TokenId max_id = -1;
    for (const auto& [token, id] : vocab.items()) {
        MSA_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0 &&
                      id.get<std::int64_t>() < std::numeric_limits<TokenId>::max(),
                  "{}.vocab[\"{}\"] must be a non-negative integer id, not {}", where, token, id.dump());
        const auto value = static_cast<TokenId>(id.get<std::int64_t>());
        model->vocab_[token] = value;
        max_id = std::max(max_id, value);
    }
    model->tokens_.assign(static_cast<std::size_t>(max_id + 1), std::string());
    model->has_id_.assign(static_cast<std::size_t>(max_id + 1), false);
    std::size_t duplicates = 0;
    for (const auto& [token, id] : model->vocab_) {
        if (model->has_id_[id]) {
            ++duplicates;
            continue;
        }
        model->tokens_[id] = token;
        model->has_id_[id] = true;
    }
    if (duplicates > 0) MSA_LOG_WARN("{}.vocab: {} ids are used by more than one token", where, duplicates);

    model->unk_token_ = config.contains("unk_token") && !config["unk_token"].is_null()
                            ? std::optional<std::string>(jf::string(config, "unk_token", "", where))
                            : std::nullopt;
    model->fuse_unk_ = jf::boolean(config, "fuse_unk", false, where);
    model->byte_fallback_ = jf::boolean(config, "byte_fallback", false, where);
    model->ignore_merges_ = jf::boolean(config, "ignore_merges", false, where);
    model->continuing_subword_prefix_ = jf::string(config, "continuing_subword_prefix", "", where);
    model->end_of_word_suffix_ = jf::string(config, "end_of_word_suffix", "", where);

    const std::string merges_where = jf::child(where, "merges");
    const auto pairs = read_merges(jf::require(config, "merges", where), merges_where);
    std::vector<std::pair<std::uint64_t, Merge>> entries;
    entries.reserve(pairs.size());
    const std::size_t prefix_length = model->continuing_subword_prefix_.size();
    for (std::size_t rank = 0; rank < pairs.size(); ++rank) {
        const auto& [left, right] = pairs[rank];
        const auto find = [&](const std::string& token) {
            const auto it = model->vocab_.find(token);
            MSA_CHECK(it != model->vocab_.end(), "{}: merge number {} ({} {}) uses \"{}\", which is not in the "
                      "vocabulary", merges_where, rank + 1, left, right, token);
            return it->second;
        };
        const TokenId left_id = find(left);
        const TokenId right_id = find(right);
        MSA_CHECK(right.size() >= prefix_length, "{}: merge number {} ({} {}) is shorter than the continuing subword "
                  "prefix", merges_where, rank + 1, left, right);
        const TokenId result = find(left + right.substr(prefix_length));
        entries.emplace_back(MergeTable::pack(left_id, right_id), Merge{static_cast<std::uint32_t>(rank), result});
    }
    model->merges_.build(entries);

    bool all_bytes = true;
    for (unsigned b = 0; b < 256; ++b) {
        std::string character;
        utf8::append(character, byte_level::char_of_byte(static_cast<std::uint8_t>(b)));
        const auto it = model->vocab_.find(character);
        model->byte_symbol_[b] = it == model->vocab_.end() ? -1 : it->second;
        all_bytes = all_bytes && it != model->vocab_.end();
    }
    model->byte_fast_path_ =
        all_bytes && model->continuing_subword_prefix_.empty() && model->end_of_word_suffix_.empty();
    return model;
}

std::optional<TokenId> BpeModel::token_to_id(std::string_view token) const {
    const auto it = vocab_.find(token);
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
}

const std::string* BpeModel::id_to_token(TokenId id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size() || !has_id_[id]) return nullptr;
    return &tokens_[id];
}

void BpeModel::initial_symbols(std::string_view piece, bool byte_level, std::vector<TokenId>& symbols) const {
    if (byte_level && byte_fast_path_) {
        for (const char c : piece) symbols.push_back(byte_symbol_[static_cast<unsigned char>(c)]);
        return;
    }
    std::string mapped;
    if (byte_level) {
        byte_level::append_mapped(mapped, piece);
        piece = mapped;
    }
    // Hugging Face's merge_word: one symbol per character, with byte fallback and (fused) unknown tokens.
    std::optional<std::pair<TokenId, std::size_t>> pending_unk;  // (id, byte length)
    std::string symbol;
    std::size_t pos = 0;
    while (pos < piece.size()) {
        const std::size_t start = pos;
        pos += utf8::sequence_length(static_cast<unsigned char>(piece[pos]));
        const bool is_first = start == 0;
        const bool is_last = pos >= piece.size();
        symbol.clear();
        if (!is_first) symbol += continuing_subword_prefix_;
        symbol.append(piece.substr(start, pos - start));
        if (is_last) symbol += end_of_word_suffix_;
        const auto it = vocab_.find(symbol);
        if (it != vocab_.end()) {
            if (pending_unk) {
                symbols.push_back(pending_unk->first);
                pending_unk.reset();
            }
            symbols.push_back(it->second);
            continue;
        }
        if (byte_fallback_) {
            std::vector<TokenId> bytes;
            for (const char c : symbol) {
                const auto byte_it = vocab_.find(fmt::format("<0x{:02X}>", static_cast<unsigned char>(c)));
                if (byte_it == vocab_.end()) break;
                bytes.push_back(byte_it->second);
            }
            if (bytes.size() == symbol.size()) {
                symbols.insert(symbols.end(), bytes.begin(), bytes.end());
                continue;
            }
        }
        if (unk_token_) {
            const auto unk = vocab_.find(*unk_token_);
            MSA_CHECK(unk != vocab_.end(), "tokenizer.json: model.unk_token \"{}\" is not in the vocabulary, but the "
                      "text has a character that needs it", *unk_token_);
            const std::size_t length = pos - start;
            if (pending_unk && fuse_unk_) {
                pending_unk->second += length;
            } else {
                if (pending_unk) symbols.push_back(pending_unk->first);
                pending_unk = std::make_pair(unk->second, length);
            }
        }
        // Without an unknown token the character is dropped, as Hugging Face does.
    }
    if (pending_unk) symbols.push_back(pending_unk->first);
}

void BpeModel::merge_by_scan(std::vector<TokenId>& symbols) const {
    if (symbols.size() < 2) return;
    std::vector<std::uint32_t> ranks(symbols.size() - 1);
    std::vector<TokenId> results(symbols.size() - 1);
    const auto pair_rank = [&](std::size_t i) {
        const Merge* m = merges_.find(symbols[i], symbols[i + 1]);
        ranks[i] = m ? m->rank : kNoMerge;
        results[i] = m ? m->result : -1;
    };
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) pair_rank(i);
    while (!ranks.empty()) {
        std::size_t best = 0;
        for (std::size_t i = 1; i < ranks.size(); ++i) {
            if (ranks[i] < ranks[best]) best = i;
        }
        if (ranks[best] == kNoMerge) break;
        symbols[best] = results[best];
        symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
        ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(best));
        results.erase(results.begin() + static_cast<std::ptrdiff_t>(best));
        if (best > 0) pair_rank(best - 1);
        if (best < ranks.size()) pair_rank(best);
    }
}

void BpeModel::merge_by_queue(std::vector<TokenId>& symbols) const {
    const std::size_t n = symbols.size();
    if (n < 2) return;
    struct Node {
        TokenId id;
        std::int32_t prev;
        std::int32_t next;
        bool alive;
    };
    struct Candidate {
        std::uint32_t rank;
        std::uint32_t pos;  // index of the left symbol in the original sequence
        TokenId result;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::vector<Node> nodes(n);
    for (std::size_t i = 0; i < n; ++i) {
        nodes[i] = {symbols[i], static_cast<std::int32_t>(i) - 1, i + 1 < n ? static_cast<std::int32_t>(i + 1) : -1,
                    true};
    }
    std::vector<Candidate> storage;
    storage.reserve(n * 2);
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue(std::greater<>{}, std::move(storage));
    const auto push = [&](std::int32_t left) {
        const std::int32_t right = nodes[left].next;
        if (right < 0) return;
        if (const Merge* m = merges_.find(nodes[left].id, nodes[right].id)) {
            queue.push({m->rank, static_cast<std::uint32_t>(left), m->result});
        }
    };
    for (std::size_t i = 0; i + 1 < n; ++i) push(static_cast<std::int32_t>(i));
    while (!queue.empty()) {
        const Candidate top = queue.top();
        queue.pop();
        Node& left = nodes[top.pos];
        if (!left.alive || left.next < 0) continue;
        Node& right = nodes[left.next];
        const Merge* m = merges_.find(left.id, right.id);
        if (m == nullptr || m->result != top.result) continue;  // stale: the pair changed since it was queued
        left.id = top.result;
        right.alive = false;
        left.next = right.next;
        if (right.next >= 0) nodes[right.next].prev = static_cast<std::int32_t>(top.pos);
        if (left.prev >= 0) push(left.prev);
        push(static_cast<std::int32_t>(top.pos));
    }
    symbols.clear();
    for (std::int32_t i = 0; i >= 0; i = nodes[i].next) symbols.push_back(nodes[i].id);
}

void BpeModel::merge(std::vector<TokenId>& symbols) const {
    if (symbols.size() <= kScanMergeLimit) {
        merge_by_scan(symbols);
    } else {
        merge_by_queue(symbols);
    }
}

void BpeModel::tokenize(std::string_view piece, bool byte_level, std::vector<TokenId>& out) const {
    if (piece.empty()) return;
    // The result depends on the piece alone, so it is cached whichever way it is found below. Pieces up to
    // kMaxKeyBytes are cached; longer ones are rare and cost little more to redo than to look up.
    const bool cacheable = piece.size() <= PieceCache::kMaxKeyBytes;
    PieceCache* cache = cacheable ? &PieceCache::for_model(serial_) : nullptr;
    if (cache != nullptr && cache->find(piece, out)) return;
    thread_local std::vector<TokenId> symbols;
    symbols.clear();
    std::optional<TokenId> whole;
    if (ignore_merges_) {
        // A piece that is a whole vocabulary entry is taken as is.
        if (byte_level) {
            thread_local std::string mapped;
            mapped.clear();
            byte_level::append_mapped(mapped, piece);
            whole = token_to_id(mapped);
        } else {
            whole = token_to_id(piece);
        }
    }
    if (whole) {
        symbols.push_back(*whole);
    } else {
        initial_symbols(piece, byte_level, symbols);
        merge(symbols);
    }
    out.insert(out.end(), symbols.begin(), symbols.end());
    if (cache != nullptr) cache->insert(piece, symbols.data(), symbols.size());
}

}  // namespace msa
