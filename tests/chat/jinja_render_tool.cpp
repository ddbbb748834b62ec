// Batch renderer used by the cross-check scripts in tools/chat/: reads JSON lines {"template": ..., "context": {...},
// "now": <unix seconds, optional>} from stdin and writes one JSON line per input: {"output": ...} or
// {"error": ...}. Not a test itself; tools/chat/check_jinja_cases.py compares its answers with Python's jinja2.
#include "chat/jinja_template.h"

#include <nlohmann/json.hpp>

#include <iostream>
#include <string>

int main() {
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.empty()) {
            continue;
        }
        nlohmann::ordered_json out;
        try {
            const auto in = nlohmann::ordered_json::parse(line);
            msa::jinja::RenderOptions options;
            if (in.contains("now")) {
                options.now_unix_seconds = in["now"].get<std::int64_t>();
            }
            const msa::jinja::Template tmpl(in.at("template").get<std::string>(), "case");
            const msa::jinja::Value ctx = msa::jinja::from_json(in.value("context", nlohmann::ordered_json::object()));
            out["output"] = tmpl.render(ctx.as_dict(), options);
        } catch (const std::exception& e) {
            out["error"] = e.what();
        }
        std::cout << out.dump() << "\n" << std::flush;
    }
    return 0;
}
