#include "engine/tiny_model.h"

#include "model/random_checkpoint.h"
#include "support/test_configs.h"

#include <algorithm>
#include <fstream>
#include <numeric>

namespace msa::testing {

namespace fs = std::filesystem;

namespace {

// ChatML, the format the tiny tokenizer's special tokens are made for.
constexpr const char* kChatTemplate =
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}";

void write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

}  // namespace

void write_tiny_model_dir(const fs::path& dir, const TinyModelDirSpec& spec) {
    fs::remove_all(dir);
    test::TinyConfig c;
    c.vocab = spec.vocab;
    c.topk_blocks = spec.topk_blocks;
    RandomCheckpointSpec rs;
    rs.config_json = test::tiny_config_json(c);
    rs.seed = spec.seed;
    write_random_checkpoint(dir, rs);
    if (!spec.with_tokenizer) return;
    fs::copy_file(fs::path(MSA_SOURCE_DIR) / "tests/tokenizer/data/tiny_tokenizer.json", dir / "tokenizer.json");
    write_text(dir / "chat_template.jinja", kChatTemplate);
    write_text(dir / "tokenizer_config.json", R"({"eos_token": "<|im_end|>", "bos_token": null})");
    write_text(dir / "generation_config.json", R"({"eos_token_id": [656], "temperature": 0.7, "top_k": 20})");
}

std::vector<std::int32_t> direct_greedy(MiniMaxM3Model& model, const std::vector<std::int32_t>& prompt, int n) {
    std::vector<std::int32_t> pages(static_cast<std::size_t>(model.num_kv_pages()));
    std::iota(pages.begin(), pages.end(), 0);
    std::vector<std::int32_t> seq = prompt, out;
    std::int32_t past = 0;
    ForwardOutput fo;
    while (static_cast<int>(out.size()) < n) {
        ForwardBatch batch;
        SequenceStep s;
        s.tokens = std::span<const std::int32_t>(seq.data() + past, seq.size() - static_cast<std::size_t>(past));
        s.past_len = past;
        s.pages = pages;
        s.num_logits = 1;
        batch.seqs.push_back(s);
        model.forward(batch, {}, fo);
        past = static_cast<std::int32_t>(seq.size());
        const auto next =
            static_cast<std::int32_t>(std::max_element(fo.logits.begin(), fo.logits.end()) - fo.logits.begin());
        out.push_back(next);
        seq.push_back(next);
    }
    return out;
}

}  // namespace msa::testing
