// End-to-end tests of `msa serve` with the real OpenAI client (openai 6.x), run by Node's built-in test runner
// through tests/server/e2e/run_with_server.py, which starts the server on a random-weight model and sets
// MSA_BASE_URL, MSA_API_KEY and MSA_MODEL. Random weights produce arbitrary text, so the tests check what does
// not depend on the text: shapes, counts, agreement between streamed and whole responses, seeded
// reproducibility, stop/limit behaviour, where reasoning and forced tool calls land, errors and auth.
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = `${process.env.MSA_BASE_URL}/v1`;
const apiKey = process.env.MSA_API_KEY;
const model = process.env.MSA_MODEL;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

const user = (content) => [{ role: "user", content }];
const noThinking = { chat_template_kwargs: { thinking_mode: "disabled" } };

test("models lists the served model", async () => {
  const page = await client.models.list();
  assert.deepEqual(page.data.map((m) => m.id), [model]);
  assert.equal(page.data[0].object, "model");
});

test("chat completion: shape and usage", async () => {
  const r = await client.chat.completions.create({
    model, messages: user("Hello"), max_tokens: 12, temperature: 0, ...noThinking,
  });
  assert.equal(r.object, "chat.completion");
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 12);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test("greedy is deterministic and a seed reproduces a sample", async () => {
  const body = { model, messages: user("Count"), max_tokens: 10, ...noThinking };
  const a = await client.chat.completions.create({ ...body, temperature: 0 });
  const b = await client.chat.completions.create({ ...body, temperature: 0 });
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  const s1 = await client.chat.completions.create({ ...body, temperature: 1, seed: 42 });
  const s2 = await client.chat.completions.create({ ...body, temperature: 1, seed: 42 });
  assert.equal(s1.choices[0].message.content, s2.choices[0].message.content);
});

test("streaming with include_usage concatenates to the whole response", async () => {
  const body = { model, messages: user("Stream please"), max_tokens: 16, temperature: 0, ...noThinking };
  const whole = await client.chat.completions.create(body);
  const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let text = "";
  let role = null;
  let finish = null;
  let usage = null;
  let ids = new Set();
  for await (const chunk of stream) {
    ids.add(chunk.id);
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      text += c.delta.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(ids.size, 1);
  assert.equal(role, "assistant");
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage.completion_tokens, whole.usage.completion_tokens);
  assert.deepEqual(usage.prompt_tokens, whole.usage.prompt_tokens);
});

test("stop strings cut the output where they first appear", async () => {
  const body = { model, messages: user("Say things"), max_tokens: 40, temperature: 0, ignore_eos: true, ...noThinking };
  const full = (await client.chat.completions.create(body)).choices[0].message.content;
  assert.ok(full.length >= 6, `too little text to test stop strings: ${JSON.stringify(full)}`);
  const stop = full.slice(3, 5);
  const r = await client.chat.completions.create({ ...body, stop: [stop] });
  assert.equal(r.choices[0].message.content, full.slice(0, full.indexOf(stop)));
  assert.equal(r.choices[0].finish_reason, "stop");
});

test("max_tokens ends with finish_reason length", async () => {
  const r = await client.chat.completions.create({
    model, messages: user("Go on"), max_tokens: 5, ignore_eos: true, ...noThinking,
  });
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 5);
});

test("n choices, each reproducible with a seed", async () => {
  const body = { model, messages: user("Pick"), max_tokens: 8, temperature: 1, seed: 5, n: 3, ...noThinking };
  const a = await client.chat.completions.create(body);
  const b = await client.chat.completions.create(body);
  assert.deepEqual(a.choices.map((c) => c.index), [0, 1, 2]);
  assert.deepEqual(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content));
  const stream = await client.chat.completions.create({ ...body, stream: true });
  const texts = ["", "", ""];
  for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.delta.content ?? "";
  assert.deepEqual(texts, a.choices.map((c) => c.message.content));
});

test("chat logprobs: one entry per token, alternatives sorted", async () => {
  const r = await client.chat.completions.create({
    model, messages: user("Hi"), max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3, ignore_eos: true,
    ...noThinking,
  });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const t of content) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(t.logprob - t.top_logprobs[0].logprob) < 1e-4);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
    assert.ok(Array.isArray(t.bytes) && t.bytes.length > 0);
  }
});

test("completions: text, echo, logprobs, streaming", async () => {
  const r = await client.completions.create({ model, prompt: "Once upon", max_tokens: 8, temperature: 0, logprobs: 2 });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices[0].logprobs.tokens.length, r.usage.completion_tokens);
  const echo = await client.completions.create({ model, prompt: "Once upon", max_tokens: 8, temperature: 0, echo: true });
  assert.equal(echo.choices[0].text, "Once upon" + r.choices[0].text);
  const stream = await client.completions.create({
    model, prompt: "Once upon", max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = "";
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) text += c.text;
  }
  assert.equal(text, r.choices[0].text);
  assert.equal(usage.completion_tokens, r.usage.completion_tokens);
});

test("reasoning: thinking_mode enabled puts the output in reasoning_content", async () => {
  const r = await client.chat.completions.create({
    model, messages: user("Think"), max_tokens: 12, temperature: 0, ignore_eos: true,
    chat_template_kwargs: { thinking_mode: "enabled" },
  });
  const m = r.choices[0].message;
  assert.ok(m.reasoning_content.length > 0);
  assert.equal(m.reasoning, m.reasoning_content);
  assert.ok(!m.reasoning_content.includes("<mm:think>"));
  assert.equal(r.usage.completion_tokens_details.reasoning_tokens, r.usage.completion_tokens);
  const stream = await client.chat.completions.create({
    model, messages: user("Think"), max_tokens: 12, temperature: 0, ignore_eos: true, stream: true,
    chat_template_kwargs: { thinking_mode: "enabled" },
  });
  let reasoning = "";
  let content = "";
  for await (const chunk of stream) for (const c of chunk.choices) {
    reasoning += c.delta.reasoning_content ?? "";
    content += c.delta.content ?? "";
  }
  assert.equal(reasoning, m.reasoning_content);
  assert.equal(content, m.content ?? "");
});

const tools = [{
  type: "function",
  function: {
    name: "search_code",
    description: "Search the repository",
    parameters: { type: "object", properties: { query: { type: "string" }, limit: { type: "integer" } } },
  },
}];

test("tool_choice named forces a call; streamed argument fragments concatenate to the arguments", async () => {
  const body = {
    model, messages: user("Find the scheduler"), tools, max_tokens: 24, temperature: 0, ignore_eos: true,
    tool_choice: { type: "function", function: { name: "search_code" } }, ...noThinking,
  };
  const r = await client.chat.completions.create(body);
  const calls = r.choices[0].message.tool_calls;
  assert.ok(calls.length >= 1, JSON.stringify(r));
  assert.equal(calls[0].type, "function");
  assert.equal(calls[0].function.name, "search_code");
  assert.match(calls[0].id, /^call_/);
  JSON.parse(calls[0].function.arguments);  // always valid JSON, whatever the model wrote

  const stream = await client.chat.completions.create({ ...body, stream: true });
  const streamed = [];
  for await (const chunk of stream) {
    for (const c of chunk.choices) for (const f of c.delta.tool_calls ?? []) {
      if (f.id) streamed[f.index] = { id: f.id, name: f.function.name, arguments: f.function.arguments ?? "" };
      else streamed[f.index].arguments += f.function.arguments ?? "";
    }
  }
  assert.equal(streamed.length, calls.length);
  assert.equal(streamed[0].name, "search_code");
  assert.equal(streamed[0].arguments, calls[0].function.arguments);
});

test("tool_choice none leaves tools unparsed", async () => {
  const r = await client.chat.completions.create({
    model, messages: user("Hi"), tools, tool_choice: "none", max_tokens: 8, ...noThinking,
  });
  assert.equal(r.choices[0].message.tool_calls ?? undefined, undefined);
});

test("errors: wrong key, unknown model, bad field, context overflow", async () => {
  const bad = new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  await assert.rejects(
    client.chat.completions.create({ model: "no-such-model", messages: user("x") }),
    (e) => e instanceof OpenAI.NotFoundError && e.param === "model");
  await assert.rejects(
    client.chat.completions.create({ model, messages: user("x"), temperature: 7 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === "temperature");
  await assert.rejects(
    client.chat.completions.create({ model, messages: user("x"), max_tokens: 1_000_000 }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === "context_length_exceeded");
});

test("abort mid-stream cancels the request on the server", async () => {
  // Server-side evidence only: how many chunks the SDK still yields from bytes it had already read when the
  // abort came depends on TCP batching, which a tiny fast model makes large. The engine's own token counter
  // shows whether it stopped: a request the server failed to cancel runs on to max_tokens.
  const metric = async (pattern) => {
    const text = await (await fetch(`${process.env.MSA_BASE_URL}/metrics`)).text();
    const m = text.match(pattern);
    assert.ok(m, `metric ${pattern} missing`);
    return Number(m[1]);
  };
  const running = () => metric(/^vllm:num_requests_running\{[^}]*\} (\S+)$/m);
  const aborted = () => metric(/^vllm:request_success_total\{[^}]*finished_reason="abort"[^}]*\} (\S+)$/m);
  const generated = () => metric(/^msa:engine_generation_tokens_total\{[^}]*\} (\S+)$/m);
  const aborted0 = await aborted();
  const generated0 = await generated();
  const maxTokens = 4000;
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { model, messages: user("Long"), max_tokens: maxTokens, ignore_eos: true, stream: true, ...noThinking },
    { signal: controller.signal });
  let chunks = 0;
  try {
    for await (const _ of stream) {
      if (++chunks === 3) { controller.abort(); break; }
    }
  } catch (e) {
    assert.ok(e.name === "AbortError" || e instanceof OpenAI.APIUserAbortError, String(e));
  }
  assert.equal(chunks, 3);
  // The server notices the closed connection and cancels the sequence: nothing stays running, the request is
  // counted as aborted, and it stopped well short of max_tokens.
  const deadline = Date.now() + 10_000;
  while ((await running()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.equal(await running(), 0);
  assert.equal(await aborted(), aborted0 + 1);
  const spent = (await generated()) - generated0;
  assert.ok(spent < maxTokens / 2, `the server generated ${spent} of ${maxTokens} tokens after the abort`);
  const r = await client.chat.completions.create({ model, messages: user("Hi"), max_tokens: 4, ...noThinking });
  assert.equal(r.choices.length, 1);
});
