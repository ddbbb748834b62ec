#include "server/tool_call_parser.h"

#include "chunking.h"
#include "server/tool_argument_converter.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace msa::server {
namespace {

using nlohmann::json;
using testing::byte_chunks;
using testing::cut_at;
using testing::random_chunks;

const std::string kNs = "]<]minimax[>[";

std::vector<ToolDefinition> weather_tools() {
    ToolDefinition weather;
    weather.name = "get_weather";
    weather.parameters = json::parse(R"({"type":"object","properties":{
        "city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"},
        "ratio":{"type":"number"},"tags":{"type":"array","items":{"type":"string"}},
        "stops":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}}}},
        "opts":{"type":"object","properties":{"depth":{"type":"integer"},"mode":{"type":"string"}}},
        "maybe":{"type":["integer","null"]},"anything":{}}})");
    ToolDefinition write;
    write.name = "write_file";
    write.parameters = json::parse(R"({"type":"object","properties":{"path":{"type":"string"},
                                                                      "content":{"type":"string"}}})");
    return {weather, write};
}

IdGenerator counting_ids() {
    auto n = std::make_shared<int>(0);
    return [n] { return "call_" + std::to_string((*n)++); };
}

struct Parsed {
    std::string content;
    std::vector<ToolCallResult> calls;
    std::vector<std::string> streamed_args;  // per call index, the concatenation of its fragments
    std::vector<ToolCallFragment> fragments;
};

Parsed run(ToolCallFormat format, const std::vector<ToolDefinition>& tools, const std::vector<std::string>& chunks,
           std::size_t max_calls = 100) {
    ToolCallParser parser(format, tools, counting_ids(), max_calls);
    Parsed out;
    const auto take = [&](ToolParseDelta d) {
        out.content += d.content;
        for (auto& f : d.tool_calls) {
            if (static_cast<std::size_t>(f.index) >= out.streamed_args.size()) out.streamed_args.resize(f.index + 1);
            out.streamed_args[f.index] += f.arguments;
            out.fragments.push_back(f);
        }
    };
    for (const auto& c : chunks) take(parser.feed(c));
    take(parser.finish());
    out.calls = parser.calls();
    return out;
}

void expect_well_formed(const Parsed& p) {
    ASSERT_EQ(p.streamed_args.size(), p.calls.size());
    std::vector<bool> started(p.calls.size(), false);
    for (const auto& f : p.fragments) {
        // The first fragment of a call carries its id and name; later ones only argument text.
        EXPECT_EQ(f.first, !started[f.index]);
        if (f.first) {
            EXPECT_EQ(f.id, p.calls[f.index].id);
            EXPECT_EQ(f.name, p.calls[f.index].name);
        }
        started[f.index] = true;
    }
    for (std::size_t i = 0; i < p.calls.size(); ++i) {
        EXPECT_EQ(p.streamed_args[i], p.calls[i].arguments);
        EXPECT_FALSE(json::parse(p.calls[i].arguments, nullptr, false).is_discarded()) << p.calls[i].arguments;
    }
}

std::string m3_call(const std::string& name, const std::vector<std::pair<std::string, std::string>>& params) {
    std::string s = kNs + "<invoke name=\"" + name + "\">";
    for (const auto& [k, v] : params) s += kNs + "<" + k + ">" + v + kNs + "</" + k + ">";
    return s + kNs + "</invoke>\n";
}

std::string m3_block(const std::string& calls) { return kNs + "<tool_call>\n" + calls + kNs + "</tool_call>"; }

TEST(ToolCallParserM3, SpecExample) {
    const auto tools = weather_tools();
    const std::string text =
        "Let me check." + m3_block(m3_call("get_weather", {{"city", "Paris"}, {"days", "3"}}));
    const auto p = run(ToolCallFormat::minimax_m3, tools, {text});
    EXPECT_EQ(p.content, "Let me check.");
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(p.calls[0].id, "call_0");
    EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris","days":3})");
    expect_well_formed(p);
}

TEST(ToolCallParserM3, ParallelCallsInOneWrapper) {
    const auto tools = weather_tools();
    const std::string text = m3_block(m3_call("get_weather", {{"city", "Paris"}}) +
                                      m3_call("get_weather", {{"city", "Rome"}, {"metric", "true"}}));
    const auto p = run(ToolCallFormat::minimax_m3, tools, {text});
    ASSERT_EQ(p.calls.size(), 2u);
    EXPECT_EQ(json::parse(p.calls[1].arguments), json({{"city", "Rome"}, {"metric", true}}));
    EXPECT_NE(p.calls[0].id, p.calls[1].id);
    expect_well_formed(p);
    // parallel_tool_calls=false: only the first is reported.
    const auto one = run(ToolCallFormat::minimax_m3, tools, {text}, 1);
    ASSERT_EQ(one.calls.size(), 1u);
    EXPECT_EQ(one.calls[0].arguments, R"({"city":"Paris"})");
    expect_well_formed(one);
}

TEST(ToolCallParserM3, NestedItemsAndObjectsFollowTheSchema) {
    const auto tools = weather_tools();
    const std::string tags = kNs + "<item>a" + kNs + "</item>" + kNs + "<item>b" + kNs + "</item>";
    const std::string stops = kNs + "<item>" + kNs + "<name>x" + kNs + "</name>" + kNs + "<n>2" + kNs + "</n>" + kNs +
                              "</item>";
    const std::string opts = kNs + "<depth>4" + kNs + "</depth>" + kNs + "<mode>fast" + kNs + "</mode>";
    const auto p = run(ToolCallFormat::minimax_m3, tools,
                       {m3_block(m3_call("get_weather", {{"tags", tags}, {"stops", stops}, {"opts", opts}}))});
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(json::parse(p.calls[0].arguments),
              json::parse(R"({"tags":["a","b"],"stops":[{"name":"x","n":2}],"opts":{"depth":4,"mode":"fast"}})"));
    expect_well_formed(p);
}

TEST(ToolCallParserM3, ClosingTagInsideValueIsText) {
    const auto tools = weather_tools();
    // A plain </city>, and even a namespaced one that is not followed by structure, stay in the value.
    const std::string value = "a </city> b " + kNs + "</city> c";
    const auto p = run(ToolCallFormat::minimax_m3, tools, {m3_block(m3_call("get_weather", {{"city", value}}))});
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(json::parse(p.calls[0].arguments)["city"], value);
}

// Found by the fuzz target (fuzz/corpus/fuzz_tool_call_parser/regression_marker_inside_closing_tag): `NS</` whose
// '>' is that of the next marker is text, not a tag named "]<]minimax[" that swallows the start of that marker. The
// parse must not depend on where the chunks end; it did, for chunks of 5, 5, 1, 1, ... bytes.
TEST(ToolCallParserM3, MarkerInsideATagIsTextWhateverTheChunks) {
    const auto tools = weather_tools();
    const std::string text = kNs + "<invoke>" + kNs + "<s>" + kNs + "<iem>" + kNs + "</" + kNs + "</invoke>";
    const auto whole = run(ToolCallFormat::minimax_m3, tools, {text});
    expect_well_formed(whole);
    ASSERT_EQ(whole.calls.size(), 1u);
    std::vector<std::vector<std::string>> chunkings = {byte_chunks(text)};
    for (const std::size_t first : {1, 2, 3, 4, 5, 6}) {
        std::vector<std::string> chunks;
        for (std::size_t pos = 0, i = 0; pos < text.size(); ++i) {
            const std::size_t n = i % 4 < 2 ? first : 1;
            chunks.push_back(text.substr(pos, n));
            pos += n;
        }
        chunkings.push_back(chunks);
    }
    for (std::uint64_t seed = 1; seed <= 20; ++seed) chunkings.push_back(random_chunks(text, seed));
    for (const auto& chunks : chunkings) {
        const auto p = run(ToolCallFormat::minimax_m3, tools, chunks);
        expect_well_formed(p);
        ASSERT_EQ(p.calls.size(), 1u);
        EXPECT_EQ(p.calls[0].arguments, whole.calls[0].arguments) << chunks.size() << " chunks";
    }
}

TEST(ToolCallParserM3, ArgumentsStreamBeforeTheValueEnds) {
    const auto tools = weather_tools();
    ToolCallParser parser(ToolCallFormat::minimax_m3, tools, counting_ids());
    auto d = parser.feed(kNs + "<tool_call>\n" + kNs + "<invoke name=\"get_weather\">" + kNs + "<city>Par");
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_TRUE(d.tool_calls[0].first);
    EXPECT_EQ(d.tool_calls[0].name, "get_weather");
    EXPECT_EQ(d.tool_calls[0].arguments, R"({"city":"Par)");
    d = parser.feed("is, Fr");
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0].arguments, "is, Fr");
    // A possible closing tag is held back, then released when it is not one.
    d = parser.feed("]<]mini");
    EXPECT_TRUE(d.tool_calls.empty());
    d = parser.feed("x");
    EXPECT_EQ(d.tool_calls.at(0).arguments, "]<]minix");
    d = parser.feed(kNs + "</city>" + kNs + "<days>1");
    EXPECT_EQ(d.tool_calls.at(0).arguments, R"(","days":)");  // the integer waits for its end
    d = parser.feed("2" + kNs + "</days>" + kNs + "</invoke>");
    EXPECT_EQ(d.tool_calls.at(0).arguments, "12}");
    parser.finish();
    EXPECT_EQ(parser.calls().at(0).arguments, R"({"city":"Paris, Fr]<]minix","days":12})");
}

TEST(ToolCallParserM3, InvokeWithoutWrapperAndUnterminatedOutput) {
    const auto tools = weather_tools();
    auto p = run(ToolCallFormat::minimax_m3, tools, {m3_call("get_weather", {{"city", "Oslo"}})});
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].arguments, R"({"city":"Oslo"})");
    // Generation stopped (max_tokens) in the middle of a value: the call is closed with what was written.
    p = run(ToolCallFormat::minimax_m3, tools,
            {kNs + "<tool_call>\n" + kNs + "<invoke name=\"get_weather\">" + kNs + "<city>Ber"});
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].arguments, R"({"city":"Ber"})");
    expect_well_formed(p);
}

TEST(ToolCallParserM3, UnknownToolAndParameterAreStrings) {
    const auto p = run(ToolCallFormat::minimax_m3, {}, {m3_block(m3_call("nope", {{"x", "5"}}))});
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].name, "nope");
    EXPECT_EQ(p.calls[0].arguments, R"({"x":"5"})");
}

std::string m2_block(const std::string& body) { return "<minimax:tool_call>\n" + body + "</minimax:tool_call>"; }

TEST(ToolCallParserM2, SpecExample) {
    const auto tools = weather_tools();
    const std::string text = "Checking.\n" + m2_block("<invoke name=\"get_weather\">\n"
                                                      "<parameter name=\"city\">Paris</parameter>\n"
                                                      "<parameter name=\"days\">3</parameter>\n"
                                                      "</invoke>\n"
                                                      "<invoke name='write_file'>\n"
                                                      "<parameter name=\"path\">a.txt</parameter>\n"
                                                      "</invoke>\n");
    const auto p = run(ToolCallFormat::minimax_m2, tools, {text});
    EXPECT_EQ(p.content, "Checking.\n");
    ASSERT_EQ(p.calls.size(), 2u);
    EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris","days":3})");
    EXPECT_EQ(p.calls[1].name, "write_file");
    EXPECT_EQ(p.calls[1].arguments, R"({"path":"a.txt"})");
    expect_well_formed(p);
}

TEST(ToolCallParserM2, ClosingParameterTagInsideStringIsKept) {
    // vLLM issue 44060: writing an XML file whose text contains </parameter>.
    const auto tools = weather_tools();
    const std::string content = "<config>\n  <parameter>x</parameter>\n</config>";
    const std::string text = m2_block("<invoke name=\"write_file\">\n<parameter name=\"path\">c.xml</parameter>\n"
                                      "<parameter name=\"content\">\n" +
                                      content + "\n</parameter>\n</invoke>\n");
    for (const auto& chunks : {std::vector<std::string>{text}, byte_chunks(text)}) {
        const auto p = run(ToolCallFormat::minimax_m2, tools, chunks);
        ASSERT_EQ(p.calls.size(), 1u);
        EXPECT_EQ(json::parse(p.calls[0].arguments)["content"], content);
        expect_well_formed(p);
    }
}

TEST(ToolCallParserM2, TypedConversion) {
    const auto tools = weather_tools();
    const std::string text = m2_block(
        "<invoke name=\"get_weather\">\n<parameter name=\"days\">7</parameter>\n"
        "<parameter name=\"ratio\">0.25</parameter>\n<parameter name=\"metric\">False</parameter>\n"
        "<parameter name=\"tags\">[\"x\", \"y\"]</parameter>\n<parameter name=\"maybe\">null</parameter>\n"
        "<parameter name=\"anything\">{\"k\": 1}</parameter>\n<parameter name=\"city\">null</parameter>\n"
        "<parameter name=\"extra\">12</parameter>\n</invoke>\n");
    const auto p = run(ToolCallFormat::minimax_m2, tools, {text});
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(json::parse(p.calls[0].arguments),
              json::parse(R"({"days":7,"ratio":0.25,"metric":false,"tags":["x","y"],"maybe":null,
                              "anything":{"k":1},"city":null,"extra":"12"})"));
}

TEST(ToolArgumentConverter, PriorityAndFallbacks) {
    const json any_of = json::parse(R"({"anyOf":[{"type":"string"},{"type":"integer"}]})");
    EXPECT_EQ(convert_argument("42", &any_of), json(42));
    EXPECT_EQ(convert_argument("4x", &any_of), json("4x"));
    const json num = {{"type", "number"}};
    EXPECT_EQ(convert_argument("3", &num), json(3));
    EXPECT_EQ(convert_argument("1e3", &num), json(1000.0));
    EXPECT_EQ(convert_argument("abc", &num), json("abc"));
    const json boolean = {{"type", "boolean"}};
    EXPECT_EQ(convert_argument(" TRUE ", &boolean), json(true));
    const json obj = {{"type", "object"}};
    EXPECT_EQ(convert_argument("[1]", &obj), json({1}));  // no allowed type matched: JSON when it is JSON
    const json obj_or_string = {{"type", {"object", "string"}}};
    EXPECT_EQ(convert_argument("[1]", &obj_or_string), json("[1]"));
    EXPECT_EQ(convert_argument("{\"a\":[1]}", &obj), json({{"a", {1}}}));
    const json en = {{"enum", {"a", "b"}}};
    EXPECT_EQ(convert_argument("a", &en), json("a"));
    EXPECT_EQ(convert_argument("5", nullptr), json("5"));
    EXPECT_EQ(convert_argument("null", &num), json(nullptr));
    EXPECT_EQ(convert_argument("99999999999999999999", &num), json(1e20));
}

TEST(ToolCallParser, ForcedPrefixStartsTheCall) {
    const auto tools = weather_tools();
    ToolChoice named{ToolChoice::Mode::named, "get_weather"};
    const std::string prefix = ToolCallParser::forced_prefix(ToolCallFormat::minimax_m3, named);
    ToolCallParser parser(ToolCallFormat::minimax_m3, tools, counting_ids());
    auto d = parser.feed(prefix);
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0].name, "get_weather");
    d.append(parser.feed(kNs + "<city>Lima" + kNs + "</city>" + kNs + "</invoke>\n" + kNs + "</tool_call>"));
    parser.finish();
    EXPECT_EQ(parser.calls().at(0).arguments, R"({"city":"Lima"})");
    EXPECT_EQ(ToolCallParser::forced_prefix(ToolCallFormat::minimax_m2, {ToolChoice::Mode::required, ""}),
              "<minimax:tool_call>\n");
    EXPECT_EQ(ToolCallParser::forced_prefix(ToolCallFormat::minimax_m2, {ToolChoice::Mode::auto_, ""}), "");
}

TEST(ToolCallParser, PlainTextPassesThroughImmediately) {
    ToolCallParser parser(ToolCallFormat::minimax_m3, {}, counting_ids());
    EXPECT_EQ(parser.feed("Hello <b>world</b> a]b").content, "Hello <b>world</b> a]b");
    EXPECT_EQ(parser.feed("x ]<]mini").content, "x ");  // could be the start of a call block
    EXPECT_EQ(parser.feed("mum").content, "]<]minimum");
    EXPECT_FALSE(parser.saw_tool_call());
}

// ---- Round trip: render random calls the way a chat template would, parse them back in any chunking ---------

struct GenParam {
    std::string name;
    std::string type;  // string, integer, number, boolean, string_array, object
    json value;
};

struct GenCall {
    std::string tool;
    std::vector<GenParam> params;
};

rc::Gen<std::string> tricky_string() {
    return rc::gen::map(
        rc::gen::container<std::vector<std::string>>(rc::gen::element<std::string>(
            "a", "Z", " ", "\n", "\t", "<", ">", "/", "</p0>", "</parameter>", "</item>", "<b>", "\"", "\\", "é", "日本",
            "{", "]", "[", "mini", "]<]", "</", "null ")),
        [](const std::vector<std::string>& parts) {
            std::string s;
            for (const auto& p : parts) s += p;
            return s;
        });
}

rc::Gen<GenParam> gen_param(int i) {
    return rc::gen::exec([i] {
        GenParam p;
        p.name = "p" + std::to_string(i);
        p.type = *rc::gen::element<std::string>("string", "integer", "number", "boolean", "string_array", "object");
        if (p.type == "string") {
            auto s = *tricky_string();
            RC_PRE(s != "null");
            p.value = s;
        } else if (p.type == "integer") {
            p.value = *rc::gen::inRange<std::int64_t>(-1000000, 1000000);
        } else if (p.type == "number") {
            p.value = *rc::gen::inRange<int>(-100000, 100000) / 64.0;
        } else if (p.type == "boolean") {
            p.value = *rc::gen::arbitrary<bool>();
        } else if (p.type == "string_array") {
            p.value = json::array();
            const int n = *rc::gen::inRange(0, 4);
            for (int k = 0; k < n; ++k) p.value.push_back(*rc::gen::element<std::string>("x", "y z", "<q>", "1"));
        } else {
            p.value = {{"depth", *rc::gen::inRange(0, 9)}, {"mode", *rc::gen::element<std::string>("fast", "a b")}};
        }
        return p;
    });
}

json schema_of(const GenParam& p) {
    if (p.type == "string_array") return {{"type", "array"}, {"items", {{"type", "string"}}}};
    if (p.type == "object") {
        return {{"type", "object"},
                {"properties", {{"depth", {{"type", "integer"}}}, {"mode", {{"type", "string"}}}}}};
    }
    return {{"type", p.type}};
}

std::string m3_value(const GenParam& p) {
    if (p.type == "string") return p.value.get<std::string>();
    if (p.type == "string_array") {
        if (p.value.empty()) return "[]";
        std::string s;
        for (const auto& v : p.value) s += kNs + "<item>" + v.get<std::string>() + kNs + "</item>";
        return s;
    }
    if (p.type == "object") {
        return kNs + "<depth>" + p.value["depth"].dump() + kNs + "</depth>" + kNs + "<mode>" +
               p.value["mode"].get<std::string>() + kNs + "</mode>";
    }
    return p.value.dump();
}

std::string m2_value(const GenParam& p) {
    return p.type == "string" ? p.value.get<std::string>() : p.value.dump();
}

void check_round_trip(ToolCallFormat format) {
    const int num_calls = *rc::gen::inRange(1, 4);
    std::vector<ToolDefinition> tools;
    std::vector<GenCall> calls;
    for (int c = 0; c < num_calls; ++c) {
        GenCall call;
        call.tool = "tool_" + std::to_string(c);
        const int num_params = *rc::gen::inRange(0, 5);
        ToolDefinition def;
        def.name = call.tool;
        def.parameters = {{"type", "object"}, {"properties", json::object()}};
        for (int i = 0; i < num_params; ++i) {
            call.params.push_back(*gen_param(i));
            def.parameters["properties"][call.params.back().name] = schema_of(call.params.back());
        }
        tools.push_back(def);
        calls.push_back(std::move(call));
    }
    const std::string before = *rc::gen::element<std::string>("", "Sure.", "text with <b> and ]", "\n");
    std::string text = before;
    if (format == ToolCallFormat::minimax_m3) {
        std::string body;
        for (const auto& call : calls) {
            std::vector<std::pair<std::string, std::string>> params;
            for (const auto& p : call.params) params.emplace_back(p.name, m3_value(p));
            body += m3_call(call.tool, params);
        }
        text += m3_block(body);
    } else {
        std::string body;
        for (const auto& call : calls) {
            body += "<invoke name=\"" + call.tool + "\">\n";
            for (const auto& p : call.params) {
                body += "<parameter name=\"" + p.name + "\">\n" + m2_value(p) + "\n</parameter>\n";
            }
            body += "</invoke>\n";
        }
        text += m2_block(body);
    }
    const auto seed = *rc::gen::arbitrary<std::uint64_t>();
    for (const auto& chunks : {std::vector<std::string>{text}, random_chunks(text, seed), byte_chunks(text)}) {
        const Parsed p = run(format, tools, chunks);
        RC_ASSERT(p.content == before);
        RC_ASSERT(p.calls.size() == calls.size());
        RC_ASSERT(p.streamed_args.size() == calls.size());
        for (std::size_t c = 0; c < calls.size(); ++c) {
            RC_ASSERT(p.calls[c].name == calls[c].tool);
            RC_ASSERT(p.streamed_args[c] == p.calls[c].arguments);
            json expected = json::object();
            for (const auto& param : calls[c].params) expected[param.name] = param.value;
            const json got = json::parse(p.calls[c].arguments, nullptr, false);
            RC_ASSERT(!got.is_discarded());
            if (got != expected) {
                RC_FAIL("arguments " + p.calls[c].arguments + " != expected " + expected.dump() + "\ntext: " + text);
            }
        }
    }
}

RC_GTEST_PROP(ToolCallParserProperty, M3RoundTripInAnyChunking, ()) { check_round_trip(ToolCallFormat::minimax_m3); }
RC_GTEST_PROP(ToolCallParserProperty, M2RoundTripInAnyChunking, ()) { check_round_trip(ToolCallFormat::minimax_m2); }

// Arbitrary text (not only well-formed calls): every chunking gives the same content and calls, and the streamed
// fragments always concatenate to valid JSON equal to the final arguments.
RC_GTEST_PROP(ToolCallParserProperty, ArbitraryTextIsChunkingInvariant, ()) {
    const auto format = *rc::gen::element(ToolCallFormat::minimax_m3, ToolCallFormat::minimax_m2);
    const auto parts = *rc::gen::container<std::vector<std::string>>(rc::gen::element<std::string>(
        "]<]minimax[>[", "<tool_call>", "</tool_call>", "<invoke name=\"get_weather\">", "</invoke>", "<city>", "</city>",
        "<days>", "</days>", "<tags>", "</tags>", "<item>", "</item>", "<minimax:tool_call>", "</minimax:tool_call>",
        "<parameter name=\"city\">", "<parameter name=\"days\">", "</parameter>", "Paris", "12", "\n", " ", "<", ">",
        "\"", "é"));
    std::string text;
    for (const auto& p : parts) text += p;
    const auto tools = weather_tools();
    const Parsed whole = run(format, tools, {text});
    for (std::size_t i = 0; i < whole.calls.size(); ++i) {
        RC_ASSERT(whole.streamed_args[i] == whole.calls[i].arguments);
        RC_ASSERT(!json::parse(whole.calls[i].arguments, nullptr, false).is_discarded());
    }
    for (const auto& chunks : {byte_chunks(text), random_chunks(text, parts.size())}) {
        const Parsed p = run(format, tools, chunks);
        RC_ASSERT(p.content == whole.content);
        RC_ASSERT(p.calls.size() == whole.calls.size());
        for (std::size_t i = 0; i < p.calls.size(); ++i) {
            RC_ASSERT(p.calls[i].name == whole.calls[i].name);
            RC_ASSERT(p.calls[i].arguments == whole.calls[i].arguments);
            RC_ASSERT(p.streamed_args[i] == p.calls[i].arguments);
        }
    }
}

TEST(ToolCallParserProperty, EverySplitPointOfTheSpecExamples) {
    const auto tools = weather_tools();
    const std::vector<std::pair<ToolCallFormat, std::string>> examples = {
        {ToolCallFormat::minimax_m3,
         "ok " + m3_block(m3_call("get_weather", {{"city", "Par</city>is"}, {"days", "3"}}) +
                          m3_call("write_file", {{"content", "x\ny"}}))},
        {ToolCallFormat::minimax_m2,
         m2_block("<invoke name=\"get_weather\">\n<parameter name=\"city\">\nParis\n</parameter>\n"
                  "<parameter name=\"days\">3</parameter>\n</invoke>\n")},
    };
    for (const auto& [format, text] : examples) {
        const Parsed whole = run(format, tools, {text});
        ASSERT_FALSE(whole.calls.empty());
        expect_well_formed(whole);
        for (std::size_t a = 1; a < text.size(); ++a) {
            const Parsed p = run(format, tools, cut_at(text, {a}));
            ASSERT_EQ(p.content, whole.content) << a;
            ASSERT_EQ(p.calls.size(), whole.calls.size()) << a;
            for (std::size_t i = 0; i < p.calls.size(); ++i) {
                ASSERT_EQ(p.calls[i].arguments, whole.calls[i].arguments) << a;
                ASSERT_EQ(p.streamed_args[i], p.calls[i].arguments) << a;
            }
        }
    }
}

}  // namespace
}  // namespace msa::server
