// Encodes (and decodes back) texts with Hugging Face's own `tokenizers` (the Rust library, npm package pinned in
// tests/npm): the oracle for tools/train/bpe.py. Usage: node hf_tokenize.js TOKENIZER_JSON TEXTS_JSON
// TEXTS_JSON holds a JSON array of strings; prints {"ids": [[...], ...], "decoded": [...], "vocab_size": N}.
"use strict";
const fs = require("fs");
const { Tokenizer } = require("tokenizers");

async function main() {
  const [tokPath, textsPath] = process.argv.slice(2);
  const tok = Tokenizer.fromFile(tokPath);
  const texts = JSON.parse(fs.readFileSync(textsPath, "utf8"));
  const ids = [];
  const decoded = [];
  for (const t of texts) {
    const enc = await tok.encode(t, null, { addSpecialTokens: false });
    const row = enc.getIds();
    ids.push(row);
    decoded.push(await tok.decode(row, false));
  }
  process.stdout.write(JSON.stringify({ ids, decoded, vocab_size: tok.getVocabSize(true) }));
}
main().catch((e) => { console.error(e); process.exit(1); });
