// Entry for running the CLI from source (`node --import tsx src/cli/run.ts …`); bin/parley.js runs the build.
import { run } from './main.js';

await run(process.argv.slice(2));
