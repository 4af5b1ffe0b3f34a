import assert from 'node:assert/strict';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * Reads a scrape in the Prometheus text format (0.0.4), checking it on the way: every line a comment or a sample,
 * every sample in a family declared by a TYPE line (a histogram's series by its _bucket, _sum and _count), no
 * family declared twice.
 */
export function parseExposition(text: string) {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  assert.ok(text.endsWith('\n'), 'the exposition ends with a line feed');
  for (const line of text.split('\n').slice(0, -1)) {
    if (line.startsWith('# HELP ')) continue;
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      assert.ok(!types.has(name!), `family ${name} declared twice`);
      assert.match(type!, /^(counter|gauge|histogram)$/);
      types.set(name!, type!);
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `not a sample line: ${JSON.stringify(line)}`);
    const [, name, labelText, value] = m;
    const labels: Record<string, string> = {};
    for (const l of labelText?.matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g) ?? []) labels[l[1]!] = l[2]!;
    const family = types.has(name!) ? name! : name!.replace(/_(bucket|sum|count)$/, '');
    assert.ok(types.has(family), `sample ${name} has no TYPE line`);
    if (family !== name) assert.equal(types.get(family), 'histogram', `${name} belongs to a histogram`);
    assert.ok(!name!.startsWith('parley_') || /^parley_[a-z0-9_]+$/.test(name!), `metric name ${name}`);
    samples.push({ name: name!, labels, value: value === '+Inf' ? Infinity : Number(value) });
  }
  const matching = (name: string, labels: Record<string, string> = {}) =>
    samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return {
    types,
    samples,
    text,
    matching,
    /** The sum of the samples of `name` with these labels (among others); undefined when there is none. */
    value(name: string, labels: Record<string, string> = {}): number | undefined {
      const found = matching(name, labels);
      return found.length ? found.reduce((n, s) => n + s.value, 0) : undefined;
    },
  };
}

export type Exposition = ReturnType<typeof parseExposition>;
