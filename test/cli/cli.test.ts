// Real `parley` child processes against a temporary SQLite file. The PostgreSQL run and the configuration
// checks live in sibling files so the test runner spreads the slow process start-ups over several workers.
import { cliSuite } from './cli-suite.js';

cliSuite('sqlite');
