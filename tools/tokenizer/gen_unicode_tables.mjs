#!/usr/bin/env node
// Writes src/tokenizer/unicode_tables.inc: the Unicode character data our tokenizer needs to classify characters
// exactly the way Hugging Face's Rust `tokenizers` library (our parity oracle) does.
//
// Why generated: the oracle matches pre-tokenizer regexes with Oniguruma (Unicode 16.0 tables in tokenizers 0.23.2)
// and normalizes with a Unicode 9.0 NFC implementation, while Debian's PCRE2 10.42 carries Unicode 14.0 and utf8proc
// 2.8 carries Unicode 15.0. To get identical ids we
//   * take the general category of every code point from the oracle itself (we run a Split pre-tokenizer with the
//     pattern \p{Xx} for each of the 29 leaf categories through npm `tokenizers` and record what it matches), plus
//     its \s and \w sets;
//   * record Hugging Face's punctuation test and Lowercase normalizer, which use other (Rust) Unicode tables;
//   * list the code points assigned after Unicode 9.0 (from Debian unicode-data's DerivedAge.txt): the oracle's
//     normalizer treats them as unassigned, so our NFC leaves them and their neighbourhood alone.
//
// Usage: node tools/tokenizer/gen_unicode_tables.mjs [path/to/node_modules] > src/tokenizer/unicode_tables.inc
// (default node_modules: tests/npm/node_modules of this checkout). Needs Debian `unicode-data`.
import { createRequire } from 'module';
import fs from 'fs';
import path from 'path';
import { fileURLToPath } from 'url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const nodeModules = path.resolve(process.argv[2] ?? path.join(root, 'tests/npm/node_modules'));
const require = createRequire(path.join(nodeModules, 'noop.js'));
const tokenizers = require('tokenizers');
const oracleVersion = require('tokenizers/package.json').version;

const kMaxCodePoint = 0x10ffff;
const isSurrogate = (cp) => cp >= 0xd800 && cp <= 0xdfff;

// Returns a Uint8Array over all code points: 1 where the oracle's regex `pattern` matches that single code point.
function oracleClass(pattern) {
  const json = {
    version: '1.0', added_tokens: [], normalizer: null, post_processor: null, decoder: null,
    pre_tokenizer: { type: 'Split', pattern: { Regex: pattern }, behavior: 'Removed', invert: false },
    model: { type: 'BPE', vocab: {}, merges: [] },
  };
  const pre = tokenizers.Tokenizer.fromString(JSON.stringify(json)).getPreTokenizer();
  const member = new Uint8Array(kMaxCodePoint + 1);
  const kChunk = 4096;
  for (let base = 0; base <= kMaxCodePoint; base += kChunk) {
    let text = '';
    for (let cp = base; cp < base + kChunk && cp <= kMaxCodePoint; ++cp) {
      if (!isSurrogate(cp)) text += String.fromCodePoint(cp);
    }
    // "Removed" drops every match, so what is left are exactly the code points the pattern does not match.
    const left = new Set();
    for (const [piece] of pre.preTokenizeString(text)) for (const ch of piece) left.add(ch.codePointAt(0));
    for (let cp = base; cp < base + kChunk && cp <= kMaxCodePoint; ++cp) {
      if (!isSurrogate(cp) && !left.has(cp)) member[cp] = 1;
    }
  }
  return member;
}

function ranges(member) {
  const out = [];
  for (let cp = 0; cp <= kMaxCodePoint; ++cp) {
    if (!member[cp]) continue;
    if (out.length && out[out.length - 1][1] === cp - 1) out[out.length - 1][1] = cp;
    else out.push([cp, cp]);
  }
  return out;
}

const hex = (cp) => '0x' + cp.toString(16).toUpperCase();

// Leaf general categories, in the order of msa::UnicodeCategory (src/tokenizer/unicode.h). Cs and Cn are derived.
const kLeafCategories = ['Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'Mn', 'Mc', 'Me', 'Nd', 'Nl', 'No', 'Pc', 'Pd', 'Ps', 'Pe',
  'Pi', 'Pf', 'Po', 'Sm', 'Sc', 'Sk', 'So', 'Zs', 'Zl', 'Zp', 'Cc', 'Cf', 'Co'];
const kCs = kLeafCategories.length;      // surrogates (never valid in UTF-8 text)
const kCn = kLeafCategories.length + 1;  // unassigned
const category = new Uint8Array(kMaxCodePoint + 1).fill(kCn);
for (let cp = 0xd800; cp <= 0xdfff; ++cp) category[cp] = kCs;
kLeafCategories.forEach((name, index) => {
  const member = oracleClass(`\\p{${name}}`);
  for (let cp = 0; cp <= kMaxCodePoint; ++cp) {
    if (!member[cp]) continue;
    if (category[cp] !== kCn) throw new Error(`U+${cp.toString(16)} is in two categories`);
    category[cp] = index;
  }
});
const categoryRuns = [];
for (let cp = 0; cp <= kMaxCodePoint; ++cp) {
  if (cp === 0 || category[cp] !== category[cp - 1]) categoryRuns.push([cp, category[cp]]);
}

const whiteSpace = ranges(oracleClass('\\s'));
const word = ranges(oracleClass('\\w'));

// Code points a pre-tokenizer drops ("Removed" splits), probed chunk by chunk like oracleClass.
function oracleRemoved(preTokenizerJson) {
  const json = {
    version: '1.0', added_tokens: [], normalizer: null, post_processor: null, decoder: null,
    pre_tokenizer: preTokenizerJson, model: { type: 'BPE', vocab: {}, merges: [] },
  };
  const pre = tokenizers.Tokenizer.fromString(JSON.stringify(json)).getPreTokenizer();
  const member = new Uint8Array(kMaxCodePoint + 1);
  for (let base = 0; base <= kMaxCodePoint; base += 4096) {
    let text = '';
    for (let cp = base; cp < base + 4096 && cp <= kMaxCodePoint; ++cp) if (!isSurrogate(cp)) text += String.fromCodePoint(cp);
    const left = new Set();
    for (const [piece] of pre.preTokenizeString(text)) for (const ch of piece) left.add(ch.codePointAt(0));
    for (let cp = base; cp < base + 4096 && cp <= kMaxCodePoint; ++cp) if (!isSurrogate(cp) && !left.has(cp)) member[cp] = 1;
  }
  return member;
}

// Hugging Face's punctuation test (Punctuation and BertPreTokenizer pre-tokenizers) uses older Unicode tables than
// its regexes, so it gets a table of its own.
const punctuation = ranges(oracleRemoved({ type: 'Punctuation', behavior: 'Removed' }));

// The Digits and WhitespaceSplit pre-tokenizers use Rust's char::is_numeric and char::is_whitespace, whose Unicode
// version (17.0 in tokenizers 0.23.2) is newer than Oniguruma's: numeric gets a table of its own, and whitespace is
// checked to be the same set as \s.
function sameSet(a, b, what) {
  if (JSON.stringify(a) === JSON.stringify(b)) return;
  const expand = (r) => new Set(r.flatMap(([lo, hi]) => Array.from({ length: hi - lo + 1 }, (_, k) => lo + k)));
  const sa = expand(a), sb = expand(b);
  const onlyA = [...sa].filter((x) => !sb.has(x)), onlyB = [...sb].filter((x) => !sa.has(x));
  throw new Error(`${what} differs from the regex tables (only there: ${onlyA.slice(0, 10).map(hex)}, ` +
    `only in the tables: ${onlyB.slice(0, 10).map(hex)}): extend unicode.cpp`);
}
sameSet(ranges(oracleRemoved({ type: 'WhitespaceSplit' })), whiteSpace, 'WhitespaceSplit (char::is_whitespace)');
let numericRanges = [];
{
  // Digits(individual_digits) isolates each numeric character: interleave code points with 'a' and look for pieces
  // that are one character other than 'a'.
  const json = { version: '1.0', added_tokens: [], normalizer: null, post_processor: null, decoder: null,
    pre_tokenizer: { type: 'Digits', individual_digits: true }, model: { type: 'BPE', vocab: {}, merges: [] } };
  const pre = tokenizers.Tokenizer.fromString(JSON.stringify(json)).getPreTokenizer();
  const numeric = new Uint8Array(kMaxCodePoint + 1);
  for (let base = 0; base <= kMaxCodePoint; base += 4096) {
    let text = 'a';
    for (let cp = base; cp < base + 4096 && cp <= kMaxCodePoint; ++cp) {
      if (!isSurrogate(cp) && cp !== 0x61) text += String.fromCodePoint(cp) + 'a';
    }
    for (const [piece] of pre.preTokenizeString(text)) {
      const chars = [...piece];
      if (chars.length === 1 && chars[0] !== 'a') numeric[chars[0].codePointAt(0)] = 1;
    }
  }
  numericRanges = ranges(numeric);
}

// The Lowercase normalizer (Rust's char::to_lowercase, one character at a time): every code point it changes.
const lowercase = [];
{
  const normalizer = tokenizers.lowercase();
  for (let base = 0; base <= kMaxCodePoint; base += 4096) {
    const cps = [];
    for (let cp = base; cp < base + 4096 && cp <= kMaxCodePoint; ++cp) if (!isSurrogate(cp) && cp !== 1) cps.push(cp);
    const mapped = normalizer.normalizeString(cps.map((cp) => String.fromCodePoint(cp)).join('\u0001')).split('\u0001');
    if (mapped.length !== cps.length) throw new Error('lowercase probe lost its separators');
    cps.forEach((cp, i) => {
      if (mapped[i] !== String.fromCodePoint(cp)) lowercase.push([cp, mapped[i]]);
    });
  }
}

// Code points assigned after Unicode 9.0, from DerivedAge.txt.
const agePath = '/usr/share/unicode/DerivedAge.txt';
const post90 = new Uint8Array(kMaxCodePoint + 1);
for (const line of fs.readFileSync(agePath, 'utf8').split('\n')) {
  const body = line.split('#')[0].trim();
  if (!body) continue;
  const [range, age] = body.split(';').map((s) => s.trim());
  const [major, minor] = age.split('.').map(Number);
  if (major < 9 || (major === 9 && minor === 0)) continue;
  const [lo, hi] = range.includes('..') ? range.split('..').map((h) => parseInt(h, 16)) : [parseInt(range, 16), parseInt(range, 16)];
  for (let cp = lo; cp <= hi; ++cp) post90[cp] = 1;
}
const unicodeDataVersion = (fs.readFileSync(agePath, 'utf8').match(/DerivedAge-([0-9.]+)\.txt/) || [])[1] ?? '?';

function emitRanges(name, list) {
  const rows = [];
  for (let i = 0; i < list.length; i += 6) {
    rows.push('    ' + list.slice(i, i + 6).map(([a, b]) => `{${hex(a)}, ${hex(b)}}`).join(', ') + ',');
  }
  return `inline constexpr CodePointRange ${name}[] = {\n${rows.join('\n')}\n};\n`;
}

let out = '';
out += '// Generated by tools/tokenizer/gen_unicode_tables.mjs: do not edit by hand.\n';
out += `// Character classes as seen by npm tokenizers ${oracleVersion} (Oniguruma regexes); Unicode ${unicodeDataVersion} ages from\n`;
out += '// Debian unicode-data DerivedAge.txt. Included only by src/tokenizer/unicode.cpp.\n\n';
out += `inline constexpr const char* kUnicodeTablesOracle = "npm tokenizers ${oracleVersion}";\n\n`;
out += '// General category runs: each entry starts a run of code points with that category (msa::UnicodeCategory).\n';
const runRows = [];
for (let i = 0; i < categoryRuns.length; i += 8) {
  runRows.push('    ' + categoryRuns.slice(i, i + 8).map(([cp, cat]) => `{${hex(cp)}, ${cat}}`).join(', ') + ',');
}
out += `inline constexpr CategoryRun kCategoryRuns[] = {\n${runRows.join('\n')}\n};\n\n`;
out += '// The oracle regex engine\'s \\s (Unicode White_Space).\n' + emitRanges('kWhiteSpaceRanges', whiteSpace) + '\n';
out += '// The oracle regex engine\'s \\w (Alphabetic, marks, decimal digits, connector punctuation, join controls).\n';
out += emitRanges('kWordRanges', word) + '\n';
out += '// Hugging Face\'s punctuation test (ASCII punctuation or an older Unicode\'s P* categories).\n';
out += emitRanges('kPunctuationRanges', punctuation) + '\n';
out += '// Rust\'s char::is_numeric (the Digits pre-tokenizer).\n';
out += emitRanges('kNumericRanges', numericRanges) + '\n';
out += '// The Lowercase normalizer: every code point it changes, with its lowercase form (UTF-8).\n';
const cString = (s) => '"' + [...Buffer.from(s, 'utf8')].map((b) => '\\x' + b.toString(16).padStart(2, '0')).join('') + '"';
const lowerRows = [];
for (let i = 0; i < lowercase.length; i += 4) {
  lowerRows.push('    ' + lowercase.slice(i, i + 4).map(([cp, s]) => `{${hex(cp)}, ${cString(s)}}`).join(', ') + ',');
}
out += `inline constexpr LowercaseMapping kLowercaseMappings[] = {\n${lowerRows.join('\n')}\n};\n\n`;
out += '// Code points assigned after Unicode 9.0: the oracle\'s normalizers do not know them.\n';
out += emitRanges('kAssignedAfterUnicode9Ranges', ranges(post90));
process.stdout.write(out);
