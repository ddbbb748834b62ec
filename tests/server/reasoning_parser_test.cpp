#include "server/reasoning_parser.h"

#include "core/error.h"

#include "chunking.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace msa::server {
namespace {

using testing::byte_chunks;
using testing::cut_at;
using testing::random_chunks;

struct Split {
    std::string reasoning;
    std::string content;
    bool operator==(const Split&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Split& s) {
    return os << "{reasoning: \"" << s.reasoning << "\", content: \"" << s.content << "\"}";
}

Split run(ReasoningParser parser, const std::vector<std::string>& chunks, std::vector<ReasoningDelta>* deltas = nullptr) {
    Split out;
    for (const auto& c : chunks) {
        auto d = parser.feed(c);
        out.reasoning += d.reasoning;
        out.content += d.content;
        if (deltas) deltas->push_back(d);
    }
    auto d = parser.finish();
    out.reasoning += d.reasoning;
    out.content += d.content;
    if (deltas) deltas->push_back(d);
    return out;
}

// An independent, character-at-a-time statement of the rules in reasoning_parser.h, for whole texts.
Split reference(std::string_view text, const ReasoningMarkers& m, bool inside) {
    Split out;
    bool strip = true;
    std::size_t i = 0;
    while (i < text.size()) {
        if (text.substr(i).starts_with(m.open)) {
            inside = true;
            strip = true;
            i += m.open.size();
        } else if (text.substr(i).starts_with(m.close)) {
            inside = false;
            strip = true;
            i += m.close.size();
        } else {
            const char c = text[i++];
            if (strip && (c == '\n' || c == '\r')) continue;
            strip = false;
            (inside ? out.reasoning : out.content) += c;
        }
    }
    return out;
}

const ReasoningMarkers kM3{"<mm:think>", "</mm:think>"};

TEST(ReasoningParser, EnabledModeStartsInsideReasoning) {
    const std::string text = "\nLet me think.\n</mm:think>\n\nThe answer is 4.";
    const auto out = run(ReasoningParser(kM3, true), {text});
    EXPECT_EQ(out, (Split{"Let me think.\n", "The answer is 4."}));
}

TEST(ReasoningParser, AdaptiveModeMayOpenReasoning) {
    EXPECT_EQ(run(ReasoningParser(kM3, false), {"<mm:think>hmm</mm:think>yes"}), (Split{"hmm", "yes"}));
    EXPECT_EQ(run(ReasoningParser(kM3, false), {"just content"}), (Split{"", "just content"}));
    EXPECT_EQ(run(ReasoningParser(kM3, false), {"before <mm:think>r</mm:think> after"}), (Split{"r", "before  after"}));
}

TEST(ReasoningParser, UnterminatedReasoningIsAllReasoning) {
    EXPECT_EQ(run(ReasoningParser(kM3, true), {"still thinking </mm:th"}), (Split{"still thinking </mm:th", ""}));
}

TEST(ReasoningParser, StrayMarkersNeverReachContent) {
    // A leading close marker with thinking disabled (vLLM bug 46042's symptom) and a repeated open marker.
    EXPECT_EQ(run(ReasoningParser(kM3, false), {"</mm:think>\n\nHello"}), (Split{"", "Hello"}));
    EXPECT_EQ(run(ReasoningParser(kM3, true), {"<mm:think>a</mm:think>b</mm:think>c"}), (Split{"a", "bc"}));
}

TEST(ReasoningParser, MarkerSplitAcrossEveryBoundaryIsHeldBack) {
    const std::string text = "abc</mm:think>def";
    for (std::size_t cut = 1; cut < text.size(); ++cut) {
        std::vector<ReasoningDelta> deltas;
        const auto out = run(ReasoningParser(kM3, true), cut_at(text, {cut}), &deltas);
        EXPECT_EQ(out, (Split{"abc", "def"})) << "cut at " << cut;
        for (const auto& d : deltas) {
            EXPECT_EQ(d.content.find('<'), std::string::npos) << "cut at " << cut;
            EXPECT_EQ(d.reasoning.find('<'), std::string::npos) << "cut at " << cut;
        }
    }
    // Released as soon as it cannot be a marker any more.
    ReasoningParser p(kM3, true);
    EXPECT_EQ(p.feed("x </mm:").reasoning, "x ");
    EXPECT_EQ(p.feed("x").reasoning, "</mm:x");
}

TEST(ReasoningParser, M2Markers) {
    const auto markers = reasoning_markers("minimax_m2");
    EXPECT_EQ(run(ReasoningParser(markers, true), {"a</think>b"}), (Split{"a", "b"}));
    // M2.5 emits the open marker although the template pre-filled it.
    EXPECT_EQ(run(ReasoningParser(markers, true), {"<think>a</think>b"}), (Split{"a", "b"}));
}

TEST(ReasoningParser, StartDecidedFromPromptTailOnly) {
    // The prompt mentions the markers in its instructions; only its end matters.
    const std::string instructions = "Think inside <mm:think></mm:think> before answering.\nuser: hi\nassistant: ";
    EXPECT_FALSE(generation_starts_in_reasoning("minimax_m3", instructions, ThinkingMode::enabled));
    EXPECT_TRUE(generation_starts_in_reasoning("minimax_m3", instructions + "<mm:think>\n", ThinkingMode::disabled));
    EXPECT_FALSE(generation_starts_in_reasoning("minimax_m3", instructions + "<mm:think></mm:think>\n",
                                                ThinkingMode::enabled));
    EXPECT_TRUE(generation_starts_in_reasoning("minimax_m3", std::nullopt, ThinkingMode::enabled));
    EXPECT_FALSE(generation_starts_in_reasoning("minimax_m3", std::nullopt, ThinkingMode::adaptive));
    EXPECT_FALSE(generation_starts_in_reasoning("minimax_m3", std::nullopt, ThinkingMode::disabled));
    EXPECT_TRUE(generation_starts_in_reasoning("minimax_m2", std::nullopt, ThinkingMode::unspecified));
    EXPECT_THROW(reasoning_markers("deepseek"), Error);
    EXPECT_EQ(parse_thinking_mode("adaptive"), ThinkingMode::adaptive);
    EXPECT_THROW(parse_thinking_mode("on"), Error);
}

// Texts built from pieces that exercise markers, partial markers and line breaks.
rc::Gen<std::string> marker_soup() {
    return rc::gen::map(rc::gen::container<std::vector<std::string>>(rc::gen::element<std::string>(
                            "<mm:think>", "</mm:think>", "<mm:th", "</mm:", "<", "/", ">", "\n", "\r\n", "a", "think",
                            "mm", "é", " ", "</mm:think", "<mm:think")),
                        [](const std::vector<std::string>& parts) {
                            std::string s;
                            for (const auto& p : parts) s += p;
                            return s;
                        });
}

RC_GTEST_PROP(ReasoningParserProperty, AnyChunkingMatchesReference, ()) {
    const std::string text = *marker_soup();
    const bool inside = *rc::gen::arbitrary<bool>();
    const auto seed = *rc::gen::arbitrary<std::uint64_t>();
    const Split expected = reference(text, kM3, inside);
    RC_ASSERT(run(ReasoningParser(kM3, inside), {text}) == expected);
    RC_ASSERT(run(ReasoningParser(kM3, inside), byte_chunks(text)) == expected);
    RC_ASSERT(run(ReasoningParser(kM3, inside), random_chunks(text, seed)) == expected);
}

RC_GTEST_PROP(ReasoningParserProperty, GeneratedMarkersNeverReachContent, ()) {
    // Whole markers among ordinary text (a marker spelled out of broken pieces around another marker, like
    // "</mm:</mm:think>think>", is text the model wrote, not a marker).
    const auto parts = *rc::gen::container<std::vector<std::string>>(
        rc::gen::element<std::string>("<mm:think>", "</mm:think>", "a", "\n", "\n\n", "x y", "<b>", "é"));
    std::string text;
    for (const auto& p : parts) text += p;
    const auto out = run(ReasoningParser(kM3, *rc::gen::arbitrary<bool>()), random_chunks(text, parts.size()));
    for (const auto* channel : {&out.content, &out.reasoning}) {
        RC_ASSERT(channel->find("<mm:think>") == std::string::npos);
        RC_ASSERT(channel->find("</mm:think>") == std::string::npos);
    }
}

TEST(ReasoningParserProperty, EverySplitPointOfAFullExample) {
    const std::string text = "\n<mm:think>\nplan: call the tool\n</mm:think>\n\nHere is <b>bold</b> text";
    const Split expected = reference(text, kM3, false);
    EXPECT_EQ(expected, (Split{"plan: call the tool\n", "Here is <b>bold</b> text"}));
    for (std::size_t a = 1; a < text.size(); ++a) {
        for (std::size_t b = a; b < text.size(); b += 3) {
            ASSERT_EQ(run(ReasoningParser(kM3, false), cut_at(text, {a, b})), expected) << a << "," << b;
        }
    }
}

}  // namespace
}  // namespace msa::server
