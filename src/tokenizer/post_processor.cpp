#include "tokenizer/post_processor.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/json_fields.h"

namespace msa {
namespace {

namespace jf = json_fields;

// A ["token", id] pair of BertProcessing / RobertaProcessing.
TokenId pair_id(const nlohmann::json& config, std::string_view key, const std::string& where) {
    const nlohmann::json& pair = jf::require(config, key, where);
    MSA_CHECK(pair.is_array() && pair.size() == 2 && pair[1].is_number_integer(),
              "{} must be a [\"token\", id] pair, not {}", jf::child(where, key), pair.dump());
    return pair[1].get<TokenId>();
}

}  // namespace

void PostProcessor::process(std::vector<TokenId>& ids, bool add_special_tokens) const {
    if (!add_special_tokens) return;
    if (!prefix_.empty()) ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
    ids.insert(ids.end(), suffix_.begin(), suffix_.end());
}

PostProcessor PostProcessor::from_json(const nlohmann::json& config, const std::string& where) {
    PostProcessor processor;
    if (!config.is_null()) processor.append(config, where);
    return processor;
}

void PostProcessor::append(const nlohmann::json& config, const std::string& where) {
    const std::string type = jf::type_of(config, where);
    std::vector<TokenId> before, after;
    if (type == "ByteLevel") {
        return;  // offsets only
    } else if (type == "Sequence") {
        const nlohmann::json& list = jf::require(config, "processors", where);
        MSA_CHECK(list.is_array(), "{}.processors must be an array", where);
        for (std::size_t i = 0; i < list.size(); ++i) append(list[i], jf::element(jf::child(where, "processors"), i));
        return;
    } else if (type == "BertProcessing" || type == "RobertaProcessing") {
        before.push_back(pair_id(config, "cls", where));
        after.push_back(pair_id(config, "sep", where));
    } else if (type == "TemplateProcessing") {
        const std::string single_where = jf::child(where, "single");
        const nlohmann::json& single = jf::require(config, "single", where);
        const nlohmann::json& specials = jf::require(config, "special_tokens", where);
        MSA_CHECK(single.is_array(), "{} must be an array of template pieces", single_where);
        bool seen_sequence = false;
        for (std::size_t i = 0; i < single.size(); ++i) {
            const std::string item_where = jf::element(single_where, i);
            const nlohmann::json& item = single[i];
            if (item.is_object() && item.contains("Sequence")) {
                const std::string id = jf::required_string(item["Sequence"], "id", jf::child(item_where, "Sequence"));
                MSA_CHECK(id == "A" && !seen_sequence,
                          "{}: a single-sequence template must contain the sequence $A exactly once", item_where);
                seen_sequence = true;
            } else if (item.is_object() && item.contains("SpecialToken")) {
                const std::string name =
                    jf::required_string(item["SpecialToken"], "id", jf::child(item_where, "SpecialToken"));
                const std::string special_where = jf::child(where, "special_tokens");
                MSA_CHECK(specials.is_object() && specials.contains(name),
                          "{} uses special token \"{}\", which {} does not define", item_where, name, special_where);
                const nlohmann::json& ids = jf::require(specials[name], "ids", special_where + "[\"" + name + "\"]");
                MSA_CHECK(ids.is_array(), "{}[\"{}\"].ids must be an array of ids", special_where, name);
                for (const auto& id : ids) {
                    MSA_CHECK(id.is_number_integer(), "{}[\"{}\"].ids must hold integer ids", special_where, name);
                    (seen_sequence ? after : before).push_back(id.get<TokenId>());
                }
            } else {
                fail("{} must be {{\"Sequence\": ...}} or {{\"SpecialToken\": ...}}, not {}", item_where, item.dump());
            }
        }
        MSA_CHECK(seen_sequence, "{} has no {{\"Sequence\": {{\"id\": \"A\"}}}} item", single_where);
    } else {
        fail("{}: post-processor type \"{}\" is not supported (supported: TemplateProcessing, BertProcessing, "
             "RobertaProcessing, ByteLevel, Sequence)",
             where, type);
    }
    // A later processor wraps what the earlier ones produced.
    before.insert(before.end(), prefix_.begin(), prefix_.end());
    prefix_ = std::move(before);
    suffix_.insert(suffix_.end(), after.begin(), after.end());
}

}  // namespace msa
