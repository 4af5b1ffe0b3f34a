import { nodesSuite } from './nodes-suite.js';

nodesSuite('sqlite');
