"""Python's jinja2 configured the way Hugging Face transformers renders chat templates.

transformers (utils/chat_template_utils.py) compiles chat templates with
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) plus the loopcontrols extension and its own
`{% generation %}` tag, replaces the `tojson` filter with json.dumps(ensure_ascii=False, indent, separators,
sort_keys), and adds the globals raise_exception() and strftime_now(). This module rebuilds that environment (our
own code, same configuration) so that golden files are rendered by the real jinja2 engine. Run it with Debian's
/usr/bin/python3 and python3-jinja2.
"""

import json
from datetime import datetime

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(Extension):
    """`{% generation %}...{% endgeneration %}`: renders its body like a call block (HF uses it to find the
    assistant tokens; the text is unchanged)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def make_environment(now=None):
    """The HF chat-template environment; `now` (a datetime) fixes what strftime_now() formats."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: (now or datetime.now()).strftime(fmt)
    return env


def render(source, context, now=None):
    """Renders `source` with `context`; returns ("ok", text) or ("error", message)."""
    try:
        template = make_environment(now).from_string(source)
        return "ok", template.render(**context)
    except Exception as e:  # any jinja2 or Python error is a render error
        return "error", f"{type(e).__name__}: {e}"
