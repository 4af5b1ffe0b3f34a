import { cliSuite } from './cli-suite.js';

cliSuite('postgres');
