// Real `parley accounts update|delete` child processes against a SQLite file a running API node shares.
import { accountsCliSuite } from './accounts-suite.js';

accountsCliSuite('sqlite');
