#!/usr/bin/env node
// The `coinvoice` binary: a committed, executable shim (npm links it before `tsc -b` has built dist/).
require('../dist/main.js');
