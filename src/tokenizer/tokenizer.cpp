#include "tokenizer/tokenizer.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/decoder.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"

namespace msa {

namespace jf = json_fields;

struct Tokenizer::Impl {
    std::unique_ptr<Normalizer> normalizer;
    std::unique_ptr<PreTokenizer> pre_tokenizer;
    std::unique_ptr<BpeModel> model;
    AddedVocabulary added;
    PostProcessor post_processor;
    DecoderKind decoder = DecoderKind::kJoinWithSpaces;

    // Per id: what decoding contributes (bytes or string), whether the id exists, whether it is special.
    std::string decoded_arena;
    std::vector<std::uint32_t> decoded_offset;  // id_limit + 1 entries
    std::vector<bool> known;
    std::vector<bool> special;

    void build_decoding_tables();
    // The string Hugging Face shows for an added token when decoding: a normalized token's normalized form.
    std::string added_token_string(const AddedToken& token) const {
        std::string s = token.content;
        if (token.normalized && normalizer) normalizer->normalize(s);
        return s;
    }
    std::string_view token_bytes(TokenId id) const {
        if (id < 0 || static_cast<std::size_t>(id) >= known.size()) return {};
        return std::string_view(decoded_arena).substr(decoded_offset[id], decoded_offset[id + 1] - decoded_offset[id]);
    }
};

void Tokenizer::Impl::build_decoding_tables() {
    std::size_t limit = model->id_limit();
    for (const AddedToken& token : added.tokens()) limit = std::max(limit, static_cast<std::size_t>(token.id) + 1);
    known.assign(limit, false);
    special.assign(limit, false);
    decoded_offset.assign(limit + 1, 0);
    decoded_arena.clear();
    for (std::size_t id = 0; id < limit; ++id) {
        decoded_offset[id] = static_cast<std::uint32_t>(decoded_arena.size());
        const auto tid = static_cast<TokenId>(id);
        const std::string* token = nullptr;
        std::string normalized_content;
        if (const AddedToken* a = added.find_by_id(tid)) {
            token = &a->content;
            if (a->normalized && normalizer) {
                normalized_content = added_token_string(*a);
                token = &normalized_content;
            }
        } else {
            token = model->id_to_token(tid);
        }
        if (token == nullptr) continue;
        known[id] = true;
        // Hugging Face tests the decoded string (for a normalized token, its normalized form) against the contents
        // of the special tokens.
        special[id] = added.is_special_content(*token);
        if (decoder == DecoderKind::kByteLevel) {
            // A token whose characters are not all ByteLevel characters (e.g. "<｜begin▁of▁sentence｜>") decodes
            // to its own UTF-8 bytes.
            if (!byte_level::append_unmapped(decoded_arena, *token)) decoded_arena += *token;
        } else {
            decoded_arena += *token;
        }
    }
    decoded_offset[limit] = static_cast<std::uint32_t>(decoded_arena.size());
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    MSA_CHECK(in.good(), "cannot open tokenizer file {}", path);
    std::ostringstream contents;
    contents << in.rdbuf();
    MSA_CHECK(!in.bad(), "cannot read tokenizer file {}", path);
    return from_string(contents.str(), path);
}

Tokenizer Tokenizer::from_string(std::string_view json_text, const std::string& source) {
    nlohmann::json config;
    try {
        config = nlohmann::json::parse(json_text);
    } catch (const nlohmann::json::parse_error& e) {
        fail("{} is not valid JSON: {}", source, e.what());
    }
    return from_json(config, source);
}

Tokenizer Tokenizer::from_json(const nlohmann::json& config, const std::string& source) {
    MSA_CHECK(config.is_object(), "{} must hold a JSON object (a Hugging Face tokenizer.json), not {}", source,
              config.type_name());
    const auto field = [&](const char* key) -> const nlohmann::json& {
        static const nlohmann::json null_value;
        const auto it = config.find(key);
        return it == config.end() ? null_value : *it;
    };
    const auto where = [&](const char* key) { return source + ": " + key; };
    auto impl = std::make_unique<Impl>();
    try {
        MSA_CHECK(config.contains("model"), "{} has no \"model\" field; is it a Hugging Face tokenizer.json?", source);
        impl->model = BpeModel::from_json(config["model"], where("model"));
        impl->normalizer = make_normalizer(field("normalizer"), where("normalizer"));
        impl->pre_tokenizer = make_pre_tokenizer(field("pre_tokenizer"), where("pre_tokenizer"));
        impl->post_processor = PostProcessor::from_json(field("post_processor"), where("post_processor"));
        impl->decoder = decoder_kind_from_json(field("decoder"), where("decoder"));

        const nlohmann::json& added = field("added_tokens");
        std::vector<AddedToken> tokens;
        std::vector<TokenId> file_ids;
        if (!added.is_null()) {
            MSA_CHECK(added.is_array(), "{} must be an array", where("added_tokens"));
            for (std::size_t i = 0; i < added.size(); ++i) {
                const std::string at = jf::element(where("added_tokens"), i);
                const nlohmann::json& entry = added[i];
                AddedToken token;
                token.content = jf::required_string(entry, "content", at);
                token.special = jf::boolean(entry, "special", false, at);
                token.single_word = jf::boolean(entry, "single_word", false, at);
                token.lstrip = jf::boolean(entry, "lstrip", false, at);
                token.rstrip = jf::boolean(entry, "rstrip", false, at);
                token.normalized = jf::boolean(entry, "normalized", true, at);
                const nlohmann::json& id = jf::require(entry, "id", at);
                MSA_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0, "{}.id must be a non-negative integer",
                          at);
                file_ids.push_back(id.get<TokenId>());
                tokens.push_back(std::move(token));
            }
        }
        impl->added.add(std::move(tokens), file_ids, *impl->model, impl->normalizer.get());
    } catch (const nlohmann::json::exception& e) {
        fail("{}: unexpected JSON content: {}", source, e.what());
    }
    impl->build_decoding_tables();
    return Tokenizer(std::move(impl));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
    std::vector<TokenId> ids;
    encode(text, add_special_tokens, ids);
    return ids;
}

void Tokenizer::encode(std::string_view text, bool add_special_tokens, std::vector<TokenId>& out) const {
    const std::size_t valid = utf8::valid_prefix_length(text);
    MSA_CHECK(valid == text.size(), "cannot tokenize text that is not valid UTF-8 (bad byte 0x{:02X} at offset {} of {})",
              static_cast<unsigned char>(text[valid]), valid, text.size());
    // Pieces are 32-bit offsets into buffers that can grow to twice the text (ByteLevel characters).
    MSA_CHECK(text.size() < (std::size_t{1} << 30), "cannot tokenize a text of {} bytes in one call (the limit is 1 GiB)",
              text.size());
    thread_local PieceList list;
    impl_->added.extract_and_normalize(text, impl_->normalizer.get(), list);
    if (impl_->pre_tokenizer) impl_->pre_tokenizer->pre_tokenize(list);
    std::vector<TokenId> ids;
    std::vector<TokenId>& target = impl_->post_processor.adds_tokens() && add_special_tokens ? ids : out;
    if (&target == &ids) ids.reserve(text.size() / 3 + 4);
    for (const Piece& piece : list.pieces) {
        if (piece.token >= 0) {
            target.push_back(piece.token);
        } else {
            impl_->model->tokenize(list.view(piece), list.byte_level, target);
        }
    }
    if (&target == &ids) {
        impl_->post_processor.process(ids, add_special_tokens);
        out.insert(out.end(), ids.begin(), ids.end());
    }
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
    const Impl& impl = *impl_;
    std::string bytes;
    bool first = true;
    for (const TokenId id : ids) {
        if (id < 0 || static_cast<std::size_t>(id) >= impl.known.size() || !impl.known[id]) continue;
        if (skip_special_tokens && impl.special[id]) continue;
        if (impl.decoder == DecoderKind::kJoinWithSpaces && !first) bytes += ' ';
        bytes += impl.token_bytes(id);
        first = false;
    }
    if (impl.decoder == DecoderKind::kByteLevel) return utf8::decode_lossy(bytes);
    return bytes;
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
    if (const auto id = impl_->added.find_by_content(token)) return id;
    return impl_->model->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(TokenId id) const {
    if (const AddedToken* a = impl_->added.find_by_id(id)) return impl_->added_token_string(*a);
    if (const std::string* t = impl_->model->id_to_token(id)) return *t;
    return std::nullopt;
}

bool Tokenizer::is_special(TokenId id) const {
    return id >= 0 && static_cast<std::size_t>(id) < impl_->special.size() && impl_->special[id];
}

bool Tokenizer::contains_id(TokenId id) const {
    return id >= 0 && static_cast<std::size_t>(id) < impl_->known.size() && impl_->known[id];
}

std::size_t Tokenizer::id_limit() const { return impl_->known.size(); }

const std::vector<TokenId>& Tokenizer::template_prefix() const { return impl_->post_processor.prefix(); }
const std::vector<TokenId>& Tokenizer::template_suffix() const { return impl_->post_processor.suffix(); }

std::string_view Tokenizer::token_bytes(TokenId id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= impl_->known.size() || !impl_->known[id]) return {};
    return impl_->token_bytes(id);
}

bool Tokenizer::joins_with_spaces() const { return impl_->decoder == DecoderKind::kJoinWithSpaces; }

}  // namespace msa
