/**
 * Static word vectors: a meaning signal for re-ranking that costs microseconds.
 *
 * The table (assets/word-vectors.bin, built by scripts/build-word-vectors.mjs) holds 20,000 frequent English words,
 * each the Universal Sentence Encoder's embedding of that word alone, centred, reduced to 64 dimensions and
 * quantised to int8 — Model2Vec's distillation. A text's vector is the SIF-weighted sum of its words' vectors
 * (a / (a + p(word)): frequent words count less), unit length. Lexical retrieval cannot see that "nudge clients
 * who pay late" is about reminders; these vectors partly can. The encoder itself would take 15-26 ms per query on
 * a 2-core machine, over the whole reply budget; this takes a few microseconds.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { normalize } from './text.js';

/** Beside this module: in src/ for the sources, copied to dist/ by the build (scripts/build.mjs). */
export const WORD_VECTORS_FILE = fileURLToPath(new URL('./assets/word-vectors.bin', import.meta.url));

/** SIF smoothing: a word that is 0.1% of running text weighs half as much as a rare one. */
const SIF_A = 1e-3;

export class WordVectors {
  readonly dims: number;
  private readonly rows = new Map<string, number>();
  /** Per word: its SIF weight times its int8 scale, the one factor embed() applies to its row. */
  private readonly factors: Float32Array;
  private readonly values: Int8Array;

  private constructor(buf: Buffer) {
    if (buf.length < 16 || buf.toString('ascii', 0, 4) !== 'PWV1') throw new Error('word vectors: not a PWV1 file');
    const count = buf.readUInt32LE(4);
    this.dims = buf.readUInt32LE(8);
    const listBytes = buf.readUInt32LE(12);
    const words = buf.toString('utf8', 16, 16 + listBytes).split('\n');
    if (words.length !== count) throw new Error('word vectors: word list does not match the header');
    let off = 16 + listBytes;
    if (buf.length !== off + count * (8 + this.dims)) throw new Error('word vectors: file is truncated or too long');
    // Copies, not views: the typed arrays need aligned offsets, the file does not promise them.
    const copy = (bytes: number) => {
      const out = new Uint8Array(bytes);
      out.set(buf.subarray(off, off + bytes));
      off += bytes;
      return out.buffer;
    };
    const shares = new Float32Array(copy(count * 4));
    const scales = new Float32Array(copy(count * 4));
    this.values = new Int8Array(copy(count * this.dims));
    this.factors = shares.map((p, i) => (SIF_A / (SIF_A + p)) * scales[i]!);
    words.forEach((w, i) => this.rows.set(w, i));
  }

  static fromBuffer(buf: Buffer): WordVectors {
    return new WordVectors(buf);
  }

  /** Unit-length vector of a text, or undefined when it has no word the table knows. */
  embed(text: string): Float32Array | undefined {
    const out = new Float32Array(this.dims);
    let any = false;
    for (const w of normalize(text).match(/[a-z]+/g) ?? []) {
      const row = this.rows.get(w);
      if (row === undefined) continue;
      any = true;
      const f = this.factors[row]!;
      const base = row * this.dims;
      for (let k = 0; k < this.dims; k++) out[k]! += f * this.values[base + k]!;
    }
    if (!any) return undefined;
    let n = 0;
    for (let k = 0; k < this.dims; k++) n += out[k]! * out[k]!;
    if (n === 0) return undefined;
    n = Math.sqrt(n);
    for (let k = 0; k < this.dims; k++) out[k]! /= n;
    return out;
  }
}

/** Cosine of two unit vectors. */
export function cosine(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let k = 0; k < a.length; k++) s += a[k]! * b[k]!;
  return s;
}

let shared: WordVectors | undefined;
/** The table, loaded once per process (1.6 MB, a few milliseconds). */
export function wordVectors(): WordVectors {
  shared ??= WordVectors.fromBuffer(readFileSync(WORD_VECTORS_FILE));
  return shared;
}
