import { accountsCliSuite } from './accounts-suite.js';

accountsCliSuite('postgres');
