/**
 * The Prometheus text exposition format (version 0.0.4), written by hand: the service needs counters, gauges and
 * histograms rendered at scrape time from numbers its parts already keep, which is a page of code, where a client
 * library would bring its own registry, metric objects and label lookups on every increment.
 */

export const EXPOSITION_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export type MetricType = 'counter' | 'gauge' | 'histogram';

/** A label value as the format quotes it: backslash, double quote and line feed escaped. */
export const labelValue = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

/**
 * `a="x",b="y"` (no braces), for label sets computed once and reused on every scrape. Names are the caller's
 * constants; values are escaped.
 */
export function labelPairs(labels: Record<string, string>): string {
  return Object.entries(labels)
    .map(([k, v]) => `${k}="${labelValue(v)}"`)
    .join(',');
}

export function formatNumber(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (n === Infinity) return '+Inf';
  if (n === -Infinity) return '-Inf';
  return String(n);
}

/** Writes one scrape's text: each family's HELP and TYPE lines, then its samples. */
export class Exposition {
  private readonly parts: string[] = [];

  family(name: string, type: MetricType, help: string): this {
    this.parts.push(`# HELP ${name} ${help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}\n# TYPE ${name} ${type}\n`);
    return this;
  }

  /** `labels`: preformatted pairs (labelPairs), '' for none. */
  sample(name: string, labels: string, value: number): this {
    this.parts.push(labels ? `${name}{${labels}} ${formatNumber(value)}\n` : `${name} ${formatNumber(value)}\n`);
    return this;
  }

  /** A family of one unlabelled sample. */
  single(name: string, type: MetricType, help: string, value: number): this {
    return this.family(name, type, help).sample(name, '', value);
  }

  /** A histogram's series: cumulative buckets (`counts` per bucket, the last being +Inf), _sum and _count. */
  histogram(name: string, labels: string, bounds: readonly string[], counts: ArrayLike<number>, sum: number): this {
    let cumulative = 0;
    const sep = labels ? ',' : '';
    for (let i = 0; i < bounds.length; i++) {
      cumulative += counts[i]!;
      this.parts.push(`${name}_bucket{${labels}${sep}le="${bounds[i]}"} ${cumulative}\n`);
    }
    this.sample(`${name}_sum`, labels, sum);
    return this.sample(`${name}_count`, labels, cumulative);
  }

  text(): string {
    return this.parts.join('');
  }
}
