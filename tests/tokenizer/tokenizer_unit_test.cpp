// Unit tests of the tokenizer module that need no npm packages: UTF-8 handling against a reference written from the
// definition of well-formed UTF-8, the regex translation against the oracle's character tables for every code point,
// BPE merging against a naive reference, split behaviours on Hugging Face's documented example, streaming decoding
// properties, error messages, thread safety, and golden parity of the committed tiny tokenizer.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "core/error.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/regex_fast_path.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"
#include "tokenizer_golden_check.h"
#include "tokenizer_test_data.h"

namespace msa {
namespace {

// ---- UTF-8 ---------------------------------------------------------------------------------------------------------

// Reference: the UTF-8 encodings of all scalar values, and all their proper prefixes.
struct Utf8Reference {
    std::set<std::string> proper_prefixes;
    Utf8Reference() {
        for (char32_t cp = 0x80; cp <= 0x10FFFF; ++cp) {
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            std::string e;
            utf8::append(e, cp);
            for (std::size_t k = 1; k < e.size(); ++k) proper_prefixes.insert(e.substr(0, k));
        }
    }
    // A complete encoding of some scalar value: decodes to a code point whose encoding is exactly these bytes.
    static bool is_encoding(std::string_view s) {
        const auto b0 = static_cast<unsigned char>(s[0]);
        const std::size_t n = b0 < 0x80 ? 1 : b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 0;
        if (n == 0 || n != s.size()) return false;
        char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
        for (std::size_t i = 1; i < n; ++i) {
            const auto b = static_cast<unsigned char>(s[i]);
            if ((b & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (b & 0x3F);
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        std::string again;
        utf8::append(again, cp);
        return again == s;
    }
    // Lossy decoding by the definition: a well-formed character is copied; otherwise the longest prefix of a
    // well-formed character found here (at least one byte) becomes one U+FFFD.
    std::string decode(std::string_view bytes) const {
        std::string out;
        std::size_t i = 0;
        while (i < bytes.size()) {
            bool done = false;
            for (std::size_t n = 1; n <= 4 && i + n <= bytes.size(); ++n) {
                if (is_encoding(bytes.substr(i, n))) {
                    out.append(bytes.substr(i, n));
                    i += n;
                    done = true;
                    break;
                }
            }
            if (done) continue;
            std::size_t k = 1;
            for (std::size_t n = 3; n >= 1; --n) {
                if (i + n <= bytes.size() && proper_prefixes.count(std::string(bytes.substr(i, n)))) {
                    k = n;
                    break;
                }
            }
            out.append(utf8::kReplacementCharacter);
            i += k;
        }
        return out;
    }
};

const Utf8Reference& utf8_reference() {
    static const Utf8Reference reference;
    return reference;
}

TEST(Utf8, LossyDecodingOfTheUnicodeStandardExample) {
    // The maximal-subpart example of the Unicode Standard (chapter 3, U+FFFD substitution).
    const std::string bytes = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
    const std::string fffd(utf8::kReplacementCharacter);
    EXPECT_EQ(utf8::decode_lossy(bytes), "a" + fffd + fffd + fffd + "b" + fffd + "c" + fffd + fffd + "d");
    EXPECT_EQ(utf8::decode_lossy("\xED\xA0\x80"), fffd + fffd + fffd);  // a surrogate
    EXPECT_EQ(utf8::decode_lossy("\xC0\x80"), fffd + fffd);             // overlong
    EXPECT_EQ(utf8::decode_lossy("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);
    EXPECT_EQ(utf8::decode_lossy("\xF0\x9F\x98"), fffd);  // truncated emoji
    EXPECT_EQ(utf8::decode_lossy("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
}

RC_GTEST_PROP(Utf8, LossyDecodingMatchesTheReference, (const std::vector<std::uint8_t>& raw)) {
    const std::string bytes(raw.begin(), raw.end());
    const std::string decoded = utf8::decode_lossy(bytes);
    RC_ASSERT(decoded == utf8_reference().decode(bytes));
    RC_ASSERT(utf8::is_valid(decoded));
}

RC_GTEST_PROP(Utf8, ChunkedDecodingEqualsWholeDecoding, (const std::vector<std::uint8_t>& raw)) {
    // Bias toward bytes of multi-byte sequences so that chunk boundaries fall inside characters.
    const std::string bytes(raw.begin(), raw.end());
    const auto cuts = *rc::gen::container<std::vector<std::size_t>>(rc::gen::inRange<std::size_t>(0, bytes.size() + 1));
    std::vector<std::size_t> sorted = cuts;
    std::sort(sorted.begin(), sorted.end());
    utf8::LossyDecoder decoder;
    std::string out;
    std::size_t previous = 0;
    for (const std::size_t cut : sorted) {
        std::string chunk_out;
        decoder.push(std::string_view(bytes).substr(previous, cut - previous), chunk_out);
        RC_ASSERT(utf8::is_valid(chunk_out));
        out += chunk_out;
        previous = cut;
    }
    decoder.push(std::string_view(bytes).substr(previous), out);
    decoder.finish(out);
    RC_ASSERT(out == utf8::decode_lossy(bytes));
}

TEST(Utf8, ValidationAgreesWithTheReferenceOnAllShortSequences) {
    // Every 1- and 2-byte string, and every 3-byte string starting with a lead byte of a 3- or 4-byte sequence.
    for (unsigned a = 0; a < 256; ++a) {
        for (unsigned b = 0; b < 256; ++b) {
            const std::string s{static_cast<char>(a), static_cast<char>(b)};
            ASSERT_EQ(utf8::is_valid(s), utf8_reference().decode(s) == s) << a << " " << b;
        }
    }
}

// ---- Regex translation and character classes -----------------------------------------------------------------------

// For every scalar value, a one-character match of `pattern` must agree with membership in the oracle's class.
void expect_class_matches(const std::string& pattern, const std::string& class_name, bool negated) {
    const Regex regex(pattern);
    std::vector<CodePointRange> ranges;
    ASSERT_TRUE(unicode_class_ranges(class_name, ranges));
    std::size_t next_range = 0;
    std::size_t mismatches = 0;
    std::string text;
    for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        while (next_range < ranges.size() && ranges[next_range].last < cp) ++next_range;
        const bool member = next_range < ranges.size() && ranges[next_range].first <= cp;
        text.clear();
        utf8::append(text, cp);
        std::size_t b = 0, e = 0;
        const bool matched = regex.find(text, 0, b, e) && b == 0 && e == text.size();
        if (matched != (member != negated) && mismatches++ < 5) {
            ADD_FAILURE() << pattern << " on U+" << std::hex << static_cast<std::uint32_t>(cp);
        }
    }
    EXPECT_EQ(mismatches, 0u) << pattern;
}

TEST(RegexClasses, MatchTheOracleTablesForEveryCodePoint) {
    for (const char* name : {"L", "N", "P", "S", "M", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Nd", "No", "Z", "Po", "So"}) {
        expect_class_matches(std::string("\\p{") + name + "}", name, false);
    }
    expect_class_matches("\\s", "s", false);
    expect_class_matches("\\S", "s", true);
    expect_class_matches("\\w", "w", false);
    expect_class_matches("\\d", "d", false);
    expect_class_matches("\\P{L}", "L", true);
    expect_class_matches("\\p{^N}", "N", true);
    expect_class_matches("[^\\p{P}]", "P", true);
    expect_class_matches("[\\p{S}]", "S", false);
}

TEST(RegexClasses, DifferFromPcre2WhereTheOracleDoes) {
    // U+180E MONGOLIAN VOWEL SEPARATOR is not whitespace since Unicode 6.3 (PCRE2's \s still says it is), and
    // U+1FAE8 SHAKING FACE (Unicode 15.0) is a symbol that PCRE2 10.42's Unicode 14 tables do not know.
    EXPECT_FALSE(is_unicode_white_space(0x180E));
    EXPECT_TRUE(is_unicode_white_space(0x85));
    EXPECT_EQ(unicode_category(0x1FAE8), UnicodeCategory::So);
    std::size_t b = 0, e = 0;
    EXPECT_FALSE(Regex("\\s").find("\xE1\xA0\x8E", 0, b, e));
    EXPECT_TRUE(Regex("\\p{S}").find("\xF0\x9F\xAB\xA8", 0, b, e));
}

TEST(RegexTranslation, FollowsOnigurumaRubySyntax) {
    std::size_t b = 0, e = 0;
    EXPECT_TRUE(Regex("(?m:a.b)").find("a\nb", 0, b, e));  // Ruby's m: dot matches newline
    EXPECT_FALSE(Regex("a.b").find("a\nb", 0, b, e));
    ASSERT_TRUE(Regex("^b").find("a\nb", 0, b, e));  // ^ is a line anchor
    EXPECT_EQ(b, 2u);
    ASSERT_TRUE(Regex("\\h+").find("xyz 0fA9 ", 0, b, e));  // \h is a hex digit
    EXPECT_EQ(std::string("xyz 0fA9 ").substr(b, e - b), "0fA9");
    EXPECT_TRUE(Regex("\\u00e9").find("caf\xC3\xA9", 0, b, e));
    ASSERT_TRUE(Regex("(?i:'s|'t)").find("IT'S", 0, b, e));
    EXPECT_EQ(b, 2u);
}

TEST(RegexTranslation, RejectsConstructsWithoutAnExactEquivalent) {
    for (const char* pattern : {"[a-z&&[^aeiou]]", "[[:alpha:]]", "[a[bc]]", "[^\\S]", "[\\W]", "\\p{L", "[abc"}) {
        EXPECT_THROW(Regex{pattern}, Error) << pattern;
    }
    try {
        Regex("[[:alpha:]]");
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("POSIX bracket"), std::string::npos) << e.what();
    }
}

TEST(RegexTranslation, LiteralPatternsMatchVerbatim) {
    std::size_t b = 0, e = 0;
    const Regex literal = Regex::literal("a.b\\E(");
    ASSERT_TRUE(literal.find("xxa.b\\E(", 0, b, e));
    EXPECT_EQ(b, 2u);
    EXPECT_FALSE(literal.find("axb\\E(", 0, b, e));
}

TEST(RegexTranslation, IteratesMatchesLikeOniguruma) {
    // "a*" over "baaac": the empty match at 0, "aaa", then the empty match at the end; no empty match right after
    // the previous match.
    std::vector<std::pair<std::size_t, std::size_t>> matches;
    Regex("a*").for_each_match("baaac", [&](std::size_t b, std::size_t e) { matches.emplace_back(b, e); });
    const std::vector<std::pair<std::size_t, std::size_t>> expected = {{0, 0}, {1, 4}, {5, 5}};
    EXPECT_EQ(matches, expected);
}

TEST(RegexTranslation, HandlesMegabyteRunsWithoutStackTrouble) {
    const Regex qwen(kQwenSplitPattern, /*allow_fast_path=*/false);
    for (const std::string& text : {std::string(1 << 21, ' '), std::string(1 << 21, 'a'), std::string(1 << 20, '!') + "x",
                                    std::string(1 << 20, '\n') + " "}) {
        std::size_t count = 0, covered = 0;
        qwen.for_each_match(text, [&](std::size_t b, std::size_t e) {
            ++count;
            covered += e - b;
        });
        EXPECT_EQ(covered, text.size());
        EXPECT_LE(count, 3u);
    }
}

std::vector<std::pair<std::size_t, std::size_t>> all_matches(const Regex& regex, std::string_view text) {
    std::vector<std::pair<std::size_t, std::size_t>> matches;
    regex.for_each_match(text, [&](std::size_t b, std::size_t e) { matches.emplace_back(b, e); });
    return matches;
}

RC_GTEST_PROP(RegexFastPath, AgreesWithPcre2OnMixedText, ()) {
    // ASCII of every class the patterns distinguish, and non-ASCII characters that are letters, digits, whitespace,
    // symbols, or case-fold to ASCII letters (U+017F long s, U+212A Kelvin sign).
    static const std::vector<std::string> pieces = {
        "a", "Z", "s", "S", "t", "l", "L", "d", "m", "r", "e", "E", "v", "0", "7", " ", "  ", "\t", "\n", "\r",
        "\x0b", "'", "'", ".", ",", "-", "!", "\x01", "\x1f", "\x7f", "\xC3\xA9", "\xC5\xBF", "\xE2\x84\xAA",
        "\xC2\xA0", "\xC2\x85", "\xD9\xA1", "\xE2\x80\x94", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80",
        "\xE2\x80\xA8", "\xE1\xA0\x8E"};
    const auto parts = *rc::gen::container<std::vector<std::size_t>>(rc::gen::inRange<std::size_t>(0, pieces.size()));
    std::string text;
    for (const std::size_t i : parts) text += pieces[i];
    for (const std::string_view pattern : {kQwenSplitPattern, kCl100kSplitPattern, kGpt2SplitPattern,
                                           kDigits3SplitPattern, kDeepSeekSplitPattern}) {
        RC_ASSERT(all_matches(Regex(pattern, true), text) == all_matches(Regex(pattern, false), text));
    }
}

// ---- Pre-tokenizer split behaviours --------------------------------------------------------------------------------

std::vector<std::string> split_with(const std::string& behavior, const std::string& text, bool invert = false) {
    const nlohmann::json config = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior},
                                   {"invert", invert}};
    const auto pre = make_pre_tokenizer(config, "test");
    PieceList list;
    list.text = text;
    list.pieces.push_back({0, static_cast<std::uint32_t>(text.size()), -1});
    pre->pre_tokenize(list);
    std::vector<std::string> out;
    for (const Piece& p : list.pieces) out.emplace_back(list.view(p));
    return out;
}

TEST(PreTokenizer, SplitBehavioursOfTheHuggingFaceDocumentation) {
    // The example of the Hugging Face documentation of SplitDelimiterBehavior: "the-final--countdown" split on "-".
    using V = std::vector<std::string>;
    EXPECT_EQ(split_with("Removed", "the-final--countdown"), (V{"the", "final", "countdown"}));
    EXPECT_EQ(split_with("Isolated", "the-final--countdown"), (V{"the", "-", "final", "-", "-", "countdown"}));
    EXPECT_EQ(split_with("MergedWithPrevious", "the-final--countdown"), (V{"the-", "final-", "-", "countdown"}));
    EXPECT_EQ(split_with("MergedWithNext", "the-final--countdown"), (V{"the", "-final", "-", "-countdown"}));
    EXPECT_EQ(split_with("Contiguous", "the-final--countdown"), (V{"the", "-", "final", "--", "countdown"}));
    EXPECT_EQ(split_with("Removed", "the-final--countdown", true), (V{"-", "-", "-"}));
}

// ---- BPE -----------------------------------------------------------------------------------------------------------

const nlohmann::json& tiny_json() {
    static const nlohmann::json json = nlohmann::json::parse(test::read_file(test::tiny_tokenizer_path()));
    return json;
}

const BpeModel& tiny_model() {
    static const auto model = BpeModel::from_json(tiny_json()["model"], "tiny model");
    return *model;
}

// Naive reference BPE over strings: repeatedly merge the adjacent pair with the lowest rank (leftmost on ties).
std::vector<std::string> reference_bpe(std::vector<std::string> symbols) {
    static const auto ranks = [] {
        std::map<std::pair<std::string, std::string>, std::size_t> r;
        const auto& merges = tiny_json()["model"]["merges"];
        for (std::size_t i = 0; i < merges.size(); ++i) {
            const std::string line = merges[i].get<std::string>();
            const std::size_t space = line.find(' ');
            r.emplace(std::make_pair(line.substr(0, space), line.substr(space + 1)), i);
        }
        return r;
    }();
    while (symbols.size() > 1) {
        std::size_t best = symbols.size();
        std::size_t best_rank = SIZE_MAX;
        for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
            const auto it = ranks.find({symbols[i], symbols[i + 1]});
            if (it != ranks.end() && it->second < best_rank) {
                best_rank = it->second;
                best = i;
            }
        }
        if (best == symbols.size()) break;
        symbols[best] += symbols[best + 1];
        symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    return symbols;
}

RC_GTEST_PROP(Bpe, MatchesANaiveReference, ()) {
    // Words over a small alphabet so that merges actually apply.
    const auto word = *rc::gen::container<std::string>(rc::gen::elementOf(std::string("etaoinshrd lu")));
    std::vector<std::string> symbols;
    for (const char c : word) symbols.push_back(c == ' ' ? "\xC4\xA0" : std::string(1, c));  // space is "Ġ"
    std::vector<TokenId> ids;
    tiny_model().tokenize(word, /*byte_level=*/true, ids);
    std::vector<std::string> got;
    for (const TokenId id : ids) got.push_back(*tiny_model().id_to_token(id));
    RC_ASSERT(got == reference_bpe(symbols));
}

RC_GTEST_PROP(Bpe, ScanAndQueueMergesAgree, ()) {
    const auto word = *rc::gen::container<std::string>(rc::gen::elementOf(std::string("etaoinshrd lu.,")));
    std::vector<TokenId> a;
    for (const char c : word) a.push_back(*tiny_model().token_to_id(c == ' ' ? "\xC4\xA0" : std::string(1, c)));
    std::vector<TokenId> b = a;
    tiny_model().merge_by_scan(a);
    tiny_model().merge_by_queue(b);
    RC_ASSERT(a == b);
}

// ---- Tokenizer, streaming ------------------------------------------------------------------------------------------

const Tokenizer& tiny() {
    static const Tokenizer tokenizer = Tokenizer::from_file(test::tiny_tokenizer_path().string());
    return tokenizer;
}

TEST(Tokenizer, TinyTokenizerMatchesItsGoldens) { test::check_variant_goldens("tiny"); }

TEST(Tokenizer, CharacterLevelModelsMatchTheirGoldens) {
    // Unknown tokens (fused), byte fallback, subword prefix/suffix, and the space-joining decoder.
    for (const char* name : {"char_bpe_unk", "char_bpe_byte_fallback", "char_bpe_affixes"}) {
        SCOPED_TRACE(name);
        test::check_variant_goldens(name);
    }
}

TEST(Tokenizer, SpecialTokensAreMatchedAndSkippable) {
    const TokenId start = *tiny().token_to_id("<|im_start|>");
    const TokenId end = *tiny().token_to_id("<|im_end|>");
    const TokenId think = *tiny().token_to_id("<think>");
    const auto ids = tiny().encode("<|im_start|>hi<think><|im_end|>");
    ASSERT_GE(ids.size(), 4u);
    EXPECT_EQ(ids.front(), start);
    EXPECT_EQ(ids.back(), end);
    EXPECT_NE(std::find(ids.begin(), ids.end(), think), ids.end());
    EXPECT_TRUE(tiny().is_special(start));
    EXPECT_FALSE(tiny().is_special(think));
    EXPECT_EQ(tiny().decode(ids, false), "<|im_start|>hi<think><|im_end|>");
    EXPECT_EQ(tiny().decode(ids, true), "hi<think>");
}

RC_GTEST_PROP(Tokenizer, EncodeDecodeRoundTripsAnyText, (const std::string& raw)) {
    // The tiny tokenizer is lossless (byte-level, no normalizer): any valid UTF-8 comes back unchanged.
    const std::string text = utf8::decode_lossy(raw);
    RC_ASSERT(tiny().decode(tiny().encode(text, false)) == text);
}

RC_GTEST_PROP(StreamDecoder, ConcatenationEqualsDecodeAndChunksAreValid, ()) {
    const auto limit = static_cast<TokenId>(tiny().id_limit());
    const auto ids = *rc::gen::container<std::vector<TokenId>>(rc::gen::inRange<TokenId>(-2, limit + 3));
    const bool skip = *rc::gen::arbitrary<bool>();
    bool valid = true;
    RC_ASSERT(test::stream_all(tiny(), ids, skip, valid) == tiny().decode(ids, skip));
    RC_ASSERT(valid);
}

RC_GTEST_PROP(StreamDecoder, StreamsTheEncodingOfAnyText, (const std::string& raw)) {
    const std::string text = utf8::decode_lossy(raw);
    bool valid = true;
    RC_ASSERT(test::stream_all(tiny(), tiny().encode(text, false), false, valid) == text);
    RC_ASSERT(valid);
}

TEST(StreamDecoder, HoldsBackPartialCharacters) {
    const std::string emoji = "\xF0\x9F\x98\x80";  // 😀, four bytes: the tiny vocabulary splits it
    const auto ids = tiny().encode(emoji, false);
    ASSERT_GT(ids.size(), 1u);
    StreamDecoder stream(tiny());
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
        EXPECT_EQ(stream.push(ids[i]), "");
        EXPECT_GT(stream.pending_bytes(), 0u);
    }
    EXPECT_EQ(stream.push(ids.back()), emoji);
    EXPECT_EQ(stream.flush(), "");
    // A stream that stops inside a character ends with one U+FFFD.
    EXPECT_EQ(stream.push(ids.front()), "");
    EXPECT_EQ(stream.flush(), utf8::kReplacementCharacter);
}

TEST(Tokenizer, ConcurrentEncodingGivesTheSameIds) {
    std::vector<std::string> texts;
    for (int i = 0; i < 64; ++i) texts.push_back("Line " + std::to_string(i) + ": In the beginning \xE4\xBD\xA0\xE5\xA5\xBD " + std::string(i, 'x'));
    std::vector<std::vector<TokenId>> expected;
    for (const auto& t : texts) expected.push_back(tiny().encode(t));
    std::vector<std::thread> threads;
    std::vector<int> failures(4, 0);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int round = 0; round < 20; ++round) {
                for (std::size_t i = 0; i < texts.size(); ++i) failures[t] += tiny().encode(texts[i]) != expected[i];
            }
        });
    }
    for (auto& th : threads) th.join();
    for (int f : failures) EXPECT_EQ(f, 0);
}

// ---- Errors --------------------------------------------------------------------------------------------------------

void expect_load_error(const std::string& json_text, const std::string& fragment) {
    try {
        Tokenizer::from_string(json_text, "bad.json");
        ADD_FAILURE() << "no error for " << json_text;
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "message: " << e.what();
    }
}

std::string tiny_with(const std::string& key, const nlohmann::json& value) {
    nlohmann::json json = tiny_json();
    json[key] = value;
    return json.dump();
}

std::string tiny_model_with(const std::string& key, const nlohmann::json& value) {
    nlohmann::json json = tiny_json();
    json["model"][key] = value;
    return json.dump();
}

TEST(TokenizerErrors, MalformedFilesGiveClearMessages) {
    expect_load_error("{\"model\": ", "bad.json is not valid JSON");
    expect_load_error("[1, 2]", "must hold a JSON object");
    expect_load_error("{\"version\": \"1.0\"}", "has no \"model\" field");
    expect_load_error(tiny_model_with("type", "WordPiece"), "model type \"WordPiece\" is not supported");
    expect_load_error(tiny_model_with("type", "Unigram"), "model type \"Unigram\" is not supported");
    expect_load_error(tiny_model_with("vocab", nlohmann::json::array()), "bad.json: model.vocab must be an object");
    expect_load_error(tiny_model_with("vocab", {{"a", -1}}), "must be a non-negative integer id");
    expect_load_error(tiny_model_with("merges", {"t h e"}), "must be two tokens separated by one space");
    expect_load_error(tiny_model_with("merges", {"zz qq"}), "uses \"zz\", which is not in the vocabulary");
    expect_load_error(tiny_model_with("merges", {{"t", "h", "e"}}), "model.merges[0] must be a pair of strings");
    expect_load_error(tiny_model_with("dropout", 0.1), "BPE dropout");
    expect_load_error(tiny_with("normalizer", {{"type", "BertNormalizer"}}), "normalizer type \"BertNormalizer\"");
    expect_load_error(tiny_with("pre_tokenizer", {{"type", "Metaspace"}}), "pre-tokenizer type \"Metaspace\"");
    expect_load_error(tiny_with("decoder", {{"type", "WordPiece"}}), "decoder type \"WordPiece\"");
    expect_load_error(tiny_with("post_processor", {{"type", "Nope"}}), "post-processor type \"Nope\"");
    expect_load_error(tiny_with("pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}},
                                                  {"behavior", "Isolated"}}),
                      "regex pattern '(unclosed' does not compile");
    expect_load_error(tiny_with("pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Nope"}}),
                      "unknown split behavior \"Nope\"");
    expect_load_error(tiny_with("post_processor", {{"type", "TemplateProcessing"},
                                                   {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
                                                   {"special_tokens", nlohmann::json::object()}}),
                      "uses special token \"<s>\"");
    expect_load_error(tiny_with("added_tokens", {{{"content", "<x>"}}}), "added_tokens[0] has no \"id\" field");
}

TEST(TokenizerErrors, MissingFileAndInvalidText) {
    EXPECT_THROW(Tokenizer::from_file("/nonexistent/tokenizer.json"), Error);
    try {
        tiny().encode("ok \xFF bad");
        ADD_FAILURE() << "no error for invalid UTF-8";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace msa
