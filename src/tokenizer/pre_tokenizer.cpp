#include "tokenizer/pre_tokenizer.h"

#include <optional>
#include <vector>

#include "core/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/regex.h"
#include "tokenizer/regex_fast_path.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace msa {
namespace {

namespace jf = json_fields;

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const std::string& name, const std::string& where) {
    if (name == "Removed") return Behavior::kRemoved;
    if (name == "Isolated") return Behavior::kIsolated;
    if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
    if (name == "MergedWithNext") return Behavior::kMergedWithNext;
    if (name == "Contiguous") return Behavior::kContiguous;
    fail("{}: unknown split behavior \"{}\" (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or "
         "Contiguous)",
         where, name);
}

// A span of a piece and whether the pattern matched it; a piece's events cover it from end to end.
struct Event {
    std::uint32_t begin;
    std::uint32_t end;
    bool is_match;
};

// Hugging Face's NormalizedString::split: turns the events into the spans that survive `behavior`.
void apply_behavior(std::vector<Event>& events, Behavior behavior, std::vector<Piece>& out) {
    auto emit = [&out](std::uint32_t begin, std::uint32_t end) {
        if (end > begin) out.push_back({begin, end, -1});
    };
    switch (behavior) {
        case Behavior::kIsolated:
            for (const Event& e : events) emit(e.begin, e.end);
            return;
        case Behavior::kRemoved:
            for (const Event& e : events) {
                if (!e.is_match) emit(e.begin, e.end);
            }
            return;
        case Behavior::kContiguous:
        case Behavior::kMergedWithPrevious: {
            std::vector<Event> merged;
            bool previous_match = false;
            for (const Event& e : events) {
                const bool join = behavior == Behavior::kContiguous ? e.is_match == previous_match
                                                                    : (e.is_match && !previous_match);
                if (join && !merged.empty()) {
                    merged.back().end = e.end;
                } else {
                    merged.push_back(e);
                }
                previous_match = e.is_match;
            }
            for (const Event& e : merged) emit(e.begin, e.end);
            return;
        }
        case Behavior::kMergedWithNext: {
            std::vector<Event> merged;  // built back to front
            bool previous_match = false;
            for (auto it = events.rbegin(); it != events.rend(); ++it) {
                if (it->is_match && !previous_match && !merged.empty()) {
                    merged.back().begin = it->begin;
                } else {
                    merged.push_back(*it);
                }
                previous_match = it->is_match;
            }
            for (auto it = merged.rbegin(); it != merged.rend(); ++it) emit(it->begin, it->end);
            return;
        }
    }
}

// Runs `make_events(piece, events)` on every non-token piece and replaces it by the spans `behavior` keeps.
template <typename MakeEvents>
void split_pieces(PieceList& list, Behavior behavior, bool invert, MakeEvents&& make_events) {
    // Scratch buffers live per thread so that encoding does not allocate once they have grown.
    thread_local std::vector<Piece> out;
    thread_local std::vector<Event> events;
    out.clear();
    for (const Piece& piece : list.pieces) {
        if (piece.token >= 0) {
            out.push_back(piece);
            continue;
        }
        events.clear();
        make_events(piece, events);
        if (invert) {
            for (Event& e : events) e.is_match = !e.is_match;
        }
        apply_behavior(events, behavior, out);
    }
    list.pieces.swap(out);
}

// Events of a regex over a piece (Hugging Face's find_matches for a regex pattern).
void regex_events(const Regex& regex, const PieceList& list, const Piece& piece, std::vector<Event>& events) {
    std::uint32_t previous = piece.begin;
    regex.for_each_match(list.view(piece), [&](std::size_t b, std::size_t e) {
        const auto begin = static_cast<std::uint32_t>(piece.begin + b);
        const auto end = static_cast<std::uint32_t>(piece.begin + e);
        if (previous != begin) events.push_back({previous, begin, false});
        events.push_back({begin, end, true});
        previous = end;
    });
    if (previous != piece.end) events.push_back({previous, piece.end, false});
}

// Events of a character predicate: every matching character is a match of its own.
template <typename Predicate>
void char_events(Predicate&& is_match, const PieceList& list, const Piece& piece, std::vector<Event>& events) {
    const std::string_view text = list.view(piece);
    std::uint32_t last = piece.begin;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const auto char_begin = static_cast<std::uint32_t>(piece.begin + pos);
        const char32_t cp = utf8::decode(text, pos);
        if (is_match(cp)) {
            const auto char_end = static_cast<std::uint32_t>(piece.begin + pos);
            if (last < char_begin) events.push_back({last, char_begin, false});
            events.push_back({char_begin, char_end, true});
            last = char_end;
        }
    }
    if (piece.end > last) events.push_back({last, piece.end, false});
}

class SplitPreTokenizer final : public PreTokenizer {
public:
    SplitPreTokenizer(Regex pattern, Behavior behavior, bool invert)
        : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
    void pre_tokenize(PieceList& list) const override {
        list.materialize();
        split_pieces(list, behavior_, invert_, [&](const Piece& piece, std::vector<Event>& events) {
            regex_events(pattern_, list, piece, events);
        });
    }

private:
    Regex pattern_;
    Behavior behavior_;
    bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
public:
    ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
        : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {
        if (use_regex_) regex_.emplace(kGpt2SplitPattern);
    }
    void pre_tokenize(PieceList& list) const override {
        list.materialize();
        if (add_prefix_space_) add_prefix_spaces(list);
        if (use_regex_) {
            split_pieces(list, Behavior::kIsolated, false, [&](const Piece& piece, std::vector<Event>& events) {
                regex_events(*regex_, list, piece, events);
            });
        }
        list.byte_level = true;
    }

private:
    // Every non-token piece that does not start with a space gets one (Hugging Face does this per piece).
    static void add_prefix_spaces(PieceList& list) {
        thread_local std::string text;
        text.clear();
        for (Piece& piece : list.pieces) {
            const std::string_view content = list.view(piece);
            const auto begin = static_cast<std::uint32_t>(text.size());
            if (piece.token < 0 && (content.empty() || content.front() != ' ')) text += ' ';
            text.append(content);
            piece.begin = begin;
            piece.end = static_cast<std::uint32_t>(text.size());
        }
        list.text.swap(text);
    }

    bool add_prefix_space_;
    bool use_regex_;
    std::optional<Regex> regex_;
};

class DigitsPreTokenizer final : public PreTokenizer {
public:
    explicit DigitsPreTokenizer(bool individual) : individual_(individual) {}
    void pre_tokenize(PieceList& list) const override {
        list.materialize();
        split_pieces(list, individual_ ? Behavior::kIsolated : Behavior::kContiguous, false,
                     [&](const Piece& piece, std::vector<Event>& events) {
                         char_events(is_unicode_numeric, list, piece, events);
                     });
    }

private:
    bool individual_;
};

// Whitespace: \w+|[^\w\s]+ kept, everything else (whitespace) dropped.
class WhitespacePreTokenizer final : public PreTokenizer {
public:
    WhitespacePreTokenizer() : regex_(R"(\w+|[^\w\s]+)") {}
    void pre_tokenize(PieceList& list) const override {
        list.materialize();
        split_pieces(list, Behavior::kRemoved, true, [&](const Piece& piece, std::vector<Event>& events) {
            regex_events(regex_, list, piece, events);
        });
    }

private:
    Regex regex_;
};

// WhitespaceSplit, Punctuation and BertPreTokenizer: splits on character predicates.
class CharSplitPreTokenizer final : public PreTokenizer {
public:
    enum class Kind { kWhitespaceSplit, kPunctuation, kBert };
    CharSplitPreTokenizer(Kind kind, Behavior punctuation_behavior)
        : kind_(kind), punctuation_behavior_(punctuation_behavior) {}
    void pre_tokenize(PieceList& list) const override {
        list.materialize();
        if (kind_ != Kind::kPunctuation) {
            split_pieces(list, Behavior::kRemoved, false, [&](const Piece& piece, std::vector<Event>& events) {
                char_events(is_unicode_white_space, list, piece, events);
            });
        }
        if (kind_ != Kind::kWhitespaceSplit) {
            split_pieces(list, punctuation_behavior_, false, [&](const Piece& piece, std::vector<Event>& events) {
                char_events(is_hf_punctuation, list, piece, events);
            });
        }
    }

private:
    Kind kind_;
    Behavior punctuation_behavior_;
};

class SequencePreTokenizer final : public PreTokenizer {
public:
    explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
    void pre_tokenize(PieceList& list) const override {
        for (const auto& part : parts_) part->pre_tokenize(list);
    }

private:
    std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& config, const std::string& where) {
    if (config.is_null()) return nullptr;
    const std::string type = jf::type_of(config, where);
    if (type == "Split") {
        return std::make_unique<SplitPreTokenizer>(
            jf::pattern(jf::require(config, "pattern", where), jf::child(where, "pattern")),
            parse_behavior(jf::required_string(config, "behavior", where), jf::child(where, "behavior")),
            jf::boolean(config, "invert", false, where));
    }
    if (type == "ByteLevel") {
        return std::make_unique<ByteLevelPreTokenizer>(jf::boolean(config, "add_prefix_space", true, where),
                                                       jf::boolean(config, "use_regex", true, where));
    }
    if (type == "Digits") return std::make_unique<DigitsPreTokenizer>(jf::boolean(config, "individual_digits", false, where));
    if (type == "Whitespace") return std::make_unique<WhitespacePreTokenizer>();
    if (type == "WhitespaceSplit") {
        return std::make_unique<CharSplitPreTokenizer>(CharSplitPreTokenizer::Kind::kWhitespaceSplit,
                                                       Behavior::kIsolated);
    }
    if (type == "Punctuation") {
        return std::make_unique<CharSplitPreTokenizer>(
            CharSplitPreTokenizer::Kind::kPunctuation,
            parse_behavior(jf::string(config, "behavior", "Isolated", where), jf::child(where, "behavior")));
    }
    if (type == "BertPreTokenizer") {
        return std::make_unique<CharSplitPreTokenizer>(CharSplitPreTokenizer::Kind::kBert, Behavior::kIsolated);
    }
    if (type == "Sequence") {
        const nlohmann::json& list = jf::require(config, "pretokenizers", where);
        MSA_CHECK(list.is_array(), "{}.pretokenizers must be an array", where);
        std::vector<std::unique_ptr<PreTokenizer>> parts;
        for (std::size_t i = 0; i < list.size(); ++i) {
            auto part = make_pre_tokenizer(list[i], jf::element(jf::child(where, "pretokenizers"), i));
            if (part) parts.push_back(std::move(part));
        }
        return std::make_unique<SequencePreTokenizer>(std::move(parts));
    }
    fail("{}: pre-tokenizer type \"{}\" is not supported (supported: Split, ByteLevel, Digits, Whitespace, "
         "WhitespaceSplit, Punctuation, BertPreTokenizer, Sequence)",
         where, type);
}

}  // namespace msa
