// Stop strings over streamed text: streamed output equals the text cut at the first completed stop string (a
// reference computed on the whole text at once), and nothing that could still become a stop string leaks early.
#include "engine/stop_string_matcher.h"
#include "engine/request_rng.h"

#include <gtest/gtest.h>

namespace msa {
namespace {

struct Streamed {
    std::string text;
    std::optional<std::string> matched;
    std::vector<std::string> pieces;
};

Streamed stream(StopStringMatcher& m, const std::vector<std::string>& chunks) {
    Streamed s;
    for (const auto& c : chunks) {
        auto r = m.push(c, true);
        s.text += r.text;
        s.pieces.push_back(r.text);
        if (r.matched) {
            s.matched = r.matched;
            return s;
        }
    }
    s.text += m.flush();
    return s;
}

TEST(StopStringMatcher, MatchesAcrossChunksAndCutsTheStopString) {
    StopStringMatcher m({"STOP"}, false);
    const Streamed s = stream(m, {"hello S", "T", "OP and more"});
    EXPECT_EQ(s.text, "hello ");
    EXPECT_EQ(s.matched, "STOP");
    EXPECT_EQ(s.pieces[0], "hello ");  // "S" is held back: it may start "STOP"
    EXPECT_EQ(s.pieces[1], "");
}

TEST(StopStringMatcher, IncludesTheStopStringWhenAsked) {
    StopStringMatcher m({"STOP"}, true);
    EXPECT_EQ(stream(m, {"ab", "STO", "Pcd"}).text, "abSTOP");
}

TEST(StopStringMatcher, ReleasesHeldTextThatIsNotAStop) {
    StopStringMatcher m({"STOP"}, false);
    auto r = m.push("ST", true);
    EXPECT_EQ(r.text, "");
    r = m.push("ART", true);
    EXPECT_EQ(r.text, "START");
    EXPECT_FALSE(r.matched);
    r = m.push("ST", true);
    EXPECT_EQ(m.flush(), "ST");  // generation ended for another reason: held text is plain text
}

TEST(StopStringMatcher, FirstCompletedStopWins) {
    StopStringMatcher m({"abcd", "bc"}, false);
    const Streamed s = stream(m, {"xab", "cd"});
    EXPECT_EQ(s.matched, "bc");
    EXPECT_EQ(s.text, "xa");
}

TEST(StopStringMatcher, InactiveMatcherHoldsButDoesNotStop) {
    // Before min_tokens, a stop string is plain text; a match must end in text appended while active.
    StopStringMatcher m({"END"}, false);
    auto r = m.push("xEND", false);
    EXPECT_FALSE(r.matched);
    EXPECT_EQ(r.text, "xEND");
    r = m.push("E", false);
    EXPECT_EQ(r.text, "");
    r = m.push("ND", true);
    EXPECT_EQ(r.matched, "END");
    EXPECT_EQ(r.text, "");
}

TEST(StopStringMatcher, MultibyteStopStrings) {
    StopStringMatcher m({"\xE2\x82\xAC!"}, false);
    const Streamed s = stream(m, {"5 \xE2\x82", "\xAC", "!tail"});
    EXPECT_EQ(s.text, "5 ");
    EXPECT_TRUE(s.matched);
}

// Reference on the whole text: cut at the start of the stop string that completes first.
std::pair<std::string, bool> reference(const std::string& text, const std::vector<std::string>& stops) {
    std::size_t best_end = std::string::npos, best_pos = 0;
    for (const auto& s : stops) {
        const std::size_t pos = text.find(s);
        if (pos == std::string::npos) continue;
        const std::size_t end = pos + s.size();
        if (best_end == std::string::npos || end < best_end || (end == best_end && pos < best_pos)) {
            best_end = end;
            best_pos = pos;
        }
    }
    if (best_end == std::string::npos) return {text, false};
    return {text.substr(0, best_pos), true};
}

TEST(StopStringMatcher, RandomStreamsMatchTheWholeTextReference) {
    const std::string letters = "abcS";
    for (int trial = 0; trial < 5000; ++trial) {
        RequestRng rng(trial, 7);
        int draw = 0;
        auto random_string = [&](int max_len) {
            std::string s;
            const int len = 1 + static_cast<int>(rng.uniform(draw++) * max_len);
            for (int i = 0; i < len; ++i) s.push_back(letters[static_cast<int>(rng.uniform(draw++) * letters.size())]);
            return s;
        };
        std::vector<std::string> stops = {random_string(4)};
        if (rng.uniform(draw++) < 0.5) stops.push_back(random_string(3));
        const std::string text = random_string(30);
        std::vector<std::string> chunks;
        for (std::size_t pos = 0; pos < text.size();) {
            const std::size_t n = 1 + static_cast<std::size_t>(rng.uniform(draw++) * 4);
            chunks.push_back(text.substr(pos, n));
            pos += n;
        }
        const auto [expected_text, expected_stop] = reference(text, stops);
        StopStringMatcher m(stops, false);
        std::string emitted;
        bool matched = false;
        for (const auto& c : chunks) {
            auto r = m.push(c, true);
            emitted += r.text;
            // What is emitted is final: always a prefix of the expected output.
            ASSERT_EQ(expected_text.compare(0, emitted.size(), emitted), 0) << "trial " << trial;
            if (r.matched) {
                matched = true;
                break;
            }
            // Only a proper prefix of some stop string is held back, and it is the longest such suffix.
            const std::string& held = m.held();
            bool is_prefix = held.empty();
            for (const auto& stop : stops)
                is_prefix |= held.size() < stop.size() && stop.compare(0, held.size(), held) == 0;
            ASSERT_TRUE(is_prefix) << "trial " << trial << " holds '" << held << "'";
            const std::string seen = emitted + held;
            for (std::size_t len = held.size() + 1; len <= seen.size(); ++len) {
                const std::string suffix = seen.substr(seen.size() - len);
                for (const auto& stop : stops) {
                    ASSERT_FALSE(len < stop.size() && stop.compare(0, len, suffix) == 0)
                        << "trial " << trial << ": released '" << suffix << "' that may start a stop string";
                }
            }
        }
        if (!matched) emitted += m.flush();
        ASSERT_EQ(emitted, expected_text) << "trial " << trial << " text " << text;
        ASSERT_EQ(matched, expected_stop) << "trial " << trial;
    }
}

}  // namespace
}  // namespace msa
