import { cliConfigSuite } from './cli-suite.js';

cliConfigSuite();
