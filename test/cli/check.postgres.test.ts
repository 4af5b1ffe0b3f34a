import { checkSuite } from './check-suite.js';

checkSuite('postgres');
