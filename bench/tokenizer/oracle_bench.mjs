#!/usr/bin/env node
// Throughput of Hugging Face's Rust tokenizers (npm `tokenizers`, the parity oracle) on the same inputs as
// tokenizer_bench, for comparison: one document per encode() call, and all lines through encodeBatch() with
// TOKENIZERS_PARALLELISM=false so that it stays on one thread. Times are process CPU time (all threads) and wall
// time, best of the repetitions. Prints one JSON object.
//
// Usage: TOKENIZERS_PARALLELISM=false node bench/tokenizer/oracle_bench.mjs NODE_MODULES TOKENIZER_JSON TEXT [REPS]
import { createRequire } from 'module';
import fs from 'fs';
import path from 'path';

const [nodeModules, tokenizerPath, textPath, repsArg] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(nodeModules), 'noop.js'));
const { Tokenizer } = require('tokenizers');
const version = require('tokenizers/package.json').version;
const reps = Number(repsArg ?? 5);

const text = fs.readFileSync(textPath, 'utf8');
const lines = text.split('\n').map((l) => l + '\n');
const megabytes = Buffer.byteLength(text, 'utf8') / 1e6;
const tokenizer = Tokenizer.fromFile(tokenizerPath);

async function best(body) {
  let cpu = Infinity, wall = Infinity;
  for (let r = 0; r < reps; ++r) {
    const c0 = process.cpuUsage();
    const w0 = process.hrtime.bigint();
    await body();
    const c = process.cpuUsage(c0);
    cpu = Math.min(cpu, (c.user + c.system) / 1e6);
    wall = Math.min(wall, Number(process.hrtime.bigint() - w0) / 1e9);
  }
  return { cpu_best: megabytes / cpu, wall_best: megabytes / wall, unit: 'MB/s', repetitions: reps };
}

const document = await best(() => tokenizer.encode(text, null, { addSpecialTokens: false }));
const batch = await best(() => tokenizer.encodeBatch(lines, { addSpecialTokens: false }));
console.log(JSON.stringify({ implementation: `npm tokenizers ${version}`, tokenizer: tokenizerPath, text: textPath,
  encode_document: document, encode_lines_batch: batch }));
