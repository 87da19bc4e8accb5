'use strict';
/**
 * The suites of phase 1 that cannot run beside other suites, each with the reason (docs/testing.md, "Phase 1 in
 * parallel"). Every other suite is isolated by its driver name (task queues, workflow IDs), its own ports
 * (temporal-dev/free-port.ts), pools, sockets and temporary directories, so scripts/test.js runs several at a time;
 * these run alone afterwards.
 */
const EXCLUSIVE_SUITES = {};

module.exports = { EXCLUSIVE_SUITES };
