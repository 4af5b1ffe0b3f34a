// Test scaffolding, not product configuration: `node --import ./test/helpers/skewed-clock.mjs …` starts a process
// whose clock is PARLEY_TEST_CLOCK_SKEW_MS off (positive: ahead), as on a machine with a wrong clock. Date.now is
// what Parley's clocks read (src/lib/clock.ts); Date itself is left alone, so dates made by native code and by
// libraries stay what they are.
const skew = Number(process.env.PARLEY_TEST_CLOCK_SKEW_MS ?? 0);
if (!Number.isFinite(skew)) throw new Error(`PARLEY_TEST_CLOCK_SKEW_MS is not a number: ${process.env.PARLEY_TEST_CLOCK_SKEW_MS}`);
const now = Date.now;
Date.now = () => now() + skew;
