// `parley check` over SQLite, and what does not depend on the dialect; PostgreSQL in check.postgres.test.ts.
import { checkSuite, checkSuiteOnce } from './check-suite.js';

checkSuite('sqlite');
checkSuiteOnce();
